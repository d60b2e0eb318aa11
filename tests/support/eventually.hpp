// Waits for a condition on state that offers no notification to wait on (a
// store directory, an HTTP endpoint), re-checking it until the deadline.
// Where a notification exists (the kubelet simulator's wait_for, a
// FakeHost's wait_for_snapshot), wait on that instead.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace dowser::test {

inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a poll interval, not a wait
  }
  return true;
}

}  // namespace dowser::test
