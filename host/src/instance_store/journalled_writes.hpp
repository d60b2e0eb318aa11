// How the file store writes through its journal (StoreJournal), empties it,
// and recovers from it after a crash.
//
// A write is made durable as a journal record, then its file is written
// without fsync. A record may leave the journal only once its write is durable
// in the files: a checkpoint fsyncs every file written since the journal was
// last emptied (their directories and the revision counter too), then resets
// the journal. So that no write waits for another file's fsync, a thread of
// the store's own does it: once the journal is a quarter full, it fsyncs those
// files, least recently written first, without the store lock (a file written
// again meanwhile stays unsynced), then takes the lock for a moment, checks
// that nothing is left (other processes' records included), fsyncs the
// directories and the counter and resets the journal. A crash halfway through
// leaves the journal whole, and opening the store redoes, by revision,
// whatever the files lost. One thread fsyncing files one by one can fall
// behind writes that each dirty another file (a flood of them, each as costly
// as an fsync): then, from three quarters full, each write also fsyncs a
// few (more as room runs out), as the store did before it had the thread.
// Only if the journal fills all the same (several processes writing to one
// store) does a write do the rest of the checkpoint at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "instance_files.hpp"
#include "posix_io.hpp"
#include "store_journal.hpp"

namespace dowser::store::detail {

// What a journal record says was written: the document is empty for a removal
// (whose revision is the one removed).
struct JournalledWrite {
  std::string namespace_name;
  std::string name;
  uint64_t revision = 0;
  std::string document;
};

JournalRecord to_record(JournalRecord::Kind kind, const JournalledWrite& write);

// A write as the journal keeps it: what kind, and what.
struct JournalEntry {
  JournalRecord::Kind kind = JournalRecord::Kind::put;
  JournalledWrite write;
};

// The Instance files written since the journal was last emptied and not
// fsynced since, least recently written first, and the namespaces of all
// written files (whose directories the checkpoint fsyncs at its end). Each
// write gets a sequence number, never reused, so that an fsync counts only if
// the file was not written again while it ran.
class UnsyncedFiles {
 public:
  using Key = std::pair<std::string, std::string>;  // namespace, name
  struct Write {
    Key file;
    uint64_t sequence = 0;
  };

  void add(const Key& file);  // written now
  bool empty() const { return sequence_of_.empty(); }
  size_t size() const { return sequence_of_.size(); }
  static constexpr uint64_t kNoSequence = UINT64_MAX;
  // The least recently written file, skipping the write `except` unless it
  // is the only one.
  std::optional<Write> oldest(uint64_t except = kNoSequence) const;
  // Erases the file if its last write is still this one.
  void erase_if_last(const Write& write);
  const std::set<std::string>& namespaces() const { return namespaces_; }
  void clear();

 private:
  uint64_t next_sequence_ = 0;
  std::map<Key, uint64_t> sequence_of_;
  std::map<uint64_t, Key> by_sequence_;
  std::set<std::string> namespaces_;
};

// The store's write lock: this process's writers (mutex), then every process
// sharing the store (flock), in that order.
class StoreWriteLock {
 public:
  StoreWriteLock(std::mutex& writers, const std::filesystem::path& lock_file)
      : writers_(writers), file_(lock_file, FileLock::Mode::exclusive) {}

 private:
  std::lock_guard<std::mutex> writers_;
  FileLock file_;
};

class JournalledWrites {
 public:
  // The checkpoint thread starts once the journal is this many quarters
  // full, so that it has time to finish before writes would help.
  static constexpr size_t kCheckpointFromQuarters = 1;
  // From this full (3/4), writes help a checkpoint thread that fell behind.
  static constexpr size_t kStepsFromQuarters = 3;

  // synced, if set, is told of each file and directory just before it is
  // fsynced and just after, and of the journal before and after it is
  // emptied, on the thread doing it, with no lock of its own held: tests
  // check with it what a real crash would show.
  enum class SyncStep { starting, done };
  using SyncObserver = std::function<void(const std::filesystem::path&, SyncStep)>;

  // Opens the journal (creating it if missing) and recovers: after a crash the
  // files may lack writes the journal holds, so it redoes them (by revision: a
  // file at or past a record's revision is left alone), then checkpoints.
  // Harmless while another process uses the store: its files are at or past
  // every journalled revision. A write that cannot be redone throws
  // StoreError(io), and the journal keeps it for the next try. Call with the
  // store's lock file held exclusively; then starts the checkpoint thread.
  JournalledWrites(const InstanceFiles& files, size_t journal_capacity,
                   SyncObserver synced = nullptr);
  // Waits for the checkpoint thread: at most the file it is fsyncing, or the
  // end of a checkpoint it is finishing under the lock.
  ~JournalledWrites();
  JournalledWrites(const JournalledWrites&) = delete;
  JournalledWrites& operator=(const JournalledWrites&) = delete;

  // Hold this around write() and anything it depends on (reading the stored
  // revision, the revision counter).
  StoreWriteLock lock() { return {writers_, files_.lock_file()}; }

  // Whether a write may wait for sync() to be durable (see defer_sync).
  enum class Deferral { none, allowed };

  // Makes write durable in the journal, calls write_file (which writes it to
  // the file), and wakes the checkpoint thread once the journal is a quarter
  // full (from 3/4 full, also fsyncs a few files itself).
  // A write whose write_file throws did not happen, now or after a restart
  // (its caller was told it failed): undo() says what puts the file back as
  // it was (a removal of a new file; the previous document, at a revision
  // above the failed one), which is journalled after it, so that a restart
  // redoes that instead. If the failure left the file torn or changed, the
  // undo is written to it at once; if that fails too, readers must not be
  // left with a torn file: the next write redoes the undo, and the journal is
  // not emptied before that succeeds. Should the undo itself fail (the
  // journal cannot take it), the failed write may still be redone after a
  // restart, which is logged. Call with lock() held.
  using Undo = std::function<JournalEntry()>;
  void write(JournalRecord::Kind kind, const JournalledWrite& write,
             const std::function<void()>& write_file, const Undo& undo,
             Deferral deferral = Deferral::none);

