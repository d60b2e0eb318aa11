#include "slot_reclaimer.hpp"
#include "thread_names.hpp"

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include <condition_variable>
#include <exception>

namespace dowser::reclaim {
namespace {

// Longer than any healthy List on a local socket; a stop cancels it sooner.
constexpr std::chrono::milliseconds kListTimeout{5000};

std::string describe(std::chrono::milliseconds duration) {
  if (duration.count() % 1000 == 0) return std::to_string(duration.count() / 1000) + " s";
  return std::to_string(duration.count()) + " ms";
}

}  // namespace

SlotReclaimer::SlotReclaimer(boost::asio::io_context& core,
                             std::filesystem::path podresources_socket,
                             std::chrono::milliseconds interval, std::chrono::milliseconds grace,
                             HeldSlots held_slots, Release release)
    : core_(core),
      client_(std::move(podresources_socket)),
      interval_(interval),
      held_slots_(std::move(held_slots)),
      release_(std::move(release)),
      tracker_(grace) {}

SlotReclaimer::~SlotReclaimer() { stop(); }

void SlotReclaimer::start() {
  if (poller_.joinable()) return;
  alive_ = std::make_shared<std::atomic<bool>>(true);
  poller_ = std::jthread([this, alive = alive_](const std::stop_token& stop) {
    name_this_thread("reclaimer");
    poll(stop, alive);
  });
}

void SlotReclaimer::stop() {
  if (alive_) *alive_ = false;
  alive_.reset();
  if (!poller_.joinable()) return;
  poller_.request_stop();
  poller_.join();
}

ReclaimerStats SlotReclaimer::stats() const {
  std::lock_guard lock(stats_mutex_);
  return stats_;
}

void SlotReclaimer::granted(const HeldSlot& slot) {
  tracker_.granted(slot, StaleSlotTracker::Clock::now());
}

// The poller thread: only the client and interval_ (both immutable) are used
// here; everything else happens on the core.
void SlotReclaimer::poll(const std::stop_token& stop, const AliveFlag& alive) {
  std::mutex mutex;
  std::condition_variable_any stopped;
  while (!stop.stop_requested()) {
    std::string error;
    const auto listed_at = StaleSlotTracker::Clock::now();
    std::optional<DevicesInUse> in_use = client_.list_in_use(kListTimeout, &error, stop);
    if (stop.stop_requested()) return;
    post_result(std::move(in_use), std::move(error), listed_at, alive);
    std::unique_lock lock(mutex);
    stopped.wait_for(lock, stop, interval_, [] { return false; });
  }
}

void SlotReclaimer::post_result(std::optional<DevicesInUse> in_use, std::string error,
                                StaleSlotTracker::Clock::time_point listed_at,
                                const AliveFlag& alive) {
  boost::asio::post(core_,
                    [this, alive, listed_at, in_use = std::move(in_use), error = std::move(error)] {
                      if (*alive) on_listed(in_use, error, listed_at);
                    });
}

void SlotReclaimer::on_listed(const std::optional<DevicesInUse>& in_use, const std::string& error,
                              StaleSlotTracker::Clock::time_point listed_at) {
  if (!in_use) {
    on_list_failed(error);
    return;  // what the kubelet holds is unknown: free nothing, keep the timers
  }
  on_list_succeeded();
  const std::vector<HeldSlot> held = held_slots_();
  // Judged as of when the List began, not when the core got to its result
  // (a core busy with store writes): a slot granted meanwhile is not judged.
  for (const HeldSlot& slot : tracker_.due(held, *in_use, listed_at)) reclaim(slot);
  if (unclaimed_) unclaimed_(unclaimed_in_use(held, *in_use));
}

void SlotReclaimer::on_list_failed(const std::string& error) {
  {
    std::lock_guard lock(stats_mutex_);
    ++stats_.list_failures_total;
    stats_.last_error = error;
  }
  if (listing_failed_) return;  // logged when it started failing
  listing_failed_ = true;
  spdlog::warn("slot reclaimer: cannot list pod resources: {}; no slot is freed until it works",
               error);
}

void SlotReclaimer::on_list_succeeded() {
  {
    std::lock_guard lock(stats_mutex_);
    ++stats_.lists_total;
  }
  if (!listing_failed_) return;
  listing_failed_ = false;
  spdlog::info("slot reclaimer: listing pod resources on {} works again",
               client_.socket().string());
}

void SlotReclaimer::reclaim(const HeldSlot& slot) {
  const auto grace = std::chrono::duration_cast<std::chrono::milliseconds>(tracker_.grace());
  spdlog::info(
      "slot reclaimer: freeing device {} of resource {} (Instance {}/{}, slot {}): "
      "no container has held it for {}",
      slot.device_id, slot.resource, slot.instance.first, slot.instance.second, slot.slot,
      describe(grace));
  try {
    release_(slot);
  } catch (const std::exception& e) {
    // Forgotten by the tracker, so it is retried after another grace period.
    spdlog::warn("slot reclaimer: freeing device {} of resource {} failed: {}", slot.device_id,
                 slot.resource, e.what());
    return;
  }
  std::lock_guard lock(stats_mutex_);
  ++stats_.reclaimed_total;
}

}  // namespace dowser::reclaim
