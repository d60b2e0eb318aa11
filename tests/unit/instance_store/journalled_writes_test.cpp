// JournalledWrites: writes through the file store's journal, and the
// checkpoint that empties the journal on a thread of its own. A power cut
// cannot be staged here, so what a crash would keep is derived from what was
// fsynced: JournalledWrites tells the test of each fsync as it starts and once
// it is done (the real fsync, on real files), and of the journal being
// emptied. Each time it is emptied, the test checks that every file written
// since it was last emptied was fsynced by a call that started after its last
// write and ended before. A crash is staged by tearing every file whose last
// write was not fsynced since.
#include "journalled_writes.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "eventually.hpp"
#include "instance_json.hpp"
#include "log_capture.hpp"
#include "posix_io.hpp"
#include "test_support.hpp"

namespace dowser::store::testing {
namespace {

using detail::InstanceFiles;
using detail::JournalledWrites;
using detail::JournalRecord;
using detail::StoreJournal;
using SyncStep = JournalledWrites::SyncStep;

constexpr size_t kSmallJournal = size_t{64} * 1024;
constexpr size_t kFiles = 20;
constexpr std::chrono::seconds kDeadline{10};
constexpr const char* kFilledLog = "filled before its checkpoint finished";

// Lets a test hold the checkpoint thread inside an fsync, and let it go.
class Gate {
 public:
  // Called on the thread to hold: returns once released.
  void hold() {
    std::unique_lock lock(mutex_);
    held_ = true;
    changed_.notify_all();
    changed_.wait(lock, [this] { return released_; });
  }
  // Only tells the test the thread got there.
  void pass() {
    {
      const std::lock_guard lock(mutex_);
      held_ = true;
    }
    changed_.notify_all();
  }
  bool wait_until_held() {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kDeadline, [this] { return held_; });
  }
  void release() {
    {
      const std::lock_guard lock(mutex_);
      released_ = true;
    }
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool held_ = false;
  bool released_ = false;
};

class JournalledWritesTest : public ::testing::Test {
 protected:
  // Writers 0 and 1 stand in for two processes sharing the store.
  std::unique_ptr<JournalledWrites> open(int writer = 0, size_t capacity = kSmallJournal) {
    const detail::FileLock lock(files_.lock_file(), detail::FileLock::Mode::exclusive);
    return std::make_unique<JournalledWrites>(
        files_, capacity, [this, writer](const std::filesystem::path& path, SyncStep step) {
          observe(writer, path, step);
        });
  }

  std::string name_of(size_t file) const { return "cam-" + std::to_string(file); }
  std::filesystem::path path_of(size_t file) const {
    return files_.instance_file("default", name_of(file));
  }

  // Writes the next revision of file `file` through writes, as the store does.
  // padding: bytes added to its document.
  void put(JournalledWrites& writes, size_t file, size_t padding = 0,
           JournalledWrites::Deferral deferral = JournalledWrites::Deferral::none) {
    const std::string name = name_of(file);
    const uint64_t revision = ++revision_;
    Instance instance = sample_instance(name);
    if (padding > 0) instance.broker_properties["PADDING"] = std::string(padding, 'x');
    const std::string document = detail::to_json_text({instance, revision});
    const std::filesystem::path path = path_of(file);
    const detail::StoreWriteLock lock = writes.lock();
    detail::ensure_directory_durably(path.parent_path());
    const auto found = latest_.find(name);
    const std::optional<StoredInstance> before =
        found == latest_.end() ? std::nullopt : std::optional(found->second);
    latest_[name] = StoredInstance{instance, revision};
    writes.write(
        JournalRecord::Kind::put, {"default", name, revision, document},
        [&] { write_file(path, document); },
        [&] {
          // As the store does: the previous version again, at a new revision.
          if (!before) {
            latest_.erase(name);
            return detail::JournalEntry{JournalRecord::Kind::remove,
                                        {"default", name, revision, ""}};
          }
          const uint64_t undo_revision = ++revision_;
          latest_[name] = StoredInstance{before->instance, undo_revision};
          return detail::JournalEntry{JournalRecord::Kind::put,
                                      {"default", name, undo_revision,
                                       detail::to_json_text({before->instance, undo_revision})}};
        },
        deferral);
  }

