#include "cancellation.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace opcua {

Cancellation::Cancellation() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
}

Cancellation::~Cancellation() { ::close(fd_); }

void Cancellation::cancel() noexcept {
  {
    std::lock_guard lock(mutex_);
    if (cancelled_) return;
    cancelled_ = true;
  }
  uint64_t one = 1;
  // The counter only grows from 0 to 1, so this write cannot block or fail.
  [[maybe_unused]] auto written = ::write(fd_, &one, sizeof one);
  changed_.notify_all();
}

bool Cancellation::cancelled() const noexcept {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

bool Cancellation::sleep_for(std::chrono::steady_clock::duration duration) const {
  std::unique_lock lock(mutex_);
  return !changed_.wait_for(lock, duration, [this] { return cancelled_; });
}

}  // namespace opcua
