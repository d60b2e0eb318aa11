#include <fcntl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <mutex>
#include <set>
#include <system_error>

#include "file_watch_service.hpp"
#include "instance_files.hpp"
#include "instance_json.hpp"
#include "instance_store.hpp"
#include "posix_io.hpp"
#include "store_journal.hpp"

namespace dowser::store {
namespace {

using detail::FileLock;
using detail::InstanceFiles;
using detail::JournalRecord;
using detail::StoreJournal;

std::string describe(const std::string& namespace_name, const std::string& name) {
  return "Instance " + namespace_name + "/" + name;
}

std::optional<uint64_t> parse_counter(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

uint64_t highest_stored_revision(const InstanceFiles& files) {
  uint64_t highest = 0;
  for (const StoredInstance& stored : files.read_all()) {
    highest = std::max(highest, stored.revision);
  }
  return highest;
}

void overwrite_counter(int fd, const std::filesystem::path& path, uint64_t value, size_t old_size) {
  const std::string text = std::to_string(value) + "\n";
  const ssize_t written = ::pwrite(fd, text.data(), text.size(), 0);
  if (written < 0) detail::throw_io_error("write", path, errno);
  if (static_cast<size_t>(written) != text.size()) detail::throw_io_error("write", path, EIO);
  // The counter only grows, except when recovered from a corrupt one.
  if (old_size > text.size() && ::ftruncate(fd, static_cast<off_t>(text.size())) != 0) {
    detail::throw_io_error("truncate", path, errno);
  }
}

// Takes the next store-wide revision from <root>/.revision, above at_least
// (the revision being replaced); call with the store lock held. The counter
// is not fsynced (one fsync fewer per claim): if a machine crash loses its
// last writes, an Instance's own revision still only grows, because an
// update never goes below the revision it replaces.
uint64_t next_revision(const InstanceFiles& files, uint64_t at_least) {
  const std::filesystem::path path = files.revision_file();
  const detail::UniqueFd fd = detail::open_or_throw(path, O_RDWR | O_CREAT, 0644);
  const std::string text = detail::read_all(fd.get(), path);
  std::optional<uint64_t> last = parse_counter(text);
  if (!last) {
    // New store, or the counter was lost: never go below what is stored.
    if (!text.empty()) spdlog::warn("instance store: {} is corrupt; recounting", path.string());
    last = highest_stored_revision(files);
  }
  const uint64_t next = std::max(*last, at_least) + 1;
  overwrite_counter(fd.get(), path, next, text.size());
  return next;
}

std::string instance_text(const Instance& instance, uint64_t revision) {
  try {
    return detail::to_json_text({instance, revision});
  } catch (const detail::InstanceFormatError& error) {
    throw StoreError(StoreError::Kind::io, error.what());
  }
}

// What a journal record says was written: the document is empty for a removal
// (whose revision is the one removed).
struct JournalledWrite {
  std::string namespace_name;
  std::string name;
  uint64_t revision = 0;
  std::string document;
};

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
      parse_counter(payload.substr(revision_start, document_start - revision_start - 1));
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

// Makes every file the journal covers durable, then empties the journal.
void checkpoint(const InstanceFiles& files, StoreJournal& journal) {
  std::set<std::pair<std::string, std::string>> instances;
  std::set<std::string> namespaces;
  for (const auto& [kind, write] : journalled_writes(journal)) {
    instances.emplace(write.namespace_name, write.name);
    namespaces.insert(write.namespace_name);
  }
  for (const auto& [namespace_name, name] : instances) {
    detail::fsync_file_if_exists(files.instance_file(namespace_name, name));
  }
  for (const std::string& namespace_name : namespaces) {
    const std::filesystem::path directory = files.namespace_directory(namespace_name);
    if (std::filesystem::is_directory(directory)) detail::fsync_directory(directory);
  }
  detail::fsync_file_if_exists(files.revision_file());
  journal.reset();
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
    return on_disk && *on_disk <= write.revision && detail::remove_file(path);
  }
  if (on_disk && *on_disk >= write.revision) return false;
  detail::ensure_directory_durably(files.namespace_directory(write.namespace_name));
  detail::rewrite_file(path, write.document);
  return true;
}

// After a crash the files may lack writes the journal holds: redo them, then
// checkpoint. Harmless when another process is using the store: its files are
// at or past every journalled revision. Call with the store lock held.
void recover(const InstanceFiles& files, StoreJournal& journal) {
  const auto writes = journalled_writes(journal);
  if (writes.empty()) return;
  size_t repaired = 0;
  uint64_t highest_revision = 0;
  for (const auto& [kind, write] : writes) {
    highest_revision = std::max(highest_revision, write.revision);
    // A write that cannot be redone throws, and the journal keeps it for the next try.
    if (replay(files, kind, write)) ++repaired;
  }
  next_revision(files, highest_revision);  // the counter may have lost its last writes
  checkpoint(files, journal);
  if (repaired > 0) {
    spdlog::warn("instance store: {}: redid {} of {} journalled writes the files had lost",
                 files.root().string(), repaired, writes.size());
  }
}

StoreJournal open_journal(const InstanceFiles& files, size_t capacity) {
  const FileLock lock(files.lock_file(), FileLock::Mode::exclusive);
  StoreJournal journal(files.journal_file(), capacity);
  recover(files, journal);
  return journal;
}

// The stored Instance, if it is still at expected_revision.
StoredInstance require_revision(const InstanceFiles& files, const std::string& namespace_name,
                                const std::string& name, uint64_t expected_revision) {
  std::optional<StoredInstance> current = files.read(namespace_name, name);
  if (!current)
    throw StoreError(StoreError::Kind::not_found,
                     describe(namespace_name, name) + " does not exist");
  if (current->revision != expected_revision) {
    throw StoreError(StoreError::Kind::conflict,
                     describe(namespace_name, name) + ": expected revision " +
                         std::to_string(expected_revision) + ", stored revision is " +
                         std::to_string(current->revision));
  }
  return std::move(*current);
}

// Held by every write: the journal's position is shared by this process's
// writers (mutex), and the store by every process (flock), in that order.
class WriteLock {
 public:
  WriteLock(std::mutex& writers, const InstanceFiles& files)
      : writers_(writers), file_(files.lock_file(), FileLock::Mode::exclusive) {}