  // What the next write_file of put() does instead of writing: fails before
  // touching the file, writes a third of it then fails (an I/O error after
  // some bytes), or leaves a directory in its way then fails (so that the
  // file cannot be mended either until the test removes it).
  enum class FileFault { none, fail, tear, block };
  void write_file(const std::filesystem::path& path, const std::string& document) {
    const FileFault fault = std::exchange(next_file_fault_, FileFault::none);
    if (fault == FileFault::fail) throw StoreError(StoreError::Kind::io, "staged I/O error");
    if (fault == FileFault::block) {
      std::filesystem::remove(path);
      std::filesystem::create_directories(path / "in-the-way");
      throw StoreError(StoreError::Kind::io, "staged I/O error");
    }
    const bool tear = fault == FileFault::tear;
    detail::rewrite_file(path, tear ? document.substr(0, document.size() / 3) : document);
    {
      const std::lock_guard guard(mutex_);
      written_[path] = written_[path.parent_path()] = ++clock_;
    }
    if (tear) throw StoreError(StoreError::Kind::io, "staged I/O error");
  }

  uint64_t used(JournalledWrites& writes) {
    const detail::StoreWriteLock lock = writes.lock();
    return writes.journal().used();
  }

  // Writes until the journal is half full: its checkpoint is under way.
  void fill_to_half(JournalledWrites& writes, size_t capacity = kSmallJournal) {
    for (size_t i = 0; used(writes) < capacity / 2; ++i) {
      put(writes, (i * 7) % kFiles);
      ASSERT_LT(i, 1000u) << "the journal does not fill";
    }
  }

  int checkpoints() {
    const std::lock_guard guard(mutex_);
    return checkpoints_;
  }
  int files_synced_by_writes() {
    const std::lock_guard guard(mutex_);
    return files_synced_by_writes_;
  }

  bool is_test_thread() const { return std::this_thread::get_id() == test_thread_; }
  // The checkpoint thread stops at the start of each fsync until gate lets it go.
  void hold_checkpoint_thread_fsyncs(Gate& gate) {
    on_sync_ = [this, &gate](const std::filesystem::path&, SyncStep step) {
      if (step == SyncStep::starting && !is_test_thread()) gate.hold();
    };
  }

  void observe(int writer, const std::filesystem::path& path, SyncStep step) {
    {
      const std::lock_guard guard(mutex_);
      const size_t now = ++clock_;
      const std::thread::id thread = std::this_thread::get_id();
      if (step == SyncStep::starting) {
        started_[thread] = now;
        if (path == files_.journal_file()) expect_durable_before_emptied(writer);
        if (is_test_thread() && path.extension() == ".json") ++files_synced_by_writes_;
      } else {
        size_t& from = synced_from_[{writer, path}];
        from = std::max(from, started_[thread]);
      }
    }
    if (on_sync_) on_sync_(path, step);
  }

  // The journal is about to be emptied by `writer`: it fsynced each file
  // written since it was last emptied, and its directory, after the last write.
  void expect_durable_before_emptied(int writer) {
    ++checkpoints_;
    for (const auto& [path, written] : written_) {
      const auto synced = synced_from_.find({writer, path});
      EXPECT_TRUE(synced != synced_from_.end() && synced->second > written)
          << path << " was not fsynced after its last write, checkpoint " << checkpoints_;
    }
    written_.clear();
  }

  // What a machine crash now may do: every file not fsynced since its last
  // write is torn.
  int tear_unsynced_files(int writer) {
    int torn = 0;
    for (const auto& [path, written] : written_) {
      const auto synced = synced_from_.find({writer, path});
      if (path.extension() != ".json" || (synced != synced_from_.end() && synced->second > written))
        continue;
      const std::string whole = read_text(path);
      write_text(path, whole.substr(0, whole.size() / 3));
      ++torn;
    }
    return torn;
  }

  void expect_latest_stored() const {
    for (const auto& [name, latest] : latest_) {
      const std::optional<StoredInstance> stored = files_.read("default", name);
      ASSERT_TRUE(stored.has_value()) << name;
      EXPECT_EQ(stored->revision, latest.revision) << name;
      EXPECT_EQ(stored->instance, latest.instance);
    }
  }

