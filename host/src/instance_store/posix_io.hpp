// The few POSIX file operations the file store needs, with errors turned into
// StoreError(io) that name the file.
#pragma once

#include "unique_fd.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace dowser::store::detail {

using dowser::UniqueFd;

// Throws StoreError(io): "<action> <path>: <reason for error>".
[[noreturn]] void throw_io_error(const std::string& action, const std::filesystem::path& path,
                                 int error);

UniqueFd open_or_throw(const std::filesystem::path& path, int flags, unsigned mode = 0);

void write_all_at(int fd, std::string_view data, uint64_t offset,
                  const std::filesystem::path& path);

std::string read_all(int fd, const std::filesystem::path& path);

// nullopt if the file does not exist.
std::optional<std::string> read_file_if_exists(const std::filesystem::path& path);

// Holds flock() on a file (created if missing) for its lifetime. Each holder
// opens the file itself, so threads of one process exclude each other too.
class FileLock {
 public:
  enum class Mode { shared, exclusive };
  FileLock(const std::filesystem::path& path, Mode mode);

 private:
  UniqueFd fd_;
};

// Which file, and which version of it, as far as stat tells: a file rewritten
// (in place or replaced) almost always differs in one of these, except when
// rewritten to the same size within one tick of the file system's clock.
struct FileIdentity {
  uint64_t device = 0, inode = 0, size = 0;
  int64_t modified_ns = 0, changed_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};
// nullopt if there is no such file (or it cannot be looked at).
std::optional<FileIdentity> identity_of(const std::filesystem::path& path);

// Writes contents over the file (created if missing) in place and cuts it to
// that length; no fsync. Not atomic: readers take the store's lock. The room
// a longer text needs is reserved first, so a full disk fails the write with
// the file as it was (an empty one removed), never torn. Before it closes the
// file (which inotify reports), tells written the file's identity.
void rewrite_file(const std::filesystem::path& path, std::string_view contents,
                  const std::function<void(const FileIdentity&)>& written = {});

// Returns false if there was no such file. No fsync.
bool remove_file(const std::filesystem::path& path);

// fsync; returns false if there is no such file.
bool fsync_file_if_exists(const std::filesystem::path& path);

// Creates the directory if missing and makes its entry durable.
void ensure_directory_durably(const std::filesystem::path& directory);

void fsync_directory(const std::filesystem::path& directory);

}  // namespace dowser::store::detail
