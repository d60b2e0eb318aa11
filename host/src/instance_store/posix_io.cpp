#include "posix_io.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <system_error>

#include "instance_store.hpp"

namespace dowser::store::detail {
namespace {

constexpr mode_t kFileMode = 0644;
constexpr mode_t kDirectoryMode = 0755;

}  // namespace

void throw_io_error(const std::string& action, const std::filesystem::path& path, int error) {
  throw StoreError(StoreError::Kind::io,
                   action + " " + path.string() + ": " + std::system_category().message(error));
}

UniqueFd open_or_throw(const std::filesystem::path& path, int flags, unsigned mode) {
  UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC, static_cast<mode_t>(mode)));
  if (!fd) throw_io_error("open", path, errno);
  return fd;
}

namespace {

[[noreturn]] void throw_not_regular(const std::filesystem::path& path) {
  throw StoreError(StoreError::Kind::io, path.string() + ": not a regular file");
}

// A FIFO under a store file's name must not hang the store: opening one
// blocks until the other end comes, so files are opened O_NONBLOCK (which
// regular files ignore), and what a FIFO then does (EAGAIN, ESPIPE, an
// empty read) is told as what it is. No fstat on the way of a claim.
void require_regular(int fd, const std::filesystem::path& path) {
  struct stat status {};
  if (::fstat(fd, &status) != 0) throw_io_error("stat", path, errno);
  if (!S_ISREG(status.st_mode)) throw_not_regular(path);
}

}  // namespace

void write_all_at(int fd, std::string_view data, uint64_t offset,
                  const std::filesystem::path& path) {
  while (!data.empty()) {
    const ssize_t count = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (count < 0) {
      if (errno == EINTR) continue;
      if (errno == ESPIPE) throw_not_regular(path);
      throw_io_error("write", path, errno);
    }
    data.remove_prefix(static_cast<size_t>(count));
    offset += static_cast<uint64_t>(count);
  }
}

std::string read_all(int fd, const std::filesystem::path& path) {
  std::string contents;
  std::array<char, std::size_t{16} * 1024> buffer{};
  while (true) {
    const ssize_t count = ::read(fd, buffer.data(), buffer.size());
    if (count < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) throw_not_regular(path);
      throw_io_error("read", path, errno);
    }
    if (count == 0) return contents;
    // Past one buffer (no claim's file gets there), a device such as
    // /dev/zero behind a link, or a stream, would be read until memory
    // runs out: checked once.
    const bool past_one_buffer = contents.size() + static_cast<size_t>(count) > buffer.size();
    if (past_one_buffer && contents.size() <= buffer.size()) require_regular(fd, path);
    contents.append(buffer.data(), static_cast<size_t>(count));
  }
}

std::optional<std::string> read_file_if_exists(const std::filesystem::path& path) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    throw_io_error("open", path, errno);
  }
  std::string contents = read_all(fd.get(), path);
  if (contents.empty()) require_regular(fd.get(), path);  // a FIFO without a writer reads as empty
  return contents;
}

FileLock::FileLock(const std::filesystem::path& path, Mode mode)
    : fd_(open_or_throw(path, O_RDWR | O_CREAT, kFileMode)) {
  const int operation = mode == Mode::shared ? LOCK_SH : LOCK_EX;
  while (::flock(fd_.get(), operation) != 0) {
    if (errno != EINTR) throw_io_error("lock", path, errno);
  }
}

namespace {

FileIdentity identity_from(const struct stat& status) {
  auto nanoseconds = [](const timespec& time) {
    return static_cast<int64_t>(time.tv_sec) * 1'000'000'000 + time.tv_nsec;
  };
  return {static_cast<uint64_t>(status.st_dev), static_cast<uint64_t>(status.st_ino),
          static_cast<uint64_t>(status.st_size), nanoseconds(status.st_mtim),
          nanoseconds(status.st_ctim)};
}

}  // namespace

std::optional<FileIdentity> identity_of(const std::filesystem::path& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) return std::nullopt;
  return identity_from(status);
}

namespace {

// Before the first byte goes over the old ones, reserves the room the new
// contents need beyond the file's end, so that a full disk (ENOSPC, EDQUOT)
// fails the write with the file as it was rather than torn. An empty file
// (created by this write, or one a crash left) is removed then: readers find
// no file, not an empty one. Where the file system cannot reserve room, the
// write goes on without. A FIFO is left to the write (ESPIPE) to tell.
void reserve_room(int fd, uint64_t size, const std::filesystem::path& path) {
  const off_t end = ::lseek(fd, 0, SEEK_END);  // the size, without a stat (see store_journal.hpp)
  if (end < 0 || static_cast<uint64_t>(end) >= size) return;
  if (::fallocate(fd, FALLOC_FL_KEEP_SIZE, end, static_cast<off_t>(size) - end) == 0) return;
  const int error = errno;
  if (error == EOPNOTSUPP || error == ENOSYS) return;
  if (end == 0) ::unlink(path.c_str());
  throw_io_error("reserve room for", path, error);
}

}  // namespace

void rewrite_file(const std::filesystem::path& path, std::string_view contents,
                  const std::function<void(const FileIdentity&)>& written) {
  // ENXIO: a FIFO nobody reads (a journal replay at start must fail, not hang).
  const UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK, kFileMode));
  if (!fd && errno == ENXIO) throw_not_regular(path);
  if (!fd) throw_io_error("open", path, errno);
  reserve_room(fd.get(), contents.size(), path);
  write_all_at(fd.get(), contents, 0, path);  // ESPIPE: a FIFO someone reads
  if (::ftruncate(fd.get(), static_cast<off_t>(contents.size())) != 0) {
    throw_io_error("truncate", path, errno);
  }
  if (!written) return;
  struct stat status {};
  if (::fstat(fd.get(), &status) != 0) throw_io_error("stat", path, errno);
  written(identity_from(status));
}

bool remove_file(const std::filesystem::path& path) {
  if (::unlink(path.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  throw_io_error("remove", path, errno);
}

bool fsync_file_if_exists(const std::filesystem::path& path) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));  // as above
  if (!fd) {
    if (errno == ENOENT) return false;
    throw_io_error("open", path, errno);
  }
  if (::fsync(fd.get()) != 0) throw_io_error("fsync", path, errno);
  return true;
}

void ensure_directory_durably(const std::filesystem::path& directory) {
  if (::mkdir(directory.c_str(), kDirectoryMode) == 0) {
    fsync_directory(directory.parent_path());
  } else if (errno != EEXIST) {
    throw_io_error("create directory", directory, errno);
  }
}

void fsync_directory(const std::filesystem::path& directory) {
  const UniqueFd fd = open_or_throw(directory, O_RDONLY | O_DIRECTORY);
  if (::fsync(fd.get()) != 0) throw_io_error("fsync", directory, errno);
}

}  // namespace dowser::store::detail
