#include "state_files.hpp"

#include "unique_fd.hpp"

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <system_error>

namespace dowser::state_files {
namespace {

mode_t mode_for(Access access) { return access == Access::owner_only ? 0600 : 0644; }

std::string failure(std::string_view action, const std::filesystem::path& path) {
  return std::string(action) + " " + path.string() + ": " + std::strerror(errno);
}

// A file system that keeps no modes (some FUSE, CIFS, 9p mounts) refuses:
// no reason to stop.
void restrict_to_owner(int fd, const std::filesystem::path& path) {
  struct stat info {};
  if (::fstat(fd, &info) != 0 || (info.st_mode & 077) == 0) return;
  if (::fchmod(fd, 0600) != 0)
    spdlog::debug("cannot make {} owner-only: {}", path.string(), std::strerror(errno));
}

std::optional<std::string> write_all(int fd, std::string_view text,
                                     const std::filesystem::path& path) {
  while (!text.empty()) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) return failure("write", path);
    text.remove_prefix(static_cast<size_t>(written));
  }
  return std::nullopt;
}

// Writes text as the whole file and makes it durable.
std::optional<std::string> write_durably(const std::filesystem::path& path, std::string_view text,
                                         Access access) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode_for(access)));
  if (fd.get() < 0) return failure("open", path);
  // A temporary file left by a crash keeps its mode through O_TRUNC.
  if (access == Access::owner_only) restrict_to_owner(fd.get(), path);
  if (auto failed = write_all(fd.get(), text, path)) return failed;
  // A file system that cannot fsync (EINVAL: some FUSE and 9p mounts) keeps
  // what it can; only a failed write-back is a failure.
  if (::fsync(fd.get()) != 0 && errno != EINVAL && errno != ENOTSUP) return failure("fsync", path);
  if (fd.close() != 0) return failure("close", path);
  return std::nullopt;
}

// The new file is in place either way, so a failure is only logged (at
// debug level: a file system that cannot sync directories says so at every
// save).
void sync_directory(const std::filesystem::path& directory) {
  const UniqueFd fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0)
    spdlog::debug("cannot fsync {}: {}", directory.string(), std::strerror(errno));
}

}  // namespace

std::optional<std::string> read_whole(const std::filesystem::path& path, Access access) {
  const UniqueFd fd(
      ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));  // a FIFO must not hang
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw ReadError(failure("cannot read", path));
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw ReadError(failure("cannot read", path));
  if (!S_ISREG(info.st_mode)) {  // a device such as /dev/zero would be read without end
    throw ReadError("cannot read " + path.string() + ": " +
                    (S_ISDIR(info.st_mode) ? std::strerror(EISDIR) : "not a regular file"));
  }
  if (access == Access::owner_only) restrict_to_owner(fd.get(), path);
  std::string text;
  std::array<char, 4096> buffer{};
  for (;;) {
    const ssize_t got = ::read(fd.get(), buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw ReadError(failure("cannot read", path));
    if (got == 0) return text;
    text.append(buffer.data(), static_cast<size_t>(got));
  }
}

std::optional<std::string> replace_durably(const std::filesystem::path& path, std::string_view text,
                                           Access access) {
  const std::filesystem::path directory = path.has_parent_path() ? path.parent_path() : ".";
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) return "create directory " + directory.string() + ": " + error.message();
  const std::filesystem::path temporary = path.string() + ".tmp";
  if (auto failed = write_durably(temporary, text, access)) {
    std::filesystem::remove(temporary, error);  // nothing left behind on a full disk
    return failed;
  }
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::string failed =
        "rename " + temporary.string() + " to " + path.string() + ": " + error.message();
    std::filesystem::remove(temporary, error);
    return failed;
  }
  sync_directory(directory);
  return std::nullopt;
}

}  // namespace dowser::state_files
