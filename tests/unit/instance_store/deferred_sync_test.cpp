// Deferred sync of the file store: the Instances one thread creates between
// defer_sync(creates) and sync() share one fdatasync of the journal; every
// other write stays durable when it returns. Between defer_sync(flush) and
// sync(), every write of the thread is written to the disk, and the flush
// that makes them durable is shared.
//
// The journal's fdatasync and sync_file_range calls are counted by wrapping
// the C library's in this executable (each call still goes to the real one,
// on the real file): nothing else can tell whether a write reached the disk.
// Where the kernel has cachestat (Linux 6.5), a test also reads the journal's
// page cache, to see that a written record left nothing dirty.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "eventually.hpp"
#include "instance_files.hpp"
#include "instance_store.hpp"
#include "posix_io.hpp"
#include "store_journal.hpp"
#include "test_support.hpp"

namespace {

std::atomic<int> journal_syncs{0};
std::mutex journal_syncs_mutex;  // for journal_synced's waiters
std::condition_variable journal_synced;
std::atomic<int> journal_write_outs{0};
std::atomic<std::thread::id> last_journal_sync_thread{};
thread_local int journal_syncs_on_this_thread = 0;
std::atomic<int> journal_zero_fill_error{0};  // the errno zero-filling the journal fails with
std::atomic<int> journal_zero_fills_failed{0};

// Zeros written to the journal are its growth (records start with a magic).
bool is_journal_zero_fill(int fd, const void* data, size_t count) {
  if (journal_zero_fill_error.load() == 0 || count < 4096) return false;
  const auto* bytes = static_cast<const char*>(data);
  return std::all_of(bytes, bytes + count, [](char c) { return c == 0; }) &&
         dowser::store::testing::is_journal_fd(fd);
}

// Whether the journal's fdatasync count passes `count` within ten seconds.
bool journal_syncs_exceed(int count) {
  std::unique_lock<std::mutex> lock(journal_syncs_mutex);
  return journal_synced.wait_for(lock, std::chrono::seconds(10),
                                 [&] { return journal_syncs.load() > count; });
}

}  // namespace

extern "C" int sync_file_range(int fd, off64_t offset, off64_t count, unsigned int flags) {
  using Real = int (*)(int, off64_t, off64_t, unsigned int);
  static const auto real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "sync_file_range"));
  if (dowser::store::testing::is_journal_fd(fd)) ++journal_write_outs;
  return real(fd, offset, count, flags);
}

extern "C" ssize_t pwrite(int fd, const void* data, size_t count, off_t offset) {
  using Real = ssize_t (*)(int, const void*, size_t, off_t);
  static const auto real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "pwrite"));
  if (is_journal_zero_fill(fd, data, count)) {
    ++journal_zero_fills_failed;
    errno = journal_zero_fill_error.load();
    return -1;
  }
  return real(fd, data, count, offset);
}

extern "C" int fdatasync(int fd) {
  using Real = int (*)(int);
  static const auto real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "fdatasync"));
  if (!dowser::store::testing::is_journal_fd(fd)) return real(fd);
  const int result = real(fd);
  last_journal_sync_thread = std::this_thread::get_id();
  ++journal_syncs_on_this_thread;
  {
    const std::lock_guard<std::mutex> guard(journal_syncs_mutex);
    ++journal_syncs;  // after the thread: a waiter for the count then sees the thread
  }
  journal_synced.notify_all();
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
  // The same for writing the journal out without a flush (sync_file_range).
  template <typename Work>
  int journal_write_outs_of(Work work) {
    const int before = journal_write_outs.load();
    work();
    return journal_write_outs.load() - before;
  }
  // Sets slot 0 of cam-<i> to usage ("": free).
  void set_slot_usage(int i, const std::string& usage) {
    const std::string name = "cam-" + std::to_string(i);
    auto stored = store_.get("default", name);
    auto changed = stored->instance;
    changed.device_usage[name + "-0"] = usage;
    store_.update(changed, stored->revision);
  }
  // Claims slot 0 of cam-<i> for node-a.
  void claim(int i) { set_slot_usage(i, "node-a"); }

  TemporaryDirectory directory_{TemporaryDirectory::Medium::memory};
  FileInstanceStore store_{directory_.path()};
};

