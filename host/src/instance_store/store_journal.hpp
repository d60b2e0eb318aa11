// The file store's write-ahead journal, <root>/.journal. Each write to the
// store is appended here and made durable with one fdatasync of an in-place
// write into zero-filled space (no size or extent change, so nothing but the
// record's own blocks goes to the disk); the Instance files are then rewritten
// without fsync. After a machine crash, records() hands back what the files
// may have lost. When the journal is full the store makes the files durable (a
// checkpoint) and calls reset(), which drops every record at once by starting
// a new epoch.
//
// Layout: a header ("DOWSERJ1", epoch) in the first kHeaderSize bytes, then
// records: magic, kind, payload length, epoch, CRC-32 of all of these and the
// payload, then the payload. The first record that is zeros, of another epoch,
// or fails its checksum (a torn write) ends the journal.
//
// Not thread-safe: callers hold the store's lock, which also excludes other
// processes sharing the journal; each instance catches up with records other
// processes appended before it writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "posix_io.hpp"

namespace dowser::store::detail {

struct JournalRecord {
  enum class Kind : uint8_t { put = 1, remove = 2 };
  Kind kind = Kind::put;
  std::string payload;
};

class StoreJournal {
 public:
  static constexpr size_t kHeaderSize = 64;
  static constexpr size_t kRecordHeaderSize = 24;
  // Zeros are written ahead of records in steps of this size, up to capacity.
  static constexpr size_t kGrowthStep = size_t{1} << 20;

  // Opens the journal, creating it if missing; a journal whose header is not
  // one is started afresh (with a warning). Throws StoreError(io).
  StoreJournal(std::filesystem::path path, size_t capacity);

  // Appends record durably. False (nothing written) if it does not fit in what
  // is left of the capacity: checkpoint, reset(), then append again. Throws
  // StoreError(io) on I/O errors and for a record larger than an empty journal.
  bool append(const JournalRecord& record);

  // The records of the current epoch, oldest first.
  std::vector<JournalRecord> records();

  // Starts a new epoch: no records. Durable before it returns.
  void reset();

  const std::filesystem::path& path() const { return path_; }

 private:
  struct Position {
    uint64_t epoch = 0;
    uint64_t end = kHeaderSize;  // where the next record goes
  };

  void start_afresh(uint64_t epoch);
  void write_header(uint64_t epoch);  // durable
  uint64_t stored_epoch() const;
  // Follows records from position_.end to the first one that is not valid.
  void catch_up();
  // The size of the valid record at offset, 0 if there is none.
  size_t valid_record_at(uint64_t offset, std::string* payload, JournalRecord::Kind* kind) const;
  void zero_fill_to(uint64_t size);
  uint64_t file_size() const;

  std::filesystem::path path_;
  size_t capacity_;
  UniqueFd fd_;
  Position position_;
};

}  // namespace dowser::store::detail
