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

void write_all(int fd, std::string_view data, const std::filesystem::path& path) {
  while (!data.empty()) {
    const ssize_t written = ::write(fd, data.data(), data.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      throw_io_error("write", path, errno);
    }
    data.remove_prefix(static_cast<size_t>(written));
  }
}

// Unlinks a temporary file unless it was renamed into place.
class TemporaryFile {
 public:
  explicit TemporaryFile(std::string path) : path_(std::move(path)) {}
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (!renamed_) ::unlink(path_.c_str());
  }
  void rename_to(const std::filesystem::path& target) {
    if (::rename(path_.c_str(), target.c_str()) != 0) throw_io_error("rename onto", target, errno);
    renamed_ = true;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool renamed_ = false;
};

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

void throw_io_error(const std::string& action, const std::filesystem::path& path, int error) {
  throw StoreError(StoreError::Kind::io,
                   action + " " + path.string() + ": " + std::system_category().message(error));
}

UniqueFd open_or_throw(const std::filesystem::path& path, int flags, unsigned mode) {
  UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC, static_cast<mode_t>(mode)));
  if (!fd) throw_io_error("open", path, errno);
  return fd;
}

std::string read_all(int fd, const std::filesystem::path& path) {
  std::string contents;
  std::array<char, std::size_t{16} * 1024> buffer{};
  while (true) {
    const ssize_t count = ::read(fd, buffer.data(), buffer.size());
    if (count < 0) {
      if (errno == EINTR) continue;
      throw_io_error("read", path, errno);
    }
    if (count == 0) return contents;
    contents.append(buffer.data(), static_cast<size_t>(count));
  }
}

std::optional<std::string> read_file_if_exists(const std::filesystem::path& path) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    throw_io_error("open", path, errno);
  }
  return read_all(fd.get(), path);
}

ExclusiveFileLock::ExclusiveFileLock(const std::filesystem::path& path)
    : fd_(open_or_throw(path, O_RDWR | O_CREAT, kFileMode)) {
  while (::flock(fd_.get(), LOCK_EX) != 0) {
    if (errno != EINTR) throw_io_error("lock", path, errno);
  }
}

void replace_file_durably(const std::filesystem::path& target, std::string_view contents) {
  const std::filesystem::path directory = target.parent_path();
  std::string temporary_path = (directory / ".tmp.XXXXXX").string();
  const UniqueFd fd(::mkostemp(temporary_path.data(), O_CLOEXEC));
  if (!fd) throw_io_error("create a temporary file in", directory, errno);
  TemporaryFile temporary(std::move(temporary_path));
  if (::fchmod(fd.get(), kFileMode) != 0) throw_io_error("chmod", temporary.path(), errno);
  write_all(fd.get(), contents, temporary.path());
  if (::fsync(fd.get()) != 0) throw_io_error("fsync", temporary.path(), errno);
  temporary.rename_to(target);
  fsync_directory(directory);
}

bool remove_file_durably(const std::filesystem::path& path) {
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return false;
    throw_io_error("remove", path, errno);
  }
  fsync_directory(path.parent_path());
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
