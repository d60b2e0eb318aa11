// One dowserd per kubelet directory: see KubeletDirLock in daemon.hpp.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#include "daemon.hpp"

namespace dowser::daemon {
namespace {

constexpr auto kRetryEvery = std::chrono::milliseconds(100);

// The pid the holder wrote into the lock file, or "unknown".
std::string holder_of(int fd) {
  char text[32] = {};
  const ssize_t count = ::pread(fd, text, sizeof text - 1, 0);
  if (count <= 0) return "unknown";
  std::string pid(text, static_cast<size_t>(count));
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.empty() ? "unknown" : pid;
}

void write_own_pid(int fd) {
  const std::string pid = std::to_string(::getpid()) + "\n";
  // Best effort: the pid only makes the next one's message more helpful.
  if (::ftruncate(fd, 0) == 0) {
    [[maybe_unused]] ssize_t written = ::pwrite(fd, pid.data(), pid.size(), 0);
  }
}

}  // namespace

KubeletDirLock::KubeletDirLock(const std::filesystem::path& dir, std::chrono::milliseconds wait) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    throw std::runtime_error("--kubelet-dir " + dir.string() +
                             ": cannot create it: " + error.message());
  }
  const auto file = dir / "dowserd.lock";
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw std::runtime_error("--kubelet-dir " + dir.string() + ": cannot open " + file.string() +
                             ": " + std::strerror(errno));
  }
  const auto deadline = std::chrono::steady_clock::now() + wait;
  bool told = false;
  while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      const int lock_error = errno;
      ::close(fd_);
      throw std::runtime_error("cannot lock " + file.string() + ": " + std::strerror(lock_error));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      const std::string holder = holder_of(fd_);
      ::close(fd_);
      throw std::runtime_error("another dowserd (pid " + holder +
                               ") serves the kubelet directory " + dir.string() +
                               "; stop it first, or give this one its own " + "--kubelet-dir");
    }
    if (!told) {
      spdlog::warn("another dowserd (pid {}) serves {}; waiting up to {} ms for it to stop",
                   holder_of(fd_), dir.string(), wait.count());
      told = true;
    }
    std::this_thread::sleep_for(kRetryEvery);
  }
  write_own_pid(fd_);
}

KubeletDirLock::~KubeletDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace dowser::daemon
