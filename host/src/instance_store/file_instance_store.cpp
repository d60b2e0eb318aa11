#include <spdlog/spdlog.h>

#include <mutex>
#include <system_error>
#include <type_traits>

#include "file_watch_service.hpp"
#include "instance_files.hpp"
#include "instance_json.hpp"
#include "instance_store.hpp"
#include "journalled_writes.hpp"
#include "posix_io.hpp"
#include "revision_counter.hpp"

namespace dowser::store {
namespace {

using detail::FileLock;
using detail::InstanceFiles;
using detail::JournalEntry;
using detail::JournalledWrites;
using detail::JournalRecord;

std::string describe(const std::string& namespace_name, const std::string& name) {
  return "Instance " + namespace_name + "/" + name;
}

std::string instance_text(const Instance& instance, uint64_t revision) {
  try {
    return detail::to_json_text({instance, revision});
  } catch (const detail::InstanceFormatError& error) {
    throw StoreError(StoreError::Kind::io, error.what());
  }
}

// The journal recovers under the lock; then its checkpoint thread starts.
JournalledWrites open_journal(const InstanceFiles& files, size_t capacity) {
  const FileLock lock(files.lock_file(), FileLock::Mode::exclusive);
  return JournalledWrites(files, capacity);
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

// Tells the watch thread, if one runs, what was written before inotify does.
void rewrite_instance_file(detail::FileWatchService& watches, const std::filesystem::path& path,
                           const Instance& instance, uint64_t revision, const std::string& text) {
  if (!watches.recording()) return detail::rewrite_file(path, text);
  detail::rewrite_file(path, text, [&](const detail::FileIdentity& identity) {
    watches.wrote(instance.namespace_name, instance.name, revision, text, identity);
  });
}

// Undoes a failed write by putting `before` back, at a revision above the
// failed one (the failed write may have reached the file).
JournalledWrites::Undo put_back(const InstanceFiles& files, detail::FileWatchService& watches,
                                const StoredInstance& before, uint64_t failed_revision) {
  return [&files, &watches, &before, failed_revision] {
    const uint64_t revision = detail::next_revision(files, failed_revision);
    watches.handed_out(revision);
    const Instance& instance = before.instance;
    return JournalEntry{
        JournalRecord::Kind::put,
        {instance.namespace_name, instance.name, revision, instance_text(instance, revision)}};
  };
}

}  // namespace

struct FileInstanceStore::State {
  State(std::filesystem::path directory, size_t journal_capacity)
      : files(std::move(directory)),
        writes(open_journal(files, journal_capacity)),
        watches(std::make_shared<detail::FileWatchService>(files)) {}

  // Runs a create, update or remove, noting whether it failed with an I/O
  // error (a lost race or a missing Instance is no failure of the store).
  template <typename Write>
  auto noting_failure(const Write& write) -> decltype(write()) {
    try {
      if constexpr (std::is_void_v<decltype(write())>) {
        write();
        note_failure(std::nullopt);
      } else {
        auto result = write();
        note_failure(std::nullopt);
        return result;
      }
    } catch (const StoreError& error) {
      if (error.kind() == StoreError::Kind::io) note_failure(error.what());
      throw;
    }
  }

  void note_failure(std::optional<std::string> failure) {
    const std::lock_guard guard(failure_mutex);
    write_failure = std::move(failure);
  }

