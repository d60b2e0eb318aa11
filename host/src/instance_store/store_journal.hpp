// The file store's write-ahead journal, <root>/.journal. Each write to the
// store is appended here and made durable with one fdatasync of an in-place
// write into zero-filled space (no size or extent change, so nothing but the
// record's own blocks goes to the disk), or, for writes whose sync is
// deferred, with one fdatasync for several (records are in order, so one
// fdatasync covers all before it); the Instance files are rewritten without
// fsync. After a machine crash, records() hands back what the files
// may have lost. Once the files the records cover are durable (a checkpoint,
// see JournalledWrites) the store calls reset(), which drops every record at
// once by starting a new epoch.
//
// Layout: a header ("DOWSERJ1", epoch) in the first kHeaderSize bytes, then
// records: magic, kind, payload length, epoch, CRC-32 of all of these and the
// payload, then the payload. The first record that is zeros, of another epoch,
// or fails its checksum (a torn write) ends the journal; records() logs a
// record of the epoch that ends it (an error if valid records follow it).
//
// Not thread-safe: callers hold the store's lock, which also excludes other
// processes sharing the journal; each instance catches up with records other
// processes appended before it writes, and hands them to take_changes().
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "posix_io.hpp"

namespace dowser::store::detail {

// Whether a file system of this type (statfs f_type) rewrites a file's
// blocks in place, so that data written over them is durable with the next
// flush of the disk and no metadata of the file's: ext4 and XFS (tmpfs too,
// where nothing is durable anyway). Not copy-on-write ones (Btrfs, ZFS,
// F2FS), whose new blocks need their own commit, nor overlayfs, NFS and the
// like, where sync_file_range does not reach the disk.
bool overwrites_in_place(int64_t file_system_type);

struct JournalRecord {
  enum class Kind : uint8_t { put = 1, remove = 2 };
  Kind kind = Kind::put;
  std::string payload;
};

class StoreJournal {
 public:
  static constexpr size_t kHeaderSize = 64;
  static constexpr size_t kRecordHeaderSize = 24;
  // Zeros are written ahead of records in steps of this size, up to capacity:
  // by the store's thread before it flushes (grow_ahead), else by the append
  // that needs the room, which then flushes the step's zeros with its record
  // (1 MiB made that one claim in about 2000 take 1.5 to 4 ms, bench, session
  // 19; 64 KiB costs one in about 110 about 0.5 ms, session 23).
  static constexpr size_t kGrowthStep = size_t{64} << 10;

  // Opens the journal, creating it if missing; a journal whose header is not
  // one is started afresh (with a warning). Throws StoreError(io).
  StoreJournal(std::filesystem::path path, size_t capacity);

  // When an append is durable: before it returns (now); at the next sync()
  // or durable append, which makes every earlier record durable too (later);
  // or written: on the disk before it returns, with every record before it
  // (replay stops at the first record missing), in the disk's volatile write
  // cache at worst, and durable at the next flush of the disk, whoever asks
  // for it. That holds only where a flush of data alone keeps an overwritten
  // block (see overwrites_in_place); elsewhere, and for a record in room the
  // file grew into since this instance's last sync, written is now.
  enum class Sync { now, later, written };
  // Appends record. False (nothing written) if it does not fit in what is
  // left of the capacity: checkpoint, reset(), then append again. Throws
  // StoreError(io) on I/O errors and for a record larger than an empty journal.
  bool append(const JournalRecord& record, Sync when = Sync::now);
  // Whether a written append is durable later than it returns here (the file
  // system rewrites blocks in place); if not, written is now.
  bool keeps_written_records() const { return overwrites_in_place_; }
  // Makes every record appended so far durable. Throws StoreError(io).
  void sync();
  // The same in three steps, so that the flush need not hold the store's
  // lock: flush_point() and flushed() under it, flush() from any thread,
  // in between. Records appended after flush_point() may not be covered.
  uint64_t flush_point() const { return known_size_; }
  void flush();
  void flushed(uint64_t point) { durable_size_ = std::max(durable_size_, point); }
  // Zero-fills the next growth step (up to capacity) once less than a step of
  // room is left past the records. Called by the store's thread under the
  // lock before flush_point(), so that its flush makes the room the journal's
  // before a written append reaches it: the growth, and the fdatasync a
  // written append into new room needs, stay off the appending thread.
  void grow_ahead();
  // How many times this instance made the journal durable (fdatasync),
  // readable from any thread.
  uint64_t syncs() const { return syncs_.load(std::memory_order_relaxed); }

  // The records of the current epoch, oldest first. Counts as having seen
  // them: take_changes() reports only records appended after this.
  std::vector<JournalRecord> records();

  // What other writers (other instances, other processes) did since this
  // instance opened the journal, last called records() or take_changes():
  // whether one of them reset it, and the records they appended (after that
  // reset), oldest first. This instance's own appends and resets are not in it.
  struct Changes {
    bool reset = false;
    std::vector<JournalRecord> records;
  };
  Changes take_changes();
  // The same without reading the file again: for a caller that has just
  // appended (append() catches up before it writes), under the same lock.
  Changes take_collected_changes() { return std::exchange(changes_, {}); }

  // Starts a new epoch: no records. Durable before it returns.
  void reset();

  const std::filesystem::path& path() const { return path_; }
  size_t capacity() const { return capacity_; }
  // As of this instance's last look at the file: the epoch, and the bytes in
  // use (header included).
  uint64_t epoch() const { return position_.epoch; }
  uint64_t used() const { return position_.end; }

 private:
  struct Position {
    uint64_t epoch = 0;
    uint64_t end = kHeaderSize;  // where the next record goes
  };

  void start_afresh(uint64_t epoch);
  void write_header(uint64_t epoch);  // durable
  uint64_t stored_epoch() const;
  // Follows records from position_.end to the first one that is not valid,
  // adding them to changes_ if collect.
  void catch_up(bool collect = true);
  // The size of the valid record at offset, 0 if there is none.
  size_t valid_record_at(uint64_t offset, std::string* payload, JournalRecord::Kind* kind);
  // Logs what ended records() early, if a record of this epoch did.
  void report_damage_at_end();
  // Makes the file reach end (at most capacity), zero-filling whole steps.
  void zero_fill_through(uint64_t end);
  // Waits until the file's first `size` bytes are written to the disk; no flush.
  void write_out(uint64_t size);
  void unwrite_at(uint64_t offset) noexcept;  // a record that failed is not one
  // Whether the file is at least end bytes long. Asks the file (fstat) only
  // when known_size_ says no: on kernels with fine-grained timestamps
  // (Linux 6.13 on), a stat makes the next write change the inode's times, and
  // then each fdatasync writes the inode as well as the record (a second disk
  // write per record on ext4 without a journal).
  bool reaches(uint64_t end);
  uint64_t file_size() const;

  std::filesystem::path path_;
  size_t capacity_;
  UniqueFd fd_;
  Position position_;
  // A lower bound on the file's size: while it is open, every writer only
  // grows it (zero-filling ahead of records).
  uint64_t known_size_ = 0;
  // The file's size as of this instance's last sync(): its blocks up to here
  // are the file's durably, so a write into them needs no metadata flushed.
  uint64_t durable_size_ = 0;
  // Whether the file system under the journal keeps overwritten blocks where
  // they are, so that a later flush of the disk alone makes a written record
  // durable (see overwrites_in_place).
  bool overwrites_in_place_ = false;
  Changes changes_;  // since the last take_changes()
  std::atomic<uint64_t> syncs_{0};
};

}  // namespace dowser::store::detail
