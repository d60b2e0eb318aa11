// SlotReclaimer: a device plugin is never told when the kubelet stops using
// a device, so claims would leak. The reclaimer lists the kubelet's
// podresources periodically and frees claims this node holds that no
// container has held for a grace period. An RPC failure frees nothing.
//
// Held slots are named in the id space the kubelet reports: IL slots as
// ("<domain>/<instance>", "<instance>-<i>") with no domain on the id (Akri
// prefixes it, so its IL slots never match and are never freed), CL slots as
// ("<domain>/<configuration>", "<vdev>").
#pragma once

#include "capacity_manager.hpp"
#include "naming.hpp"

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace dowser::reclaim {

// (resource name, device id) as podresources reports a device in use.
using DeviceRef = std::pair<std::string, std::string>;
using DevicesInUse = std::set<DeviceRef>;

// A claim this node holds, with the name the kubelet knows it by.
struct HeldSlot {
  std::string resource;
  std::string device_id;
  capacity::InstanceKey instance;
  uint32_t slot = 0;
  naming::SlotUsage usage;

  friend bool operator==(const HeldSlot&, const HeldSlot&) = default;
};

// A slot held by this node's IL plugin of `instance`.
HeldSlot instance_level_slot(std::string_view domain, const capacity::InstanceKey& instance,
                             uint32_t slot, const std::string& node);

// A slot held by this node's CL plugin of `configuration` for `vdev`.
HeldSlot configuration_level_slot(std::string_view domain, std::string_view configuration,
                                  const std::string& vdev, const capacity::InstanceKey& instance,
                                  uint32_t slot, const std::string& node);

// The claim `node` holds in one slot of an Instance, named as the kubelet
// reports it; nullopt if the slot is free or another node's, or if its
// Instance or Configuration name makes no valid resource name (then said in
// `unnamed`, if given).
std::optional<HeldSlot> held_slot(std::string_view domain, const std::string& node,
                                  const capacity::InstanceKey& key, const store::Instance& instance,
                                  const capacity::InstanceSlots& slots, uint32_t slot,
                                  std::vector<std::string>* unnamed = nullptr);

// Every claim `node` holds in these Instances (IL and CL alike), but those
// held_slot cannot name (said in `unnamed`, if given).
std::vector<HeldSlot> held_slots(
    std::string_view domain, const std::string& node,
    const std::map<capacity::InstanceKey, store::StoredInstance>& instances,
    std::vector<std::string>* unnamed = nullptr);

// What the kubelet reports in use that no held slot names: a pod using a
// slot the store does not show claimed (an Instance deleted or edited from
// outside, a Configuration gone while its pods run), which another pod may
// then be given. In in_use order.
std::vector<DeviceRef> unclaimed_in_use(const std::vector<HeldSlot>& held,
                                        const DevicesInUse& in_use);

// Decides which held slots have gone unused for the grace period. Pure: the
// caller supplies the time.
class StaleSlotTracker {
 public:
  using Clock = std::chrono::steady_clock;

  explicit StaleSlotTracker(Clock::duration grace = std::chrono::seconds(20)) : grace_(grace) {}

  // The held slots not in use for >= grace, each returned once. Slots in use
  // again or no longer held are forgotten.
  std::vector<HeldSlot> due(const std::vector<HeldSlot>& held, const DevicesInUse& in_use,
                            Clock::time_point now);
  // The slot was just granted again (a held slot re-allocated): its grace
  // starts over, since the kubelet reports the container only some time
  // after the Allocate, and a list taken before that must not free it.
  void granted(const HeldSlot& slot, Clock::time_point now);

  Clock::duration grace() const { return grace_; }

 private:
  // The whole claim, so a device id re-claimed for another slot starts afresh.
  using SlotKey = std::tuple<std::string, std::string, capacity::InstanceKey, uint32_t>;
  static SlotKey key_of(const HeldSlot& slot);

  Clock::duration grace_;
  std::map<SlotKey, Clock::time_point> unused_since_;
};

// A client of the kubelet's v1.PodResourcesLister. Each call dials afresh,
// since the kubelet re-creates its socket when it restarts.
class PodResourcesClient {
 public:
  explicit PodResourcesClient(std::filesystem::path socket) : socket_(std::move(socket)) {}

  // Every (resource, device id) held by any container, or nullopt with
  // *error set when the call fails or times out. A stop request cancels it.
  std::optional<DevicesInUse> list_in_use(std::chrono::milliseconds timeout, std::string* error,
                                          const std::stop_token& stop = {}) const;

  const std::filesystem::path& socket() const { return socket_; }

 private:
  std::filesystem::path socket_;
};

// For /metrics.
struct ReclaimerStats {
  uint64_t reclaimed_total = 0;
  uint64_t lists_total = 0;  // successful List calls
  uint64_t list_failures_total = 0;
  std::string last_error;  // of the latest failed List, kept after recovery
};

// Polls podresources on its own thread, so the core never blocks on the
// kubelet, and decides on the core thread. start(), stop() and destruction
// belong to the core thread (or happen while the core is not running).
class SlotReclaimer {
 public:
  using HeldSlots = std::function<std::vector<HeldSlot>()>;  // called on the core thread
  using Release = std::function<void(const HeldSlot&)>;      // called on the core thread

  SlotReclaimer(boost::asio::io_context& core, std::filesystem::path podresources_socket,
                std::chrono::milliseconds interval, std::chrono::milliseconds grace,
                HeldSlots held_slots, Release release);
  ~SlotReclaimer();
  SlotReclaimer(const SlotReclaimer&) = delete;
  SlotReclaimer& operator=(const SlotReclaimer&) = delete;

  void start();
  // Cancels a List in flight, joins the poller and drops results not yet
  // handled. Idempotent.
  void stop();

  ReclaimerStats stats() const;  // thread-safe
  // Told, after every list, what is in use but unclaimed (unclaimed_in_use;
  // core thread). Set before start().
  using Unclaimed = std::function<void(const std::vector<DeviceRef>&)>;
  void set_unclaimed_listener(Unclaimed listener) { unclaimed_ = std::move(listener); }
  // An Allocate granted this slot now (core thread): see StaleSlotTracker::granted.
  void granted(const HeldSlot& slot);

 private:
  using AliveFlag = std::shared_ptr<std::atomic<bool>>;

  void poll(const std::stop_token& stop, const AliveFlag& alive);
  // listed_at: when the List began. A slot granted after that may not be
  // in it yet, however late its result is handled.
  void post_result(std::optional<DevicesInUse> in_use, std::string error,
                   StaleSlotTracker::Clock::time_point listed_at, const AliveFlag& alive);
  void on_listed(const std::optional<DevicesInUse>& in_use, const std::string& error,
                 StaleSlotTracker::Clock::time_point listed_at);
  void on_list_failed(const std::string& error);
  void on_list_succeeded();
  void reclaim(const HeldSlot& slot);

  boost::asio::io_context& core_;
  PodResourcesClient client_;
  std::chrono::milliseconds interval_;
  HeldSlots held_slots_;
  Release release_;
  Unclaimed unclaimed_;

  // Core-thread state.
  StaleSlotTracker tracker_;
  bool listing_failed_ = false;
  AliveFlag alive_;  // false once stopped: results posted earlier are dropped

  mutable std::mutex stats_mutex_;
  ReclaimerStats stats_;

  std::jthread poller_;
};

}  // namespace dowser::reclaim