 private:
  std::lock_guard<std::mutex> writers_;
  FileLock file_;
};

}  // namespace

struct FileInstanceStore::State {
  State(std::filesystem::path directory, size_t journal_capacity)
      : files(std::move(directory)),
        journal(open_journal(files, journal_capacity)),
        watches(std::make_shared<detail::FileWatchService>(files)) {}

  // Makes the write durable in the journal; the caller then writes the file.
  // If the file write fails, the journal still redoes it after a restart, as
  // if the process had crashed between the two.
  void write_ahead(JournalRecord::Kind kind, const JournalledWrite& write) {
    const JournalRecord record = to_record(kind, write);
    if (journal.append(record)) return;
    checkpoint(files, journal);
    if (!journal.append(record)) {
      throw StoreError(StoreError::Kind::io, "the journal " + journal.path().string() +
                                                 " has no room even after a checkpoint");
    }
  }

  InstanceFiles files;
  std::mutex writers;
  StoreJournal journal;
  std::shared_ptr<detail::FileWatchService> watches;
};

FileInstanceStore::FileInstanceStore(std::filesystem::path directory, size_t journal_capacity) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) {
    throw StoreError(StoreError::Kind::io,
                     "create store directory " + directory.string() + ": " + error.message());
  }
  state_ = std::make_unique<State>(std::move(directory), journal_capacity);
}

FileInstanceStore::~FileInstanceStore() { state_->watches->shutdown(); }

std::vector<StoredInstance> FileInstanceStore::list() { return state_->files.read_all_settled(); }

std::optional<StoredInstance> FileInstanceStore::get(const std::string& namespace_name,
                                                     const std::string& name) {
  return state_->files.read_settled(namespace_name, name);
}

uint64_t FileInstanceStore::create(const Instance& instance) {
  const InstanceFiles& files = state_->files;
  const std::filesystem::path path = files.instance_file(instance.namespace_name, instance.name);
  const WriteLock lock(state_->writers, files);
  if (::access(path.c_str(), F_OK) == 0) {
    throw StoreError(StoreError::Kind::already_exists,
                     describe(instance.namespace_name, instance.name) + " already exists");
  }
  detail::ensure_directory_durably(files.namespace_directory(instance.namespace_name));
  const uint64_t revision = next_revision(files, 0);
  std::string text = instance_text(instance, revision);
  state_->write_ahead(JournalRecord::Kind::put,
                      {instance.namespace_name, instance.name, revision, text});
  detail::rewrite_file(path, text);
  return revision;
}

uint64_t FileInstanceStore::update(const Instance& instance, uint64_t expected_revision) {
  const InstanceFiles& files = state_->files;
  const std::filesystem::path path = files.instance_file(instance.namespace_name, instance.name);
  const WriteLock lock(state_->writers, files);
  require_revision(files, instance.namespace_name, instance.name, expected_revision);
  const uint64_t revision = next_revision(files, expected_revision);
  std::string text = instance_text(instance, revision);
  state_->write_ahead(JournalRecord::Kind::put,
                      {instance.namespace_name, instance.name, revision, text});
  detail::rewrite_file(path, text);
  return revision;
}

void FileInstanceStore::remove(const std::string& namespace_name, const std::string& name,
                               uint64_t expected_revision) {
  const InstanceFiles& files = state_->files;
  const std::filesystem::path path = files.instance_file(namespace_name, name);
  const WriteLock lock(state_->writers, files);
  require_revision(files, namespace_name, name, expected_revision);
  state_->write_ahead(JournalRecord::Kind::remove, {namespace_name, name, expected_revision, ""});
  detail::remove_file(path);
}

std::unique_ptr<WatchSubscription> FileInstanceStore::watch(
    std::function<void(const WatchEvent&)> callback) {
  return state_->watches->watch(std::move(callback));
}

}  // namespace dowser::store
