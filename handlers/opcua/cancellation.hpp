// Stops every blocking wait of a discovery session at once: network waits
// poll the eventfd, interval waits use the condition variable.
#ifndef DOWSER_HANDLERS_OPCUA_CANCELLATION_HPP
#define DOWSER_HANDLERS_OPCUA_CANCELLATION_HPP

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>

namespace opcua {

// Thrown out of a wait that was cancelled.
class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("cancelled") {}
};

class Cancellation {
 public:
  Cancellation();  // throws std::system_error when no eventfd is left
  ~Cancellation();
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  void cancel() noexcept;
  bool cancelled() const noexcept;
  // Readable once cancelled: add it to a poll() set.
  int fd() const noexcept { return fd_; }
  // Waits for `duration`; returns false at once when cancelled.
  bool sleep_for(std::chrono::steady_clock::duration duration) const;

 private:
  int fd_ = -1;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  bool cancelled_ = false;
};

}  // namespace opcua

#endif  // DOWSER_HANDLERS_OPCUA_CANCELLATION_HPP
