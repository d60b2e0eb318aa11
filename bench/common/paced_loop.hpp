// PacedLoop: the fixed load a benchmark puts on what it measures while it
// times something else. The pace does not follow the system under test, so
// every binary compared gets the same load.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace dowser::bench {

// Calls tick once every period, on a thread of its own, until destroyed
// (which waits for a tick under way).
class PacedLoop {
 public:
  PacedLoop(std::chrono::microseconds period, std::function<void()> tick)
      : period_(period), tick_(std::move(tick)) {
    thread_ = std::thread([this] { run(); });
  }
  ~PacedLoop() {
    {
      const std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    stop_.notify_all();
    thread_.join();
  }
  PacedLoop(const PacedLoop&) = delete;
  PacedLoop& operator=(const PacedLoop&) = delete;

  size_t ticks() const { return ticks_; }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    while (!stop_.wait_for(lock, period_, [this] { return stopping_; })) {
      tick_();
      ++ticks_;
    }
  }

  const std::chrono::microseconds period_;
  const std::function<void()> tick_;
  std::atomic<size_t> ticks_{0};
  std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dowser::bench
