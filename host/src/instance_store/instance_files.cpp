#include "instance_files.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <system_error>
#include <utility>

#include "instance_json.hpp"
#include "posix_io.hpp"

namespace dowser::store::detail {
namespace {

constexpr std::string_view kInstanceSuffix = ".json";

void require_valid_name(const char* what, const std::string& value) {
  if (!InstanceFiles::is_valid_name(value)) {
    throw StoreError(StoreError::Kind::io, std::string("invalid Instance ") + what + " \"" + value +
                                               "\": must be non-empty, without '/' or NUL, and "
                                               "must not start with '.'");
  }
}

// Names of the entries of a directory that pass keep; empty if it is gone.
template <typename Keep>
std::vector<std::string> entry_names(const std::filesystem::path& directory, Keep keep) {
  std::vector<std::string> names;
  std::error_code error;
  std::filesystem::directory_iterator entries(directory, error);
  if (error) {
    if (error == std::errc::no_such_file_or_directory) return names;
    throw StoreError(StoreError::Kind::io,
                     "list directory " + directory.string() + ": " + error.message());
  }
  for (; entries != std::filesystem::directory_iterator(); entries.increment(error)) {
    if (error) break;  // the directory changed under us; what was read so far stands
    if (auto name = keep(*entries)) names.push_back(std::move(*name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

bool InstanceFiles::is_valid_name(std::string_view name) {
  return !name.empty() && name.front() != '.' && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

std::optional<std::string> InstanceFiles::instance_name_of(std::string_view file_name) {
  if (!file_name.ends_with(kInstanceSuffix)) return std::nullopt;
  file_name.remove_suffix(kInstanceSuffix.size());
  if (!is_valid_name(file_name)) return std::nullopt;
  return std::string(file_name);
}

std::filesystem::path InstanceFiles::namespace_directory(const std::string& namespace_name) const {
  require_valid_name("namespace", namespace_name);
  return root_ / namespace_name;
}

std::filesystem::path InstanceFiles::instance_file(const std::string& namespace_name,
                                                   const std::string& name) const {
  require_valid_name("name", name);
  return namespace_directory(namespace_name) / (name + std::string(kInstanceSuffix));
}

std::optional<StoredInstance> InstanceFiles::read(const std::string& namespace_name,
                                                  const std::string& name) const {
  const std::filesystem::path file = instance_file(namespace_name, name);
  try {
    const std::optional<std::string> text = read_file_if_exists(file);
    // Empty: a write that never got its bytes (the disk was full, or a crash
    // right after the file was created); the journal still holds the write.
    std::optional<StoredInstance> stored;
    if (text && !text->empty()) stored = parse(namespace_name, name, *text);
    note_readable(file);
    return stored;
  } catch (const StoreError& error) {
    note_unreadable(file, error.what());
    throw;
  }
}

// One relaxed load on the path every claim takes, while no file is unreadable.
void InstanceFiles::note_readable(const std::filesystem::path& file) const {
  if (unreadable_->count.load(std::memory_order_relaxed) == 0) return;
  const std::lock_guard lock(unreadable_->mutex);
  unreadable_->files.erase(file);
  unreadable_->count = unreadable_->files.size();
}

void InstanceFiles::note_unreadable(const std::filesystem::path& file,
                                    const std::string& why) const {
  const std::lock_guard lock(unreadable_->mutex);
  auto& entry = unreadable_->files[file];
  if (entry.why != why) entry = {why, false};
  unreadable_->count = unreadable_->files.size();
}

bool InstanceFiles::take_warning(const std::filesystem::path& file) const {
  const std::lock_guard lock(unreadable_->mutex);
  auto entry = unreadable_->files.find(file);
  return entry != unreadable_->files.end() && !std::exchange(entry->second.warned, true);
}

StoredInstance InstanceFiles::parse(const std::string& namespace_name, const std::string& name,
                                    std::string_view text) const {
  const std::filesystem::path path = instance_file(namespace_name, name);
  StoredInstance stored;
  try {
    stored = from_json_text(text);
  } catch (const InstanceFormatError& error) {
    throw StoreError(StoreError::Kind::io, path.string() + ": " + error.what());
  }
  const Instance& instance = stored.instance;
  if (instance.namespace_name != namespace_name || instance.name != name) {
    throw StoreError(StoreError::Kind::io, path.string() + ": metadata names Instance " +
                                               instance.namespace_name + "/" + instance.name +
                                               ", not the file's " + namespace_name + "/" + name);
  }
  return stored;
}

std::vector<StoredInstance> InstanceFiles::read_all() const {
  std::vector<StoredInstance> all;
  for (const std::string& namespace_name : namespaces()) {
    for (const std::string& name : instance_names(namespace_name)) {
      try {
        if (auto stored = read(namespace_name, name)) all.push_back(std::move(*stored));
      } catch (const StoreError& error) {
        if (take_warning(instance_file(namespace_name, name)))
          spdlog::warn("instance store: skipping an unreadable Instance file: {}", error.what());
      }
    }
  }
  return all;
}

std::vector<std::string> InstanceFiles::unreadable() const {
  const std::lock_guard lock(unreadable_->mutex);
  std::vector<std::string> result;
  for (const auto& [file, entry] : unreadable_->files) result.push_back(entry.why);
  return result;
}

std::optional<StoredInstance> InstanceFiles::read_settled(const std::string& namespace_name,
                                                          const std::string& name) const {
  const FileLock lock(lock_file(), FileLock::Mode::shared);
  return read(namespace_name, name);
}

std::vector<StoredInstance> InstanceFiles::read_all_settled() const {
  const FileLock lock(lock_file(), FileLock::Mode::shared);
  return read_all();
}

std::vector<std::string> InstanceFiles::namespaces() const {
  return entry_names(root_, [](const std::filesystem::directory_entry& entry) {
    std::error_code error;
    std::string name = entry.path().filename().string();
    const bool keep = is_valid_name(name) && entry.is_directory(error);
    return keep ? std::optional<std::string>(std::move(name)) : std::nullopt;
  });
}

std::vector<std::string> InstanceFiles::instance_names(const std::string& namespace_name) const {
  return entry_names(namespace_directory(namespace_name),
                     [](const std::filesystem::directory_entry& entry) {
                       return instance_name_of(entry.path().filename().string());
                     });
}

}  // namespace dowser::store::detail
