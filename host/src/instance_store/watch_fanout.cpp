#include "watch_fanout.hpp"

#include <spdlog/spdlog.h>

#include <vector>

namespace dowser::store::detail {

uint64_t WatchFanout::add(Callback callback) {
  const std::lock_guard lock(subscribers_mutex_);
  const uint64_t id = next_id_++;
  subscribers_.emplace(id, std::make_shared<Subscriber>(std::move(callback)));
  return id;
}

void WatchFanout::remove(uint64_t id) {
  std::shared_ptr<Subscriber> removed;
  {
    const std::lock_guard lock(subscribers_mutex_);
    const auto found = subscribers_.find(id);
    if (found == subscribers_.end()) return;
    removed = std::move(found->second);
    subscribers_.erase(found);
  }
  removed->active = false;  // deliveries check this before every call
  // Inside a callback the delivery lock is ours already: the only call in
  // flight is the one we are in.
  if (!delivering_on_this_thread()) {
    const std::lock_guard wait_for_delivery(delivery_mutex_);
  }
}

bool WatchFanout::empty() const {
  const std::lock_guard lock(subscribers_mutex_);
  return subscribers_.empty();
}

bool WatchFanout::delivering_on_this_thread() const {
  return delivering_thread_.load() == std::this_thread::get_id();
}

void WatchFanout::deliver(const WatchEvent& event) {
  const std::lock_guard delivery(delivery_mutex_);
  delivering_thread_ = std::this_thread::get_id();
  std::vector<std::shared_ptr<Subscriber>> recipients;
  {
    const std::lock_guard lock(subscribers_mutex_);
    for (const auto& [id, subscriber] : subscribers_) recipients.push_back(subscriber);
  }
  for (const auto& subscriber : recipients) {
    if (!subscriber->active) continue;
    try {
      subscriber->callback(event);
    } catch (const std::exception& error) {
      spdlog::error("instance store: a watch callback threw: {}", error.what());
    } catch (...) {
      spdlog::error("instance store: a watch callback threw a non-standard exception");
    }
  }
  delivering_thread_ = std::thread::id();
}

}  // namespace dowser::store::detail