  // fsync is free in memory, and these tests are about which files it is
  // called on and when, not about the disk.
  TemporaryDirectory temporary_{TemporaryDirectory::Medium::memory};
  InstanceFiles files_{temporary_.path()};
  const std::thread::id test_thread_ = std::this_thread::get_id();
  uint64_t revision_ = 0;
  std::map<std::string, StoredInstance> latest_;  // per name
  FileFault next_file_fault_ = FileFault::none;
  // Called after the bookkeeping, outside mutex_; set before opening.
  std::function<void(const std::filesystem::path&, SyncStep)> on_sync_;

  std::mutex mutex_;  // guards what follows
  size_t clock_ = 0;  // counts writes and fsync events, in the order they happen
  std::map<std::thread::id, size_t> started_;  // the fsync each thread is in
  // Per writer and path: when the latest fsync that has ended started.
  std::map<std::pair<int, std::filesystem::path>, size_t> synced_from_;
  // Per file (and directory) written since the journal was last emptied: when.
  std::map<std::filesystem::path, size_t> written_;
  int checkpoints_ = 0;
  int files_synced_by_writes_ = 0;
};

TEST_F(JournalledWritesTest, EveryFileIsDurableBeforeTheJournalIsEmptied) {
  const dowser::test::LogCapture log;
  {
    auto writes = open();
    for (size_t i = 0; i < 1000; ++i) put(*writes, (i * 7) % kFiles);
  }
  EXPECT_GE(checkpoints(), 3);
}

TEST_F(JournalledWritesTest, DeferredWritesAreDurableBeforeTheJournalIsEmptied) {
  {
    auto writes = open();
    writes->defer_sync(InstanceStore::Deferring::creates);
    for (size_t i = 0; i < 1000; ++i)
      put(*writes, (i * 7) % kFiles, 0, JournalledWrites::Deferral::allowed);
    writes->sync_deferred();
  }
  EXPECT_GE(checkpoints(), 3);
}

// The store's thread syncs them while writes go on.
TEST_F(JournalledWritesTest,
       DeferredWritesSyncedInTheBackgroundAreDurableBeforeTheJournalIsEmptied) {
  {
    auto writes = open();
    for (size_t i = 0; i < 1000; ++i) {
      if (i % 4 == 0) writes->defer_sync(InstanceStore::Deferring::creates);
      put(*writes, (i * 7) % kFiles, 0, JournalledWrites::Deferral::allowed);
      if (i % 4 == 3) writes->sync_deferred_in_background();
    }
  }
  EXPECT_GE(checkpoints(), 3);
  expect_latest_stored();
}

// An Allocate's claims: every write on the disk, flushed by the store's thread.
TEST_F(JournalledWritesTest, WritesFlushedInTheBackgroundAreDurableBeforeTheJournalIsEmptied) {
  {
    auto writes = open();
    for (size_t i = 0; i < 1000; ++i) {
      if (i % 3 == 0) writes->defer_sync(InstanceStore::Deferring::flush);
      put(*writes, (i * 7) % kFiles);
      if (i % 3 == 2) writes->sync_deferred_in_background();
    }
  }
  EXPECT_GE(checkpoints(), 3);
  expect_latest_stored();
}

// The flush of an Allocate's claims, asked for while the checkpoint thread
// works through its files, comes after the file it is fsyncing, not after
// all of them (thousands, on a big node).
TEST_F(JournalledWritesTest, AFlushAskedForDuringACheckpointDoesNotWaitForTheRound) {
  Gate first_file;
  std::atomic<bool> first{true};
  std::atomic<JournalledWrites*> opened{nullptr};
  std::mutex mutex;
  std::vector<uint64_t> flushes_at_file;  // the journal's syncs as each file's fsync starts
  on_sync_ = [&](const std::filesystem::path& path, SyncStep step) {
    if (step != SyncStep::starting || is_test_thread() || path.extension() != ".json") return;
    {
      const std::lock_guard guard(mutex);
      flushes_at_file.push_back(opened.load()->journal_syncs());
    }
    if (first.exchange(false)) first_file.hold();
  };
  auto writes = open();
  opened = writes.get();
  fill_to_half(*writes);
  ASSERT_TRUE(first_file.wait_until_held()) << "the checkpoint thread never started";
  writes->defer_sync(InstanceStore::Deferring::flush);
  put(*writes, 0);
  const uint64_t before = writes->journal_syncs();
  writes->sync_deferred_in_background();
  first_file.release();
  ASSERT_TRUE(dowser::test::eventually([&] { return checkpoints() > 0; }));
  const std::lock_guard guard(mutex);
  ASSERT_GE(flushes_at_file.size(), 3u);
  EXPECT_GT(flushes_at_file[1], before) << "the flush waited for the checkpoint's other files";
}

TEST_F(JournalledWritesTest, WritesLeaveTheCheckpointToItsThread) {
  const dowser::test::LogCapture log;
  {
    auto writes = open();
    for (size_t i = 0; i < 1000; ++i) {
      put(*writes, (i * 7) % kFiles);
      // Writing no faster than the thread syncs, as a store that is not
      // flooded: then writes never reach 3/4 full, where they would help.
      if (used(*writes) >= kSmallJournal / 8 * 5) {
        ASSERT_TRUE(dowser::test::eventually([&] { return used(*writes) < kSmallJournal / 8 * 5; },
                                             kDeadline));
      }
    }
  }
  EXPECT_GE(checkpoints(), 3);
  EXPECT_EQ(files_synced_by_writes_, 0) << "a write fsynced another file";
  EXPECT_EQ(log.text().find(kFilledLog), std::string::npos) << log.text();
}

TEST_F(JournalledWritesTest, AFileWrittenWhileItIsFsyncedStaysUnsynced) {
  Gate gate;
  const std::filesystem::path target = path_of(0);
  on_sync_ = [&](const std::filesystem::path& path, SyncStep step) {
    if (path == target && step == SyncStep::done && !is_test_thread()) gate.hold();
  };
  auto writes = open();
  fill_to_half(*writes);
  const bool held = gate.wait_until_held();
  if (held) put(*writes, 0);  // while the thread is between its fsync and its bookkeeping
  size_t rewritten = 0;
  {
    const std::lock_guard guard(mutex_);
    rewritten = written_[target];
  }
  gate.release();
  ASSERT_TRUE(held) << "the checkpoint thread never fsynced " << target;
  ASSERT_TRUE(dowser::test::eventually([&] { return checkpoints() >= 1; }, kDeadline));
  const std::lock_guard guard(mutex_);
  EXPECT_GT((synced_from_[{0, target}]), rewritten) << "not fsynced again after the rewrite";
}

TEST_F(JournalledWritesTest, TwoWritersSharingTheJournalKeepEveryWriteUntilItIsDurable) {
  // As two processes sharing one store: each sees the other's records and resets.
  const dowser::test::LogCapture log;
  {
    auto first = open(0);
    auto second = open(1);
    for (size_t i = 0; i < 1000; ++i) put(i % 2 == 0 ? *first : *second, (i * 7) % kFiles);
  }
  EXPECT_GE(checkpoints(), 3);
  expect_latest_stored();
}

TEST_F(JournalledWritesTest, WritesFinishTheCheckpointInStepsWhenItsThreadFallsBehind) {
  const dowser::test::LogCapture log;
  Gate gate;
  hold_checkpoint_thread_fsyncs(gate);
  {
    auto writes = open();
    fill_to_half(*writes);
    const bool held = gate.wait_until_held();
    // The thread is stuck in an fsync; writes go on without waiting for it,
    // and from 3/4 full fsync a few files each (never the one it holds).
    uint64_t most_used = 0;
    int most_synced_by_a_write = 0;
    for (size_t i = 0; held && checkpoints() == 0 && i < 1000; ++i) {
      const int synced_before = files_synced_by_writes();
      put(*writes, (i * 7) % kFiles);
      most_synced_by_a_write =
          std::max(most_synced_by_a_write, files_synced_by_writes() - synced_before);
      if (checkpoints() == 0) most_used = std::max(most_used, used(*writes));
    }
    gate.release();
    ASSERT_TRUE(held) << "the checkpoint thread never started";
    EXPECT_EQ(checkpoints(), 1);
    EXPECT_LE(most_synced_by_a_write, 4) << "not in steps";
    EXPECT_LT(most_used, kSmallJournal - kSmallJournal / 16);  // done before it filled
    for (size_t i = 0; i < 300; ++i) put(*writes, (i * 7) % kFiles);
  }
  EXPECT_EQ(log.text().find(kFilledLog), std::string::npos) << log.text();
  expect_latest_stored();
}

TEST_F(JournalledWritesTest, AWriterFinishingTheCheckpointInStepsFsyncsTheOtherWritersFiles) {
  // Both checkpoint threads are stuck, so writes finish the checkpoint. The
  // two write different files (even and odd): the writer that empties the
  // journal must have fsynced the other's too, which it learns of only from
  // the records its appends catch up with.
  const dowser::test::LogCapture log;
  Gate gate;
  hold_checkpoint_thread_fsyncs(gate);
  {
    auto first = open(0);
    auto second = open(1);
    for (size_t i = 0; checkpoints() == 0 && i < 2000; ++i)
      put(i % 2 == 0 ? *first : *second, (i * 7) % kFiles);
    gate.release();
    EXPECT_GE(checkpoints(), 1);
  }
  expect_latest_stored();
}

TEST_F(JournalledWritesTest, AWriteThatDoesNotFitCheckpointsAtOnce) {
  // A small write leaves the journal under half full (no checkpoint wanted),
  // and a large one does not fit in the rest: the write checkpoints first.
  constexpr size_t kCapacity = 4096;
  const dowser::test::LogCapture log;
  {
    auto writes = open(0, kCapacity);
    put(*writes, 0);
    ASSERT_LT(used(*writes), kCapacity / 2);
    // About as large as the first record plus the room left: too large for
    // the room, not for an empty journal.
    const size_t first_record = used(*writes) - StoreJournal::kHeaderSize;
    put(*writes, 1, kCapacity - used(*writes) - first_record / 2);
    EXPECT_GE(checkpoints(), 1);
  }
  EXPECT_NE(log.text().find(kFilledLog), std::string::npos) << log.text();
  expect_latest_stored();
}

TEST_F(JournalledWritesTest, ACrashHalfwayThroughACheckpointLosesNoWrite) {
  const dowser::test::LogCapture log;
  Gate failed;
  std::atomic<size_t> files_synced{0};  // by the checkpoint thread
  std::atomic<bool> failing{true};      // until the store is reopened
  on_sync_ = [&](const std::filesystem::path& path, SyncStep step) {
    if (!failing || is_test_thread() || path.extension() != ".json") return;
    if (step == SyncStep::done) ++files_synced;
    if (step == SyncStep::starting && files_synced == 5) {
      // The process stops here: nothing more reaches the disk.
      failed.pass();
      throw StoreError(StoreError::Kind::io, "staged crash");
    }
  };
  {
    auto writes = open();
    fill_to_half(*writes);
    ASSERT_TRUE(failed.wait_until_held()) << "the checkpoint never synced 5 files";
  }
  ASSERT_EQ(checkpoints(), 0);
  int torn = 0;
  {
    const std::lock_guard guard(mutex_);
    torn = tear_unsynced_files(0);
  }
  ASSERT_GT(torn, 0);
  failing = false;

  auto reopened = open(1);
  expect_latest_stored();
  EXPECT_NE(log.text().find("had lost their last journalled write"), std::string::npos)
      << log.text();
  EXPECT_EQ(used(*reopened), StoreJournal::kHeaderSize);  // recovered, then emptied
}

// A write that fails halfway through its file (an I/O error after some bytes,
// where no room could be reserved first) did not happen: its caller was told
// so. The file is put back as it was, at once.
TEST_F(JournalledWritesTest, AFileAFailedWriteLeftTornIsPutBackAsItWas) {
  auto writes = open();
  put(*writes, 0);
  const StoredInstance before = latest_.at(name_of(0));
  next_file_fault_ = FileFault::tear;
  EXPECT_THROW(put(*writes, 0, 100), StoreError);
  const std::optional<StoredInstance> stored = files_.read("default", name_of(0));
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->instance, before.instance) << "the failed write's document";
  EXPECT_GT(stored->revision, before.revision + 1) << "a revision above the failed one";
  expect_latest_stored();
}

// A write whose file write failed before touching it leaves the file as it
// was; a restart (the journal still holding the failed write's record) must
// not make the write after all.
TEST_F(JournalledWritesTest, AFailedWriteIsNotMadeByARestart) {
  const dowser::test::LogCapture log;
  {
    auto writes = open();
    put(*writes, 0);
    put(*writes, 1);
    next_file_fault_ = FileFault::fail;
    EXPECT_THROW(put(*writes, 0, 100), StoreError);
    next_file_fault_ = FileFault::fail;
    EXPECT_THROW(put(*writes, 2), StoreError) << "a create";
  }
  ASSERT_EQ(checkpoints(), 0);
  auto reopened = open(1);
  expect_latest_stored();
  EXPECT_FALSE(files_.read("default", name_of(2)).has_value()) << "a failed create was made";
  EXPECT_EQ(used(*reopened), StoreJournal::kHeaderSize);  // recovered, then emptied
}

// While the file a failed write left torn cannot be put back (here a
// directory stands in its way) readers must not be left with that: no
// checkpoint empties the journal, which holds how to put it back; then the
// next write does it from the journal.
TEST_F(JournalledWritesTest, AFileThatCannotBePutBackAtOnceIsFromTheJournalLater) {
  const dowser::test::LogCapture log;
  auto writes = open();
  put(*writes, 0);
  next_file_fault_ = FileFault::block;
  EXPECT_THROW(put(*writes, 0, 100), StoreError);
  const std::filesystem::path torn = path_of(0);
  ASSERT_TRUE(std::filesystem::is_directory(torn));

  for (size_t i = 0; used(*writes) < kSmallJournal / 2; ++i) put(*writes, 1 + i % (kFiles - 1));
  EXPECT_TRUE(dowser::test::eventually([&] {
    return log.text().find("a failed write left the file torn") != std::string::npos;
  })) << log.text();
  EXPECT_EQ(checkpoints(), 0) << "the journal was emptied over a torn file";
  EXPECT_GT(used(*writes), kSmallJournal / 2);

  std::filesystem::remove_all(torn);
  put(*writes, 1);
  EXPECT_NE(log.text().find("rewrote " + torn.string() + " from the journal"), std::string::npos)
      << log.text();
  expect_latest_stored();
  // That write found the journal over a quarter full: its checkpoint goes through now.
  EXPECT_TRUE(dowser::test::eventually([&] { return checkpoints() >= 1; }))
      << "no checkpoint after the mend";
}

// A write that finds the checkpoint already wanted wakes nobody: if the
// checkpoint under way then fails, that write's request must not go with it.
// Here the checkpoint thread's first fsync waits for a write and then fails;
// no write comes after it, so only the request made meanwhile can bring the
// checkpoint about.
TEST_F(JournalledWritesTest, AWriteWhileACheckpointFailsAsksForAnotherOne) {
  const dowser::test::LogCapture log;
  Gate in_fsync;
  std::atomic<bool> failed_once{false};
  on_sync_ = [&](const std::filesystem::path& path, SyncStep step) {
    if (is_test_thread() || path.extension() != ".json" || step != SyncStep::starting) return;
    if (failed_once.exchange(true)) return;
    in_fsync.hold();
    throw StoreError(StoreError::Kind::io, "staged fsync failure");
  };
  auto writes = open();
  for (size_t i = 0; used(*writes) < kSmallJournal / 4; ++i) put(*writes, i % kFiles);
  const bool held = in_fsync.wait_until_held();
  if (held) put(*writes, 0);  // finds the checkpoint wanted: wakes nobody
  in_fsync.release();         // else closing the store would wait for the thread for ever
  ASSERT_TRUE(held) << "no checkpoint began at a quarter full";
  EXPECT_TRUE(dowser::test::eventually([&] { return checkpoints() >= 1; }))
      << "the request of the write made during the failed checkpoint was lost\n"
      << log.text();
  EXPECT_NE(log.text().find("trying again, writes came meanwhile: staged fsync failure"),
            std::string::npos)
      << log.text();
  expect_latest_stored();
}

TEST_F(JournalledWritesTest, ClosingWhileTheCheckpointThreadIsInAnFsyncLosesNoWrite) {
  const dowser::test::LogCapture log;
  for (int round = 0; round < 5; ++round) {
    Gate gate;
    hold_checkpoint_thread_fsyncs(gate);
    auto writes = open();
    fill_to_half(*writes);
    const bool held = gate.wait_until_held();
    std::thread closer([&writes] { writes.reset(); });  // waits for the checkpoint thread
    gate.release();
    closer.join();
    ASSERT_TRUE(held);
    on_sync_ = nullptr;
    const auto reopened = open();
    expect_latest_stored();
  }
}

}  // namespace
}  // namespace dowser::store::testing
