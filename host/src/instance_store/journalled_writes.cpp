#include "journalled_writes.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "posix_io.hpp"
#include "revision_counter.hpp"

namespace dowser::store::detail {
namespace {

std::optional<JournalledWrite> from_record(const JournalRecord& record) {
  const std::string_view payload = record.payload;
  const size_t name_start = payload.find('\0') + 1;
  const size_t revision_start = name_start == 0 ? 0 : payload.find('\0', name_start) + 1;
  const size_t document_start = revision_start == 0 ? 0 : payload.find('\0', revision_start) + 1;
  if (document_start == 0) return std::nullopt;
  JournalledWrite write{std::string(payload.substr(0, name_start - 1)),
                        std::string(payload.substr(name_start, revision_start - name_start - 1)), 0,
                        std::string(payload.substr(document_start))};
  const std::optional<uint64_t> revision =
      parse_revision(payload.substr(revision_start, document_start - revision_start - 1));
  if (!revision || !InstanceFiles::is_valid_name(write.namespace_name) ||
      !InstanceFiles::is_valid_name(write.name)) {
    return std::nullopt;
  }
  write.revision = *revision;
  return write;
}

// The journal's records as writes, skipping (with a warning) any it cannot read.
std::vector<std::pair<JournalRecord::Kind, JournalledWrite>> journalled_writes(
    StoreJournal& journal) {
  std::vector<std::pair<JournalRecord::Kind, JournalledWrite>> writes;
  for (const JournalRecord& record : journal.records()) {
    if (auto write = from_record(record)) {
      writes.emplace_back(record.kind, std::move(*write));
    } else {
      spdlog::warn("instance store: {}: skipping a record that names no Instance",
                   journal.path().string());
    }
  }
  return writes;
}

// The revision of the Instance's file: nullopt if there is none, 0 if it
// cannot be read (torn by a crash); stored revisions start at 1.
std::optional<uint64_t> revision_on_disk(const InstanceFiles& files, const JournalledWrite& write) {
  try {
    const std::optional<StoredInstance> stored = files.read(write.namespace_name, write.name);
    return stored ? std::optional<uint64_t>(stored->revision) : std::nullopt;
  } catch (const StoreError&) {
    return 0;
  }
}

// Redoes a journalled write the files lost; true if it changed a file.
bool replay(const InstanceFiles& files, JournalRecord::Kind kind, const JournalledWrite& write) {
  const std::optional<uint64_t> on_disk = revision_on_disk(files, write);
  const std::filesystem::path path = files.instance_file(write.namespace_name, write.name);
  if (kind == JournalRecord::Kind::remove) {
    return on_disk && *on_disk <= write.revision && remove_file(path);
  }
  if (on_disk && *on_disk >= write.revision) return false;
  ensure_directory_durably(files.namespace_directory(write.namespace_name));
  rewrite_file(path, write.document);
  return true;
}

}  // namespace

// Payload: namespace NUL name NUL revision NUL document (names cannot hold NUL).
JournalRecord to_record(JournalRecord::Kind kind, const JournalledWrite& write) {
  std::string payload = write.namespace_name;
  payload += '\0';
  payload += write.name;
  payload += '\0';
  payload += std::to_string(write.revision);
  payload += '\0';
  payload += write.document;
  return {kind, std::move(payload)};
}

void UnsyncedFiles::add(const Key& file) {
  erase(file);
  order_of_.emplace(file, next_order_);
  by_order_.emplace(next_order_++, file);
  namespaces_.insert(file.first);
}

void UnsyncedFiles::erase(const Key& file) {
  const auto found = order_of_.find(file);
  if (found == order_of_.end()) return;
  by_order_.erase(found->second);
  order_of_.erase(found);
}

void UnsyncedFiles::clear() { *this = {}; }

JournalledWrites::JournalledWrites(const InstanceFiles& files, size_t journal_capacity,
                                   SyncObserver synced)
    : files_(files), journal_(files.journal_file(), journal_capacity), synced_(std::move(synced)) {
  recover();
}

void JournalledWrites::write(JournalRecord::Kind kind, const JournalledWrite& write,
                             const std::function<void()>& write_file) {
  const JournalRecord record = to_record(kind, write);
  note_changes();
  if (!journal_.append(record)) {
    spdlog::warn(
        "instance store: the journal {} filled before its checkpoint finished; fsyncing the "
        "{} files it covers at once",
        journal_.path().string(), unsynced_.size());
    checkpoint();
    if (!journal_.append(record)) {
      throw StoreError(StoreError::Kind::io, "the journal " + journal_.path().string() +
                                                 " has no room even after a checkpoint");
    }
  }
  note_changes();  // appending caught up with other writers' records
  unsynced_.add({write.namespace_name, write.name});
  write_file();
  checkpoint_step(StoreJournal::kRecordHeaderSize + record.payload.size());
}

void JournalledWrites::note_changes() {
  StoreJournal::Changes changes = journal_.take_changes();
  if (changes.reset) unsynced_.clear();  // another writer checkpointed
  for (const JournalRecord& record : changes.records) {
    if (auto write = from_record(record)) unsynced_.add({write->namespace_name, write->name});
  }
}

void JournalledWrites::checkpoint_step(uint64_t record_size) {
  if (journal_.used() < journal_.capacity() / 4 * 3) return;
  // Enough files that, writing alone, this process would be done while half
  // the room left (counted in records like this one) is still free.
  const uint64_t records_left =
      std::max<uint64_t>(1, (journal_.capacity() - journal_.used()) / record_size);
  const size_t files =
      std::max<size_t>(kMinFilesPerStep, (2 * unsynced_.size() + records_left - 1) / records_left);
  try {
    sync_oldest(files);
    if (unsynced_.empty()) finish_checkpoint();
  } catch (const StoreError& error) {
    spdlog::warn("instance store: a checkpoint step failed; the next writes retry it: {}",
                 error.what());
  }
}

void JournalledWrites::sync_oldest(size_t count) {
  for (; count > 0 && !unsynced_.empty(); --count) {
    const UnsyncedFiles::Key file = unsynced_.oldest();
    const std::filesystem::path path = files_.instance_file(file.first, file.second);
    if (fsync_file_if_exists(path)) synced(path);
    unsynced_.erase(file);
  }
}

void JournalledWrites::finish_checkpoint() {
  for (const std::string& namespace_name : unsynced_.namespaces()) {
    const std::filesystem::path directory = files_.namespace_directory(namespace_name);
    if (!std::filesystem::is_directory(directory)) continue;
    fsync_directory(directory);
    synced(directory);
  }
  if (fsync_file_if_exists(files_.revision_file())) synced(files_.revision_file());
  journal_.reset();
  unsynced_.clear();
}

void JournalledWrites::synced(const std::filesystem::path& path) const {
  if (synced_) synced_(path);
}

void JournalledWrites::checkpoint() {
  sync_oldest(unsynced_.size());
  finish_checkpoint();
}

void JournalledWrites::recover() {
  const auto writes = journalled_writes(journal_);
  if (writes.empty()) return;
  size_t repaired = 0;
  uint64_t highest_revision = 0;
  for (const auto& [kind, write] : writes) {
    highest_revision = std::max(highest_revision, write.revision);
    if (replay(files_, kind, write)) ++repaired;
    unsynced_.add({write.namespace_name, write.name});
  }
  next_revision(files_, highest_revision);  // the counter may have lost its last writes
  checkpoint();
  if (repaired > 0) {
    spdlog::warn("instance store: {}: redid {} of {} journalled writes the files had lost",
                 files_.root().string(), repaired, writes.size());
  }
}

}  // namespace dowser::store::detail
