#include "availability_watcher.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <utility>

namespace debug_echo {
namespace {

// Everything that can change what reading the file returns.
constexpr uint32_t kWatchMask = IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM |
                                IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF |
                                IN_ONLYDIR;

std::string errno_text() { return std::strerror(errno); }

}  // namespace

AvailabilityWatcher::AvailabilityWatcher(const std::string& file, dowser::Reporter log,
                                         std::function<void()> on_change)
    : log_(std::move(log)), on_change_(std::move(on_change)) {
  if (!open_watch(file)) {
    close_fds();
    return;
  }
  thread_ = std::thread([this] { run(); });
}

AvailabilityWatcher::~AvailabilityWatcher() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    // An eventfd write of 1 cannot fail short of a counter overflow.
    [[maybe_unused]] ssize_t written = ::write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
  close_fds();
}

bool AvailabilityWatcher::open_watch(const std::string& file) {
  std::filesystem::path path(file);
  directory_ = path.parent_path().string();
  file_name_ = path.filename().string();
  std::string fallback = "; relying on periodic re-reads of " + file;
  inotify_fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  stop_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (inotify_fd_ < 0 || stop_fd_ < 0) {
    log_.warn("debugEcho: cannot set up inotify: " + errno_text() + fallback);
    return false;
  }
  if (::inotify_add_watch(inotify_fd_, directory_.c_str(), kWatchMask) < 0) {
    log_.warn("debugEcho: cannot watch " + directory_ + ": " + errno_text() + fallback);
    return false;
  }
  return true;
}

void AvailabilityWatcher::run() {
  pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      log_.warn("debugEcho: inotify poll failed: " + errno_text());
      return;
    }
    if (fds[1].revents != 0) return;  // stopping
    if (fds[0].revents != 0 && !handle_events()) return;
  }
}

bool AvailabilityWatcher::handle_events() {
  alignas(inotify_event) char buffer[4096];
  bool changed = false;
  bool ended = false;
  for (;;) {
    ssize_t n = ::read(inotify_fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EAGAIN: drained
    for (ssize_t offset = 0; offset < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + offset);
      offset += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      bool about_file = event->len > 0 && file_name_ == event->name;
      // An overflow may have hidden an event about the file.
      changed = changed || about_file || (event->mask & IN_Q_OVERFLOW) != 0;
      ended = ended || (event->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) != 0;
    }
  }
  if (ended) {
    log_.warn("debugEcho: " + directory_ + " was removed or moved; relying on periodic re-reads");
    changed = true;  // the file went with its directory
  }
  if (changed) on_change_();
  return !ended;
}

void AvailabilityWatcher::close_fds() noexcept {
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
  if (stop_fd_ >= 0) ::close(stop_fd_);
  inotify_fd_ = stop_fd_ = -1;
}

}  // namespace debug_echo