TEST_F(DeferredSyncTest, EveryWriteSyncsTheJournalWhenNotDeferred) {
  EXPECT_EQ(journal_syncs_of([&] { create(0, 3); }), 3);
  EXPECT_EQ(journal_syncs_of([&] { store_.sync(); }), 0) << "nothing was owed";
}

TEST_F(DeferredSyncTest, DeferredCreatesShareOneSync) {
  store_.defer_sync(InstanceStore::Deferring::creates);
  EXPECT_EQ(journal_syncs_of([&] { create(0, 3); }), 0);
  ASSERT_TRUE(store_.get("default", "cam-1").has_value()) << "a deferred create is stored at once";
  EXPECT_EQ(store_.list().size(), 3u);
  EXPECT_EQ(journal_syncs_of([&] { store_.sync(); }), 1);
  EXPECT_EQ(journal_syncs_of([&] { create(3, 1); }), 1) << "sync() ended the deferral";
}

TEST_F(DeferredSyncTest, UpdatesAndRemovalsAreDurableAtOnceAndTakeTheCreatesWithThem) {
  store_.defer_sync(InstanceStore::Deferring::creates);
  create(0, 2);
  EXPECT_EQ(journal_syncs_of([&] {
              auto stored = store_.get("default", "cam-0");
              auto changed = stored->instance;
              changed.device_usage["cam-0-0"] = "node-a";  // a claim
              store_.update(changed, stored->revision);
            }),
            1);
  EXPECT_EQ(journal_syncs_of([&] { store_.sync(); }), 0) << "the update's sync covered the creates";
  store_.defer_sync(InstanceStore::Deferring::creates);
  EXPECT_EQ(journal_syncs_of([&] {
              store_.remove("default", "cam-1", store_.get("default", "cam-1")->revision);
            }),
            1);
  store_.sync();
  EXPECT_EQ(store_.get("default", "cam-0")->instance.device_usage.at("cam-0-0"), "node-a");
  EXPECT_FALSE(store_.get("default", "cam-1").has_value());
}

TEST_F(DeferredSyncTest, AnotherThreadsCreatesAreDurableWhenTheyReturn) {
  store_.defer_sync(InstanceStore::Deferring::creates);
  create(0, 1);
  EXPECT_EQ(journal_syncs_of([&] { std::thread([&] { create(1, 2); }).join(); }), 2);
  // Those syncs made the deferred create durable too: nothing is owed.
  EXPECT_EQ(journal_syncs_of([&] { store_.sync(); }), 0);
}