  InstanceFiles files;
  JournalledWrites writes;
  std::shared_ptr<detail::FileWatchService> watches;
  mutable std::mutex failure_mutex;
  std::optional<std::string> write_failure;  // under failure_mutex
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
  return state_->noting_failure([&] { return create_instance_file(instance); });
}

uint64_t FileInstanceStore::update(const Instance& instance, uint64_t expected_revision) {
  return state_->noting_failure([&] { return update_instance_file(instance, expected_revision); });
}

void FileInstanceStore::remove(const std::string& namespace_name, const std::string& name,
                               uint64_t expected_revision) {
  state_->noting_failure([&] { remove_instance_file(namespace_name, name, expected_revision); });
}

uint64_t FileInstanceStore::create_instance_file(const Instance& instance) {
  const InstanceFiles& files = state_->files;
  const std::filesystem::path path = files.instance_file(instance.namespace_name, instance.name);
  const detail::StoreWriteLock lock = state_->writes.lock();
  if (files.read(instance.namespace_name, instance.name)) {  // an empty file is overwritten
    throw StoreError(StoreError::Kind::already_exists,
                     describe(instance.namespace_name, instance.name) + " already exists");
  }
  detail::ensure_directory_durably(files.namespace_directory(instance.namespace_name));
  const uint64_t revision = detail::next_revision(files, 0);
  state_->watches->handed_out(revision);
  std::string text = instance_text(instance, revision);
  // A new Instance holds no claim yet: it may wait for a deferred sync.
  state_->writes.write(
      JournalRecord::Kind::put, {instance.namespace_name, instance.name, revision, text},
      [&] { rewrite_instance_file(*state_->watches, path, instance, revision, text); },
      [&] {
        return JournalEntry{JournalRecord::Kind::remove,
                            {instance.namespace_name, instance.name, revision, ""}};
      },
      JournalledWrites::Deferral::allowed);
  return revision;
}

uint64_t FileInstanceStore::update_instance_file(const Instance& instance,
                                                 uint64_t expected_revision) {
  const InstanceFiles& files = state_->files;
  const std::filesystem::path path = files.instance_file(instance.namespace_name, instance.name);
  const detail::StoreWriteLock lock = state_->writes.lock();
  const StoredInstance before =
      require_revision(files, instance.namespace_name, instance.name, expected_revision);
  const uint64_t revision = detail::next_revision(files, expected_revision);
  state_->watches->handed_out(revision);
  std::string text = instance_text(instance, revision);
  state_->writes.write(
      JournalRecord::Kind::put, {instance.namespace_name, instance.name, revision, text},
      [&] { rewrite_instance_file(*state_->watches, path, instance, revision, text); },
      put_back(files, *state_->watches, before, revision));
  return revision;
}

void FileInstanceStore::remove_instance_file(const std::string& namespace_name,
                                             const std::string& name, uint64_t expected_revision) {
  const InstanceFiles& files = state_->files;
  const std::filesystem::path path = files.instance_file(namespace_name, name);
  const detail::StoreWriteLock lock = state_->writes.lock();
  const StoredInstance before = require_revision(files, namespace_name, name, expected_revision);
  state_->writes.write(
      JournalRecord::Kind::remove, {namespace_name, name, expected_revision, ""},
      [&] { detail::remove_file(path); },
      put_back(files, *state_->watches, before, expected_revision));
  state_->watches->removed(namespace_name, name);
}

void FileInstanceStore::defer_sync(Deferring deferring) { state_->writes.defer_sync(deferring); }

void FileInstanceStore::sync() { state_->writes.sync_deferred(); }

void FileInstanceStore::sync_in_background() { state_->writes.sync_deferred_in_background(); }

std::optional<uint64_t> FileInstanceStore::journal_syncs() const {
  return state_->writes.journal_syncs();
}

std::vector<std::string> FileInstanceStore::skipped() const { return state_->files.unreadable(); }

void FileInstanceStore::check_access() {
  const FileLock lock(state_->files.lock_file(), FileLock::Mode::shared);
  state_->files.namespaces();
}

std::optional<std::string> FileInstanceStore::write_failure() const {
  const std::lock_guard guard(state_->failure_mutex);
  return state_->write_failure;
}

uint64_t FileInstanceStore::watch_file_reads() const { return state_->watches->files_read(); }

std::unique_ptr<WatchSubscription> FileInstanceStore::watch(
    std::function<void(const WatchEvent&)> callback) {
  return state_->watches->watch(std::move(callback));
}

}  // namespace dowser::store