  // Group commit: writes this thread makes from defer_sync() on return before
  // their record is durable: with Deferring::creates those with
  // Deferral::allowed (their records may be in memory only), with
  // Deferring::flush all (each written to the disk, not flushed);
  // sync_deferred() makes them durable with one fdatasync and ends the
  // deferral. Until their records are durable their files are not fsynced (no
  // file should reach the disk before its record) and the journal is not
  // emptied; a checkpoint that needs it makes them durable first. One thread
  // defers at a time (a second call takes over). Every other write is durable
  // when it returns, and makes the deferred ones durable with it. Call without
  // lock(); sync_deferred() throws StoreError(io).
  void defer_sync(InstanceStore::Deferring deferring);
  void sync_deferred();
  // Ends the deferral like sync_deferred(), but the store's own thread makes
  // the records durable, soon after; the caller goes on at once. A failure is
  // logged, and the next durable write (or sync) covers the records.
  void sync_deferred_in_background();

  // Call with lock() held.
  const StoreJournal& journal() const { return journal_; }
  // From any thread, without lock().
  uint64_t journal_syncs() const { return journal_.syncs(); }

 private:
  void recover();
  // Redoes the writes that left their file torn, those it can now.
  void mend_torn_files();
  // How this thread's write with `deferral` is made durable (see defer_sync).
  StoreJournal::Sync sync_of(Deferral deferral) const;
  // Appends a record, checkpointing at once if the journal is full.
  void append(const JournalRecord& record, StoreJournal::Sync when);
  // After write_file failed: journals the undo and mends the file with it.
  void undo_failed_write(const JournalEntry& failed, const Undo& undo, StoreJournal::Sync when);
  // What other writers of the journal did (from take_changes() or, right
  // after an append, take_collected_changes()); under lock().
  void note_changes(const StoreJournal::Changes& changes);
  void note_written(const UnsyncedFiles::Key& file);
  size_t unsynced_count();
  void forget_unsynced();  // the journal was emptied
  // Deferred records: made durable by the latest append; made durable now.
  // Either way their files may be fsynced from then on. Under lock().
  void deferred_made_durable();
  // The first `count` deferred records ever made are durable (by a flush
  // begun once they were all appended); those of them still deferred go.
  void deferred_durable_through(uint64_t count);
  void settle_deferred();
  // Whether sync_deferred_in_background() asked for a flush since the last
  // call (which takes the request); on the checkpoint thread.
  bool deferred_sync_due();
  // Takes lock(), but not while the journal is flushed: the next claim need
  // not wait for the disk.
  void settle_deferred_in_background();
  void grow_journal_ahead();  // call with lock() held
  // Who fsyncs: the checkpoint thread, a write's step (each skips the file the
  // other is fsyncing), or a checkpoint all at once.
  enum class Syncer { background, step, all };
  std::optional<UnsyncedFiles::Write> next_to_sync(Syncer syncer);
  void sync(const UnsyncedFiles::Write& write);
  void checkpoint_step(uint64_t record_size);  // under lock()
  void finish_checkpoint();  // every file is synced: directories, counter, reset; under lock()
  void checkpoint();         // all at once, under lock()
  void run_checkpoints();    // the checkpoint thread
  void checkpoint_in_background();
  bool observed(const std::filesystem::path& path, const std::function<bool()>& action) const;

  const InstanceFiles& files_;
  std::mutex writers_;
  StoreJournal journal_;                             // under lock()
  std::atomic<std::thread::id> deferring_thread_{};  // none: a default id
  std::atomic<InstanceStore::Deferring> deferring_{InstanceStore::Deferring::creates};
  // Under lock(): the files of deferred writes whose records are not durable yet.
  std::vector<UnsyncedFiles::Key> deferred_files_;
  uint64_t deferred_settled_ = 0;  // under lock(): how many ever left deferred_files_
  // Under lock(): the writes to redo before the journal may be emptied: a
  // failure left their file torn (or changed, for an undo).
  std::map<UnsyncedFiles::Key, JournalEntry> torn_;
  // Whether deferred_files_ has any, readable without lock(): a deferral that
  // wrote nothing ends without taking the lock.
  std::atomic<bool> any_deferred_{false};
  SyncObserver synced_;
  // Guards what follows; never held while waiting for lock() or doing I/O.
  std::mutex checkpoint_mutex_;
  std::condition_variable wake_;
  UnsyncedFiles unsynced_;
  bool checkpoint_wanted_ = false;
  // Files noted written (by writes, mends, settled deferrals) while the
  // journal was due for a checkpoint, ever; only compared for change: a
  // checkpoint that fails is tried again at once if one came while it ran (it
  // found the checkpoint wanted already and woke nobody), else at the next.
  uint64_t checkpoint_requests_ = 0;
  bool deferred_sync_wanted_ = false;  // sync_deferred_in_background() was called
  bool stopping_ = false;
  uint64_t syncing_in_background_ = UnsyncedFiles::kNoSequence;
  uint64_t syncing_in_step_ = UnsyncedFiles::kNoSequence;
  std::thread checkpointer_;  // last: started once the rest is ready
};

}  // namespace dowser::store::detail