TEST_F(DeferredSyncTest, TheStoreCountsItsJournalSyncsAsTheyHappen) {
  const uint64_t before = store_.journal_syncs().value();
  const int made = journal_syncs_of([&] {
    create(0, 2);
    store_.defer_sync(InstanceStore::Deferring::creates);
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
    store_.defer_sync(InstanceStore::Deferring::creates);
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
  // Polled, not woken at the fdatasync: the store's thread notes the creates
  // durable under its lock only after that returns, and store_.sync() below
  // would find them still owed in between (the poll narrows that window; no
  // signal of the store's closes it).
  ASSERT_TRUE(dowser::test::eventually([&] { return journal_syncs.load() > before; }))
      << "the handed-over sync never happened";
  ASSERT_EQ(journal_syncs.load() - before, 1);
  EXPECT_NE(last_journal_sync_thread.load(), std::this_thread::get_id());
  EXPECT_EQ(journal_syncs_of([&] { store_.sync(); }), 0) << "nothing is owed any more";
  EXPECT_EQ(journal_syncs_of([&] { create(3, 1); }), 1) << "the deferral ended";
}

// An Allocate's claims: on the disk before the call answers, flushed after.
TEST_F(DeferredSyncTest, UnderAFlushDeferralEveryWriteIsWrittenOutAndTheFlushWaits) {
  create(0, 3);  // durable: the journal's room is the file's for good
  store_.defer_sync(InstanceStore::Deferring::flush);
  int write_outs = 0;
  EXPECT_EQ(journal_syncs_of([&] {
              write_outs = journal_write_outs_of([&] {
                claim(0);
                claim(1);
                store_.remove("default", "cam-2", store_.get("default", "cam-2")->revision);
              });
            }),
            0);
  EXPECT_EQ(write_outs, 3) << "each write must be on the disk when it returns";
  EXPECT_EQ(store_.get("default", "cam-1")->instance.device_usage.at("cam-1-0"), "node-a");
  EXPECT_EQ(journal_syncs_of([&] { store_.sync(); }), 1) << "one flush for all three";
  EXPECT_EQ(journal_syncs_of([&] { claim(0); }), 1) << "sync() ended the deferral";
}

// A flush keeps data, not the file's own record of its size and blocks: a
// record in room the journal grew into since its last fdatasync (a new
// journal, here) is made durable at once.
TEST_F(DeferredSyncTest, AFlushDeferredWriteIntoNewlyGrownRoomIsMadeDurableAtOnce) {
  TemporaryDirectory directory{TemporaryDirectory::Medium::memory};
  FileInstanceStore store(directory.path());
  store.defer_sync(InstanceStore::Deferring::flush);
  int write_outs = 0;
  EXPECT_EQ(journal_syncs_of([&] {
              write_outs = journal_write_outs_of([&] { store.create(sample_instance("cam-0")); });
            }),
            1);
  EXPECT_EQ(write_outs, 0);
  EXPECT_EQ(journal_syncs_of([&] {
              write_outs = journal_write_outs_of([&] { store.create(sample_instance("cam-1")); });
            }),
            0)
      << "the room is the journal's now";
  EXPECT_EQ(write_outs, 1);
  store.sync();
}

TEST_F(DeferredSyncTest, AFlushDeferralHandedToTheStoresThreadIsFlushedThere) {
  create(0, 2);
  const int before = journal_syncs.load();
  {
    const DeferredSync claims(store_, DeferredSync::SyncOn::store_thread,
                              InstanceStore::Deferring::flush);
    claim(0);
    claim(1);
  }
  ASSERT_TRUE(journal_syncs_exceed(before)) << "the handed-over flush never happened";
  EXPECT_EQ(journal_syncs.load() - before, 1);
  EXPECT_NE(last_journal_sync_thread.load(), std::this_thread::get_id());
}

// Room the journal grows into needs an fdatasync before a record there is
// durable with a flush alone (the file's size changes): the store's thread
// zero-fills the next step ahead when it flushes, so that claims handed to it
// only ever wait for their record's write, also past the journal's first step.
TEST_F(DeferredSyncTest, TheStoresThreadGrowsTheJournalAheadOfFlushDeferredWrites) {
  create(0, 1);  // durable: the journal's first step is its own
  const std::filesystem::path journal = detail::InstanceFiles(directory_.path()).journal_file();
  constexpr int kClaims = 600;  // records of about 500 bytes: well past the fourth step
  int syncs_by_claims = 0;
  for (int i = 0; i < kClaims; ++i) {
    const int flushes_before = journal_syncs.load();
    const int syncs_before = journal_syncs_on_this_thread;
    {
      const DeferredSync claims(store_, DeferredSync::SyncOn::store_thread,
                                InstanceStore::Deferring::flush);
      set_slot_usage(0, i % 2 == 0 ? "node-a" : "");
    }
    syncs_by_claims += journal_syncs_on_this_thread - syncs_before;
    ASSERT_TRUE(journal_syncs_exceed(flushes_before)) << "claim " << i << " was never flushed";
  }
  // Grown ahead, the file is at most two steps past the records: past four
  // steps, the records crossed at least two steps' ends.
  ASSERT_GT(std::filesystem::file_size(journal), 4 * detail::StoreJournal::kGrowthStep)
      << "the claims never took the journal far enough: the test proves nothing";
  EXPECT_EQ(syncs_by_claims, 0) << "a claim grew the journal and made its record durable itself";
}

// Growing ahead is the store's own idea: a disk too full for it must not
// keep the claims already written from their flush.
TEST_F(DeferredSyncTest, AJournalThatCannotGrowAheadStillFlushesTheClaims) {
  create(0, 1);  // the journal's first step, durable: a claim fits in it
  journal_zero_fill_error = ENOSPC;
  const int failed_before = journal_zero_fills_failed.load();
  const int before = journal_syncs.load();
  {
    const DeferredSync claims(store_, DeferredSync::SyncOn::store_thread,
                              InstanceStore::Deferring::flush);
    claim(0);
  }
  const bool flushed = journal_syncs_exceed(before);
  journal_zero_fill_error = 0;
  EXPECT_TRUE(flushed) << "a failed growth took the claim's flush with it";
  EXPECT_GT(journal_zero_fills_failed.load(), failed_before)
      << "the store's thread never tried to grow the journal: the test proves nothing";
}

// What the kernel holds of the journal in memory, by cachestat(2); nullopt
// where the kernel has none.
struct JournalPages {
  uint64_t cached = 0, dirty = 0, writeback = 0, evicted = 0, recently_evicted = 0;
};
std::optional<JournalPages> journal_pages(const std::filesystem::path& directory) {
  constexpr long kCachestat = 451;  // the same on every architecture
  const detail::UniqueFd fd(
      ::open(detail::InstanceFiles(directory).journal_file().c_str(), O_RDONLY | O_CLOEXEC));
  struct {
    uint64_t offset = 0, length = 0;  // length 0: to the end of the file
  } range;
  JournalPages pages;
  if (!fd || ::syscall(kCachestat, fd.get(), &range, &pages, 0) != 0) return std::nullopt;
  return pages;
}

// The real disk, not the counts: after a flush-deferred write returns, no
// page of the journal is dirty or still being written, those of deferred
// creates before it included (replay stops at the first record missing).
TEST(FlushDeferralOnDisk, LeavesNoPageOfTheJournalDirty) {
  TemporaryDirectory directory{TemporaryDirectory::Medium::disk};
  struct statfs file_system {};
  ASSERT_EQ(::statfs(directory.path().c_str(), &file_system), 0);
  const auto type = static_cast<int64_t>(file_system.f_type);
  if (type == TMPFS_MAGIC || !detail::overwrites_in_place(type))
    GTEST_SKIP() << "the temporary directory is not on a disk written in place";
  FileInstanceStore store(directory.path());
  store.create(sample_instance("cam-0"));  // the journal's room is the file's for good
  if (!journal_pages(directory.path())) GTEST_SKIP() << "this kernel has no cachestat";
  store.defer_sync(InstanceStore::Deferring::creates);  // a discovery report's
  for (int i = 1; i <= 12; ++i) store.create(sample_instance("cam-" + std::to_string(i)));
  if (journal_pages(directory.path())->dirty == 0)  // what the test needs, not what it checks
    GTEST_SKIP() << "the kernel wrote the deferred creates out before the claim";
  store.defer_sync(InstanceStore::Deferring::flush);  // then an Allocate's
  auto stored = store.get("default", "cam-0");
  auto changed = stored->instance;
  changed.device_usage["cam-0-0"] = "node-a";
  store.update(changed, stored->revision);
  const auto pages = journal_pages(directory.path());
  ASSERT_TRUE(pages.has_value());
  EXPECT_GT(pages->cached, 0u);
  EXPECT_EQ(pages->dirty, 0u) << "a record was left in memory only";
  EXPECT_EQ(pages->writeback, 0u) << "a record was not waited for";
  store.sync();
}

// Where a flush of the disk alone would not keep a written record, the
// store makes it durable instead.
TEST(FlushDeferral, IsTrustedOnlyOnFileSystemsThatWriteInPlace) {
  for (const int64_t type :
       std::initializer_list<int64_t>{EXT4_SUPER_MAGIC, XFS_SUPER_MAGIC, TMPFS_MAGIC})
    EXPECT_TRUE(detail::overwrites_in_place(type)) << std::hex << type;
  for (const int64_t type :
       std::initializer_list<int64_t>{BTRFS_SUPER_MAGIC, OVERLAYFS_SUPER_MAGIC, NFS_SUPER_MAGIC,
                                      F2FS_SUPER_MAGIC, SQUASHFS_MAGIC, FUSE_SUPER_MAGIC})
    EXPECT_FALSE(detail::overwrites_in_place(type)) << std::hex << type;
}

TEST_F(DeferredSyncTest, ClosingTheStoreMakesDeferredCreatesDurable) {
  TemporaryDirectory directory{TemporaryDirectory::Medium::memory};
  auto store = std::make_unique<FileInstanceStore>(directory.path());
  store->defer_sync(InstanceStore::Deferring::creates);
  store->create(sample_instance("cam-0"));
  EXPECT_EQ(journal_syncs_of([&] { store.reset(); }), 1);
  EXPECT_EQ(FileInstanceStore(directory.path()).list().size(), 1u);
}

}  // namespace
}  // namespace dowser::store::testing
