// Delivers watch events from one delivery thread to many subscribers, with
// the guarantees WatchSubscription promises: removing a subscriber waits for
// its in-flight callback and no call follows; a callback may remove any
// subscriber, itself included, without deadlock. Store-agnostic.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "instance_store.hpp"

namespace dowser::store::detail {

class WatchFanout {
 public:
  using Callback = std::function<void(const WatchEvent&)>;

  uint64_t add(Callback callback);
  void remove(uint64_t id);
  bool empty() const;
  // True inside a callback, on the delivery thread.
  bool delivering_on_this_thread() const;
  // From the delivery thread only. A callback that throws is logged.
  void deliver(const WatchEvent& event);

 private:
  struct Subscriber {
    explicit Subscriber(Callback callback) : callback(std::move(callback)) {}
    Callback callback;
    std::atomic<bool> active{true};
  };

  mutable std::mutex subscribers_mutex_;
  std::map<uint64_t, std::shared_ptr<Subscriber>> subscribers_;
  uint64_t next_id_ = 1;
  std::mutex delivery_mutex_;  // held while callbacks run
  std::atomic<std::thread::id> delivering_thread_{};
};

}  // namespace dowser::store::detail
