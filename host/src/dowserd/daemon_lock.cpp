// One dowserd per kubelet directory, and per node in a state directory: see
// DaemonLock in daemon.hpp.
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
#include <utility>

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

// Creates the guarded directory if missing and opens (or creates) the lock
// file in it.
int open_lock_file(const DaemonLock::Guarded& guarded) {
  const std::string where = guarded.dir_option + " " + guarded.dir.string();
  std::error_code error;
  std::filesystem::create_directories(guarded.dir, error);
  if (error) throw std::runtime_error(where + ": cannot create it: " + error.message());
  const auto file = guarded.dir / guarded.file_name;
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw std::runtime_error(where + ": cannot open " + file.string() + ": " +
                             std::strerror(errno));
  }
  return fd;
}

}  // namespace

DaemonLock::Guarded DaemonLock::kubelet_dir(const std::filesystem::path& kubelet_dir) {
  return {.dir = kubelet_dir,
          .dir_option = "--kubelet-dir",
          .file_name = "dowserd.lock",
          .what = "the kubelet directory " + kubelet_dir.string(),
          .remedy = "stop it first, or give this one its own --kubelet-dir"};
}

DaemonLock::Guarded DaemonLock::node(const std::filesystem::path& state_dir,
                                     const std::string& node_name) {
  return {.dir = state_dir,
          .dir_option = "--state-dir",
          .file_name = "node-" + node_name + ".lock",
          .what = "node " + node_name + " with the state directory " + state_dir.string(),
          .remedy =
              "stop it first (a second one for the same node would free its claims), or "
              "give this one its own --state-dir (--store=file) or another --node-name"};
}

DaemonLock::DaemonLock(const Guarded& guarded, std::chrono::milliseconds wait)
    : guarded_(guarded), fd_(open_lock_file(guarded)) {
  lock(wait);  // on a throw, fd_ closes with the half-made object
  write_own_pid(fd_.get());
}

void DaemonLock::retake() {
  fd_.reset(open_lock_file(guarded_));  // the old one locked a file nobody can find any more
  lock(std::chrono::milliseconds(0));
  write_own_pid(fd_.get());
}

void DaemonLock::lock(std::chrono::milliseconds wait) const {
  const Guarded& guarded = guarded_;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  bool told = false;
  while (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      throw std::runtime_error("cannot lock " + (guarded.dir / guarded.file_name).string() + ": " +
                               std::strerror(errno));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("another dowserd (pid " + holder_of(fd_.get()) + ") serves " +
                               guarded.what + "; " + guarded.remedy);
    }
    if (!told) {
      spdlog::warn("another dowserd (pid {}) serves {}; waiting up to {} ms for it to stop",
                   holder_of(fd_.get()), guarded.what, wait.count());
      told = true;
    }
    std::this_thread::sleep_for(kRetryEvery);
  }
}

}  // namespace dowser::daemon
