// What a watch, a reflector or a source reported from its own thread, one
// line per report, with waits on it (a deadline, no sleeping).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace dowser::test {

class Recorder {
 public:
  static constexpr std::chrono::seconds kDeadline{20};

  void add(const std::string& entry) {
    {
      const std::lock_guard lock(mutex_);
      entries_.push_back(entry);
    }
    changed_.notify_all();
  }
  bool wait_for(const std::function<bool(const std::vector<std::string>&)>& holds,
                std::chrono::milliseconds timeout = kDeadline) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return holds(entries_); });
  }
  bool wait_for_entry(const std::string& entry, std::chrono::milliseconds timeout = kDeadline) {
    return wait_for(
        [&](const auto& entries) {
          return std::find(entries.begin(), entries.end(), entry) != entries.end();
        },
        timeout);
  }
  std::vector<std::string> entries() const {
    const std::lock_guard lock(mutex_);
    return entries_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> entries_;
};

}  // namespace dowser::test
