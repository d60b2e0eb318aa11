// Deferred sync of the file store: the Instances one thread creates between
// defer_sync() and sync() share one fdatasync of the journal; every other
// write stays durable when it returns.
//
// The journal's fdatasync calls are counted by wrapping the C library's
// fdatasync in this executable (each call still goes to the real one, on the
// real file): nothing else can tell whether a write reached the disk.
#include <dlfcn.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "eventually.hpp"
#include "instance_files.hpp"
#include "instance_store.hpp"
#include "posix_io.hpp"
#include "test_support.hpp"

namespace {

std::atomic<int> journal_syncs{0};
std::atomic<std::thread::id> last_journal_sync_thread{};

}  // namespace

extern "C" int fdatasync(int fd) {
  using Real = int (*)(int);
  static const auto real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "fdatasync"));
  if (!dowser::store::testing::is_journal_fd(fd)) return real(fd);
  const int result = real(fd);
  last_journal_sync_thread = std::this_thread::get_id();
  ++journal_syncs;  // after the thread: a waiter for the count then sees the thread
  return result;
}

namespace dowser::store::testing {
namespace {

class DeferredSyncTest : public ::testing::Test {
 protected:
  // Creates Instances cam-<first> .. cam-<first + count - 1>.
  void create(int first, int count) {
    for (int i = first; i < first + count; ++i)
      store_.create(sample_instance("cam-" + std::to_string(i)));
  }
  // The journal's fdatasync calls made by `work`.
  template <typename Work>
  int journal_syncs_of(Work work) {
    const int before = journal_syncs.load();
    work();
    return journal_syncs.load() - before;
  }

  TemporaryDirectory directory_{TemporaryDirectory::Medium::memory};
  FileInstanceStore store_{directory_.path()};
};

TEST_F(DeferredSyncTest, EveryWriteSyncsTheJournalWhenNotDeferred) {
  EXPECT_EQ(journal_syncs_of([&] { create(0, 3); }), 3);
  EXPECT_EQ(journal_syncs_of([&] { store_.sync(); }), 0) << "nothing was owed";
}

TEST_F(DeferredSyncTest, DeferredCreatesShareOneSync) {
  store_.defer_sync();
  EXPECT_EQ(journal_syncs_of([&] { create(0, 3); }), 0);
  ASSERT_TRUE(store_.get("default", "cam-1").has_value()) << "a deferred create is stored at once";
  EXPECT_EQ(store_.list().size(), 3u);
  EXPECT_EQ(journal_syncs_of([&] { store_.sync(); }), 1);
  EXPECT_EQ(journal_syncs_of([&] { create(3, 1); }), 1) << "sync() ended the deferral";
}

TEST_F(DeferredSyncTest, UpdatesAndRemovalsAreDurableAtOnceAndTakeTheCreatesWithThem) {
  store_.defer_sync();
  create(0, 2);
  EXPECT_EQ(journal_syncs_of([&] {
              auto stored = store_.get("default", "cam-0");
              auto changed = stored->instance;
              changed.device_usage["cam-0-0"] = "node-a";  // a claim
              store_.update(changed, stored->revision);
            }),
            1);
  EXPECT_EQ(journal_syncs_of([&] { store_.sync(); }), 0) << "the update's sync covered the creates";
  store_.defer_sync();
  EXPECT_EQ(journal_syncs_of([&] {
              store_.remove("default", "cam-1", store_.get("default", "cam-1")->revision);
            }),
            1);
  store_.sync();
  EXPECT_EQ(store_.get("default", "cam-0")->instance.device_usage.at("cam-0-0"), "node-a");
  EXPECT_FALSE(store_.get("default", "cam-1").has_value());
}

TEST_F(DeferredSyncTest, AnotherThreadsCreatesAreDurableWhenTheyReturn) {
  store_.defer_sync();
  create(0, 1);
  EXPECT_EQ(journal_syncs_of([&] { std::thread([&] { create(1, 2); }).join(); }), 2);
  // Those syncs made the deferred create durable too: nothing is owed.
  EXPECT_EQ(journal_syncs_of([&] { store_.sync(); }), 0);
}

TEST_F(DeferredSyncTest, TheStoreCountsItsJournalSyncsAsTheyHappen) {
  const uint64_t before = store_.journal_syncs().value();
  const int made = journal_syncs_of([&] {
    create(0, 2);
    store_.defer_sync();
    create(2, 3);
    store_.sync();
  });
  EXPECT_EQ(made, 3);
  EXPECT_EQ(store_.journal_syncs().value() - before, static_cast<uint64_t>(made));
}

TEST_F(DeferredSyncTest, ADeferralThatCreatedNothingEndsWithoutWaitingForTheStoreLock) {
  // Another process holds the store's lock (in a checkpoint, say): a
  // discovery report that created nothing has nothing to sync, so it must
  // not wait for that process.
  auto other_process = std::make_unique<detail::FileLock>(
      detail::InstanceFiles(directory_.path()).lock_file(), detail::FileLock::Mode::exclusive);
  auto ended = std::async(std::launch::async, [&] {
    store_.defer_sync();
    store_.sync();
  });
  EXPECT_EQ(ended.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "sync() waited for the store lock with nothing deferred";
  other_process.reset();  // lets a sync that did wait finish before the test ends
}

TEST_F(DeferredSyncTest, TheGuardSyncsWhenItGoes) {
  EXPECT_EQ(journal_syncs_of([&] {
              const DeferredSync batch(store_);
              create(0, 4);
            }),
            1);
}

// The daemon's core thread must not wait for the disk: it hands the sync of
// a report's new Instances to the store's own thread.
TEST_F(DeferredSyncTest, ASyncHandedToTheStoresThreadHappensThereOnce) {
  const int before = journal_syncs.load();
  {
    const DeferredSync batch(store_, DeferredSync::SyncOn::store_thread);
    create(0, 3);
  }
  ASSERT_TRUE(dowser::test::eventually([&] { return journal_syncs.load() > before; }))
      << "the handed-over sync never happened";
  ASSERT_EQ(journal_syncs.load() - before, 1);
  EXPECT_NE(last_journal_sync_thread.load(), std::this_thread::get_id());
  EXPECT_EQ(journal_syncs_of([&] { store_.sync(); }), 0) << "nothing is owed any more";
  EXPECT_EQ(journal_syncs_of([&] { create(3, 1); }), 1) << "the deferral ended";
}

TEST_F(DeferredSyncTest, ClosingTheStoreMakesDeferredCreatesDurable) {
  TemporaryDirectory directory{TemporaryDirectory::Medium::memory};
  auto store = std::make_unique<FileInstanceStore>(directory.path());
  store->defer_sync();
  store->create(sample_instance("cam-0"));
  EXPECT_EQ(journal_syncs_of([&] { store.reset(); }), 1);
  EXPECT_EQ(FileInstanceStore(directory.path()).list().size(), 1u);
}

}  // namespace
}  // namespace dowser::store::testing
