#include "store_journal.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <boost/crc.hpp>
#include <cerrno>
#include <cstring>
#include <utility>

#include "instance_store.hpp"

namespace dowser::store::detail {
namespace {

constexpr std::array<char, 8> kHeaderMagic{'D', 'O', 'W', 'S', 'E', 'R', 'J', '1'};
constexpr uint32_t kRecordMagic = 0x444a5243;  // "CRJD" read as bytes

// The fixed part of a record, as it is laid out in the file.
struct RecordHeader {
  uint32_t magic = kRecordMagic;
  uint8_t kind = 0;
  uint32_t length = 0;
  uint64_t epoch = 0;
  uint32_t checksum = 0;
};

uint32_t checksum_of(const RecordHeader& header, std::string_view payload) {
  boost::crc_32_type crc;
  crc.process_bytes(&header.kind, sizeof header.kind);
  crc.process_bytes(&header.length, sizeof header.length);
  crc.process_bytes(&header.epoch, sizeof header.epoch);
  crc.process_bytes(payload.data(), payload.size());
  return crc.checksum();
}

void encode_header(const RecordHeader& header, char* out) {
  std::memcpy(out, &header.magic, 4);
  std::memcpy(out + 4, &header.kind, 1);
  std::memset(out + 5, 0, 3);
  std::memcpy(out + 8, &header.length, 4);
  std::memcpy(out + 12, &header.epoch, 8);
  std::memcpy(out + 20, &header.checksum, 4);
}

RecordHeader decode_header(const char* in) {
  RecordHeader header;
  std::memcpy(&header.magic, in, 4);
  std::memcpy(&header.kind, in + 4, 1);
  std::memcpy(&header.length, in + 8, 4);
  std::memcpy(&header.epoch, in + 12, 8);
  std::memcpy(&header.checksum, in + 20, 4);
  return header;
}

bool is_known_kind(uint8_t kind) {
  return kind == static_cast<uint8_t>(JournalRecord::Kind::put) ||
         kind == static_cast<uint8_t>(JournalRecord::Kind::remove);
}

// Short reads (past the end of the file) leave the rest of out untouched.
size_t read_at(int fd, char* out, size_t size, uint64_t offset, const std::filesystem::path& path) {
  size_t done = 0;
  while (done < size) {
    const ssize_t count = ::pread(fd, out + done, size - done, static_cast<off_t>(offset + done));
    if (count < 0) {
      if (errno == EINTR) continue;
      throw_io_error("read", path, errno);
    }
    if (count == 0) break;
    done += static_cast<size_t>(count);
  }
  return done;
}

}  // namespace

StoreJournal::StoreJournal(std::filesystem::path path, size_t capacity)
    : path_(std::move(path)), capacity_(std::max(capacity, kHeaderSize + kRecordHeaderSize)) {
  fd_ = open_or_throw(path_, O_RDWR | O_CREAT, 0644);
  struct statfs file_system {};
  if (::fstatfs(fd_.get(), &file_system) != 0) throw_io_error("statfs", path_, errno);
  overwrites_in_place_ = overwrites_in_place(static_cast<int64_t>(file_system.f_type));
  std::array<char, kHeaderMagic.size()> magic{};
  if (read_at(fd_.get(), magic.data(), magic.size(), 0, path_) != magic.size() ||
      magic != kHeaderMagic) {
    if (file_size() > 0)
      spdlog::warn("instance store: {} is not a journal; starting afresh", path_.string());
    start_afresh(1);
  }
  position_ = {stored_epoch(), kHeaderSize};
  catch_up(false);
}

bool StoreJournal::append(const JournalRecord& record, Sync when) {
  const uint64_t size = kRecordHeaderSize + record.payload.size();
  if (kHeaderSize + size > capacity_) {
    throw StoreError(StoreError::Kind::io,
                     "a record of " + std::to_string(size) + " bytes does not fit in the journal " +
                         path_.string() + " (capacity " + std::to_string(capacity_) + " bytes)");
  }
  catch_up();
  if (position_.end + size > capacity_) return false;
  zero_fill_through(position_.end + size);
  RecordHeader header;
  header.kind = static_cast<uint8_t>(record.kind);
  header.length = static_cast<uint32_t>(record.payload.size());
  header.epoch = position_.epoch;
  header.checksum = checksum_of(header, record.payload);
  std::string bytes(kRecordHeaderSize, '\0');
  encode_header(header, bytes.data());
  bytes += record.payload;
  try {
    write_all_at(fd_.get(), bytes, position_.end, path_);
    const bool written_is_durable_later =
        overwrites_in_place_ && position_.end + size <= durable_size_;
    if (when == Sync::now || (when == Sync::written && !written_is_durable_later))
      sync();
    else if (when == Sync::written)
      write_out(position_.end + size);
  } catch (const StoreError&) {
    unwrite_at(position_.end);
    throw;
  }
  position_.end += size;
  return true;
}

// A record whose write or flush failed was told to the caller as not made:
// it must not be read as one (by the next append's catch_up, or replayed
// after a restart). A zeroed header ends the journal there. Best effort:
// the write failed already; the zeros are flushed too, in case the record
// itself reached the disk.
void StoreJournal::unwrite_at(uint64_t offset) noexcept {
  try {
    write_all_at(fd_.get(), std::string(kRecordHeaderSize, '\0'), offset, path_);
    ::fdatasync(fd_.get());
  } catch (const StoreError& e) {
    spdlog::error("instance store: cannot undo a failed journal record in {}: {}", path_.string(),
                  e.what());
  }
}

void StoreJournal::sync() {
  const uint64_t point = flush_point();
  flush();
  flushed(point);
}

void StoreJournal::flush() {
  if (::fdatasync(fd_.get()) != 0) throw_io_error("fdatasync", path_, errno);
  syncs_.fetch_add(1, std::memory_order_relaxed);
}

// From the start: records appended before (deferred creates, another
// process's) may be in memory only, and replay would stop at them. Pages
// already clean cost nothing.
void StoreJournal::write_out(uint64_t size) {
  constexpr unsigned kWriteAndWait =
      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;
  if (::sync_file_range(fd_.get(), 0, static_cast<off_t>(size), kWriteAndWait) != 0)
    throw_io_error("sync_file_range", path_, errno);
}

bool overwrites_in_place(int64_t file_system_type) {
  switch (file_system_type) {
    case EXT4_SUPER_MAGIC:  // ext2 and ext3 too
    case XFS_SUPER_MAGIC:
    case TMPFS_MAGIC:
      return true;
    default:
      return false;
  }
}

std::vector<JournalRecord> StoreJournal::records() {
  position_ = {stored_epoch(), kHeaderSize};
  changes_ = {};
  std::vector<JournalRecord> found;
  JournalRecord record;
  while (const size_t size = valid_record_at(position_.end, &record.payload, &record.kind)) {
    found.push_back(std::move(record));
    record = {};
    position_.end += size;
  }
  report_damage_at_end();
  return found;
}

// A record of this epoch where replay stopped: normally a write a crash cut
// short, never acknowledged. Records of this epoch after it mean the disk
// lost acknowledged writes, which must not pass in silence.
void StoreJournal::report_damage_at_end() {
  std::array<char, kRecordHeaderSize> bytes{};
  if (read_at(fd_.get(), bytes.data(), bytes.size(), position_.end, path_) != bytes.size()) return;
  const RecordHeader header = decode_header(bytes.data());
  if (header.magic != kRecordMagic || header.epoch != position_.epoch) return;
  uint64_t offset = position_.end + kRecordHeaderSize + header.length;
  size_t later = 0;
  while (const size_t size = valid_record_at(offset, nullptr, nullptr)) {
    ++later;
    offset += size;
  }
  if (later == 0) {
    spdlog::warn(
        "instance store: {}: replay ends at byte {}, a record a crash cut short or damaged (a "
        "write not acknowledged, if the crash cut it)",
        path_.string(), position_.end);
  } else {
    spdlog::error(
        "instance store: {}: the record at byte {} is damaged and {} acknowledged record(s) "
        "follow it; they are not replayed, so Instance writes made just before the last stop may "
        "be lost: check the disk",
        path_.string(), position_.end, later);
  }
}

StoreJournal::Changes StoreJournal::take_changes() {
  catch_up();
  return take_collected_changes();
}

void StoreJournal::reset() {
  write_header(std::max(stored_epoch(), position_.epoch) + 1);
  changes_ = {};  // records of the epoch that ended
}

void StoreJournal::write_header(uint64_t epoch) {
  std::array<char, kHeaderSize> header{};
  std::copy(kHeaderMagic.begin(), kHeaderMagic.end(), header.begin());
  std::memcpy(header.data() + kHeaderMagic.size(), &epoch, sizeof epoch);
  write_all_at(fd_.get(), std::string_view(header.data(), header.size()), 0, path_);
  sync();
  position_ = {epoch, kHeaderSize};
}

void StoreJournal::start_afresh(uint64_t epoch) {
  if (::ftruncate(fd_.get(), 0) != 0) throw_io_error("truncate", path_, errno);
  known_size_ = 0;
  durable_size_ = 0;
  write_header(epoch);
  // The journal's own directory entry must outlive a crash, or its records would.
  fsync_directory(path_.parent_path());
}

uint64_t StoreJournal::stored_epoch() const {
  std::array<char, kHeaderMagic.size() + sizeof(uint64_t)> header{};
  if (read_at(fd_.get(), header.data(), header.size(), 0, path_) != header.size() ||
      !std::equal(kHeaderMagic.begin(), kHeaderMagic.end(), header.begin())) {
    throw StoreError(StoreError::Kind::io, path_.string() + ": the journal header was overwritten");
  }
  uint64_t epoch = 0;
  std::memcpy(&epoch, header.data() + kHeaderMagic.size(), sizeof epoch);
  return epoch;
}

void StoreJournal::catch_up(bool collect) {
  const uint64_t epoch = stored_epoch();
  if (epoch != position_.epoch) {
    position_ = {epoch, kHeaderSize};
    changes_ = {.reset = true, .records = {}};
  }
  JournalRecord record;
  while (const size_t size = valid_record_at(position_.end, collect ? &record.payload : nullptr,
                                             collect ? &record.kind : nullptr)) {
    if (collect) changes_.records.push_back(std::exchange(record, {}));
    position_.end += size;
  }
}

size_t StoreJournal::valid_record_at(uint64_t offset, std::string* payload,
                                     JournalRecord::Kind* kind) {
  std::array<char, kRecordHeaderSize> bytes{};
  if (read_at(fd_.get(), bytes.data(), bytes.size(), offset, path_) != bytes.size()) return 0;
  const RecordHeader header = decode_header(bytes.data());
  if (header.magic != kRecordMagic || header.epoch != position_.epoch ||
      !is_known_kind(header.kind) || !reaches(offset + kRecordHeaderSize + header.length)) {
    return 0;
  }
  std::string body(header.length, '\0');
  if (read_at(fd_.get(), body.data(), body.size(), offset + kRecordHeaderSize, path_) !=
          body.size() ||
      checksum_of(header, body) != header.checksum) {
    return 0;
  }
  if (payload != nullptr) *payload = std::move(body);
  if (kind != nullptr) *kind = static_cast<JournalRecord::Kind>(header.kind);
  return kRecordHeaderSize + header.length;
}

void StoreJournal::grow_ahead() {
  zero_fill_through(std::min<uint64_t>(capacity_, position_.end + kGrowthStep));
}

void StoreJournal::zero_fill_through(uint64_t end) {
  if (reaches(end)) return;
  const uint64_t from = known_size_;  // fresh: reaches() has just asked the file
  const uint64_t steps = (end + kGrowthStep - 1) / kGrowthStep;
  const uint64_t size = std::min<uint64_t>(capacity_, steps * kGrowthStep);
  const std::string zeros(size - from, '\0');
  write_all_at(fd_.get(), zeros, from, path_);
  known_size_ = size;
}

bool StoreJournal::reaches(uint64_t end) {
  if (end <= known_size_) return true;
  known_size_ = file_size();
  return end <= known_size_;
}

uint64_t StoreJournal::file_size() const {
  struct stat status {};
  if (::fstat(fd_.get(), &status) != 0) throw_io_error("stat", path_, errno);
  return static_cast<uint64_t>(status.st_size);
}

}  // namespace dowser::store::detail
