#include "journalled_writes.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
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

void checkpoint(const InstanceFiles& files, StoreJournal& journal) {
  std::set<std::pair<std::string, std::string>> instances;
  std::set<std::string> namespaces;
  for (const auto& [kind, write] : journalled_writes(journal)) {
    instances.emplace(write.namespace_name, write.name);
    namespaces.insert(write.namespace_name);
  }
  for (const auto& [namespace_name, name] : instances) {
    fsync_file_if_exists(files.instance_file(namespace_name, name));
  }
  for (const std::string& namespace_name : namespaces) {
    const std::filesystem::path directory = files.namespace_directory(namespace_name);
    if (std::filesystem::is_directory(directory)) fsync_directory(directory);
  }
  fsync_file_if_exists(files.revision_file());
  journal.reset();
}

void recover(const InstanceFiles& files, StoreJournal& journal) {
  const auto writes = journalled_writes(journal);
  if (writes.empty()) return;
  size_t repaired = 0;
  uint64_t highest_revision = 0;
  for (const auto& [kind, write] : writes) {
    highest_revision = std::max(highest_revision, write.revision);
    if (replay(files, kind, write)) ++repaired;
  }
  next_revision(files, highest_revision);  // the counter may have lost its last writes
  checkpoint(files, journal);
  if (repaired > 0) {
    spdlog::warn("instance store: {}: redid {} of {} journalled writes the files had lost",
                 files.root().string(), repaired, writes.size());
  }
}

}  // namespace dowser::store::detail
