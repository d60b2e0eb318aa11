#include <fcntl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <system_error>

#include "file_watch_service.hpp"
#include "instance_files.hpp"
#include "instance_json.hpp"
#include "instance_store.hpp"
#include "posix_io.hpp"

namespace dowser::store {
namespace {

using detail::InstanceFiles;

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

void write_instance(const InstanceFiles& files, const Instance& instance, uint64_t revision) {
  std::string text;
  try {
    text = detail::to_json_text({instance, revision});
  } catch (const detail::InstanceFormatError& error) {
    throw StoreError(StoreError::Kind::io, error.what());
  }
  detail::replace_file_durably(files.instance_file(instance.namespace_name, instance.name), text);
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

}  // namespace

struct FileInstanceStore::State {
  explicit State(std::filesystem::path directory)
      : files(std::move(directory)), watches(std::make_shared<detail::FileWatchService>(files)) {}
  InstanceFiles files;
  std::shared_ptr<detail::FileWatchService> watches;
};

FileInstanceStore::FileInstanceStore(std::filesystem::path directory) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) {
    throw StoreError(StoreError::Kind::io,
                     "create store directory " + directory.string() + ": " + error.message());
  }
  state_ = std::make_unique<State>(std::move(directory));
}

FileInstanceStore::~FileInstanceStore() { state_->watches->shutdown(); }

std::vector<StoredInstance> FileInstanceStore::list() { return state_->files.read_all(); }

std::optional<StoredInstance> FileInstanceStore::get(const std::string& namespace_name,
                                                     const std::string& name) {
  return state_->files.read(namespace_name, name);
}

uint64_t FileInstanceStore::create(const Instance& instance) {
  const InstanceFiles& files = state_->files;
  const std::filesystem::path path = files.instance_file(instance.namespace_name, instance.name);
  const detail::ExclusiveFileLock lock(files.lock_file());
  if (::access(path.c_str(), F_OK) == 0) {
    throw StoreError(StoreError::Kind::already_exists,
                     describe(instance.namespace_name, instance.name) + " already exists");
  }
  detail::ensure_directory_durably(files.namespace_directory(instance.namespace_name));
  const uint64_t revision = next_revision(files, 0);
  write_instance(files, instance, revision);
  return revision;
}

uint64_t FileInstanceStore::update(const Instance& instance, uint64_t expected_revision) {
  const InstanceFiles& files = state_->files;
  const detail::ExclusiveFileLock lock(files.lock_file());
  require_revision(files, instance.namespace_name, instance.name, expected_revision);
  const uint64_t revision = next_revision(files, expected_revision);
  write_instance(files, instance, revision);
  return revision;
}

void FileInstanceStore::remove(const std::string& namespace_name, const std::string& name,
                               uint64_t expected_revision) {
  const InstanceFiles& files = state_->files;
  const std::filesystem::path path = files.instance_file(namespace_name, name);
  const detail::ExclusiveFileLock lock(files.lock_file());
  require_revision(files, namespace_name, name, expected_revision);
  detail::remove_file_durably(path);
}

std::unique_ptr<WatchSubscription> FileInstanceStore::watch(
    std::function<void(const WatchEvent&)> callback) {
  return state_->watches->watch(std::move(callback));
}

}  // namespace dowser::store
