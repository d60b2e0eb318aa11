// The few POSIX file operations the file store needs, with errors turned into
// StoreError(io) that name the file.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace dowser::store::detail {

// Owns a file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Throws StoreError(io): "<action> <path>: <reason for error>".
[[noreturn]] void throw_io_error(const std::string& action, const std::filesystem::path& path,
                                 int error);

UniqueFd open_or_throw(const std::filesystem::path& path, int flags, unsigned mode = 0);

std::string read_all(int fd, const std::filesystem::path& path);

// nullopt if the file does not exist.
std::optional<std::string> read_file_if_exists(const std::filesystem::path& path);

// Holds flock(LOCK_EX) on a file (created if missing) for its lifetime. Each
// holder opens the file itself, so threads of one process exclude each other too.
class ExclusiveFileLock {
 public:
  explicit ExclusiveFileLock(const std::filesystem::path& path);

 private:
  UniqueFd fd_;
};

// Replaces target with contents so that a reader or a crash sees the old or
// the new file, never a mix: a temporary file in the same directory (named
// ".tmp.*"), fsync, rename, fsync the directory.
void replace_file_durably(const std::filesystem::path& target, std::string_view contents);

// Returns false if there was no such file.
bool remove_file_durably(const std::filesystem::path& path);

// Creates the directory if missing and makes its entry durable.
void ensure_directory_durably(const std::filesystem::path& directory);

void fsync_directory(const std::filesystem::path& directory);

}  // namespace dowser::store::detail
