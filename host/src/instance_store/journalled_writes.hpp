// How the file store writes through its journal (StoreJournal), empties it,
// and recovers from it after a crash. Call everything with the store lock held.
//
// A write is made durable as a journal record, then its file is written
// without fsync. A record may leave the journal only once its write is durable
// in the files: a checkpoint fsyncs every file written since the journal was
// last emptied (their directories and the revision counter too), then resets
// the journal. So that no write waits for a whole checkpoint, it runs in
// steps: once the journal is three quarters full, each write also fsyncs a few
// of those files, least recently written first (more as room runs out), and
// the write that leaves none unsynced finishes it. A crash halfway through
// leaves the journal whole, and opening the store redoes, by revision,
// whatever the files lost. Only if the journal fills all the same (several
// processes writing to one store) does a write wait for the rest of the
// checkpoint at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "instance_files.hpp"
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

// The Instance files written since the journal was last emptied and not
// fsynced since, least recently written first, and the namespaces of all
// written files (whose directories the checkpoint fsyncs at its end).
class UnsyncedFiles {
 public:
  using Key = std::pair<std::string, std::string>;  // namespace, name

  void add(const Key& file);
  bool empty() const { return order_of_.empty(); }
  size_t size() const { return order_of_.size(); }
  const Key& oldest() const { return by_order_.begin()->second; }
  void erase(const Key& file);
  const std::set<std::string>& namespaces() const { return namespaces_; }
  void clear();

 private:
  uint64_t next_order_ = 0;
  std::map<Key, uint64_t> order_of_;
  std::map<uint64_t, Key> by_order_;
  std::set<std::string> namespaces_;
};

class JournalledWrites {
 public:
  // Each write fsyncs at least this many files once a checkpoint is under way:
  // two, so that it progresses while every write adds a file.
  static constexpr size_t kMinFilesPerStep = 2;

  // Opens the journal (creating it if missing) and recovers: after a crash the
  // files may lack writes the journal holds, so it redoes them (by revision: a
  // file at or past a record's revision is left alone), then checkpoints.
  // Harmless while another process uses the store: its files are at or past
  // every journalled revision. A write that cannot be redone throws
  // StoreError(io), and the journal keeps it for the next try.
  // synced, if set, is told of each file and directory fsynced, after the
  // fact: tests check with it what a real crash would show.
  using SyncObserver = std::function<void(const std::filesystem::path&)>;
  JournalledWrites(const InstanceFiles& files, size_t journal_capacity,
                   SyncObserver synced = nullptr);

  // Makes write durable in the journal, calls write_file (which writes it to
  // the file), then takes a step of the checkpoint if one is under way. If
  // write_file throws, the journal still redoes the write after a restart, as
  // if the process had crashed in between. A failing step is only logged:
  // the write is stored, and the step is retried by the next writes.
  void write(JournalRecord::Kind kind, const JournalledWrite& write,
             const std::function<void()>& write_file);

  const StoreJournal& journal() const { return journal_; }

 private:
  void recover();
  void note_changes();  // by other writers of the journal
  void checkpoint_step(uint64_t record_size);
  void sync_oldest(size_t count);
  void finish_checkpoint();  // every file is synced: directories, counter, reset
  void checkpoint();         // all at once
  void synced(const std::filesystem::path& path) const;

  const InstanceFiles& files_;
  StoreJournal journal_;
  UnsyncedFiles unsynced_;
  SyncObserver synced_;
};

}  // namespace dowser::store::detail
