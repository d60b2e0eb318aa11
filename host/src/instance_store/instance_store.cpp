#include "instance_store.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <stdexcept>
#include <thread>

namespace dowser::store {
namespace {

// Random jitter, doubling per lost race, so contenders stop colliding in step.
class Backoff {
 public:
  void wait(int lost_races) {
    constexpr int kUnitMicroseconds = 100;
    constexpr int kMaxMicroseconds = 10'000;
    const int limit = std::min(kUnitMicroseconds << std::min(lost_races, 10), kMaxMicroseconds);
    std::uniform_int_distribution<int> pick(0, limit);
    std::this_thread::sleep_for(std::chrono::microseconds(pick(engine())));
  }

 private:
  // Seeded per call, not per thread, so forked processes do not share a sequence.
  std::minstd_rand& engine() {
    if (!engine_) engine_.emplace(std::random_device{}());
    return *engine_;
  }
  std::optional<std::minstd_rand> engine_;
};

void require_same_identity(const Instance& desired, const std::string& namespace_name,
                           const std::string& name) {
  if (desired.namespace_name != namespace_name || desired.name != name) {
    throw std::invalid_argument("update_with_retry: decide must keep the Instance's identity " +
                                namespace_name + "/" + name + ", not " + desired.namespace_name +
                                "/" + desired.name);
  }
}

bool lost_race(const StoreError& error) {
  // not_found: deleted since it was read; the next read settles it.
  return error.kind() == StoreError::Kind::conflict || error.kind() == StoreError::Kind::not_found;
}

// Writes desired over `revision`; nullopt if another writer got there first.
std::optional<StoredInstance> write_unless_raced(InstanceStore& store, Instance desired,
                                                 uint64_t revision) {
  try {
    const uint64_t written = store.update(desired, revision);
    return StoredInstance{std::move(desired), written};
  } catch (const StoreError& error) {
    if (!lost_race(error)) throw;
    return std::nullopt;
  }
}

}  // namespace

std::optional<StoredInstance> update_with_retry(
    InstanceStore& store, const std::string& namespace_name, const std::string& name,
    const std::function<std::optional<Instance>(const Instance& current)>& decide, int max_attempts,
    const StoredInstance* cached) {
  if (max_attempts < 1) throw std::invalid_argument("update_with_retry: max_attempts must be >= 1");
  // The cache may only start a write: "nothing to do" needs the store's word.
  if (cached) {
    std::optional<Instance> desired = decide(cached->instance);
    if (desired && *desired != cached->instance) {
      require_same_identity(*desired, namespace_name, name);
      if (auto written = write_unless_raced(store, std::move(*desired), cached->revision))
        return written;
    }
  }
  Backoff backoff;
  for (int attempt = 0; attempt < max_attempts; ++attempt) {
    if (attempt > 0) backoff.wait(attempt);
    std::optional<StoredInstance> current = store.get(namespace_name, name);
    if (!current) return std::nullopt;
    std::optional<Instance> desired = decide(current->instance);
    if (!desired || *desired == current->instance) return current;
    require_same_identity(*desired, namespace_name, name);
    if (auto written = write_unless_raced(store, std::move(*desired), current->revision))
      return written;
  }
  throw StoreError(StoreError::Kind::conflict, "Instance " + namespace_name + "/" + name +
                                                   ": gave up after " +
                                                   std::to_string(max_attempts) + " lost races");
}

DeferredSync::~DeferredSync() {
  try {
    if (sync_on_ == SyncOn::store_thread)
      store_.sync_in_background();  // a store without a thread of its own syncs here
    else
      store_.sync();
  } catch (const StoreError& error) {
    // Not durable yet: the store's next durable write tries again.
    spdlog::error("instance store: new Instances could not be made durable yet: {}", error.what());
  }
}

}  // namespace dowser::store
