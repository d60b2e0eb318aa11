#include "slot_reclaimer.hpp"

#include <set>
#include <string_view>

namespace dowser::reclaim {

HeldSlot instance_level_slot(std::string_view domain, const capacity::InstanceKey& instance,
                             uint32_t slot, const std::string& node) {
  // The IL plugin's device ids are bare slot names: the kubelet reports them
  // without the domain, so neither may carry it here.
  return {naming::resource_name(domain, instance.second), naming::slot_name(instance.second, slot),
          instance, slot, naming::SlotUsage::instance_level(node)};
}

HeldSlot configuration_level_slot(std::string_view domain, std::string_view configuration,
                                  const std::string& vdev, const capacity::InstanceKey& instance,
                                  uint32_t slot, const std::string& node) {
  return {naming::resource_name(domain, configuration), vdev, instance, slot,
          naming::SlotUsage::configuration_level(vdev, node)};
}

std::optional<HeldSlot> held_slot(std::string_view domain, const std::string& node,
                                  const capacity::InstanceKey& key, const store::Instance& instance,
                                  const capacity::InstanceSlots& slots, uint32_t slot,
                                  std::vector<std::string>* unnamed) {
  const auto& usage = slots.slots[slot];
  if (usage.is_free() || usage.node != node) return std::nullopt;
  try {
    if (usage.kind == naming::SlotUsage::Kind::instance)
      return instance_level_slot(domain, key, slot, node);
    return configuration_level_slot(domain, instance.configuration_name, usage.vdev, key, slot,
                                    node);
  } catch (const std::invalid_argument& e) {
    // Written by hand or by another program: no plugin of ours serves such a
    // name, so the kubelet cannot report it in use.
    if (unnamed) {
      unnamed->push_back("Instance " + key.first + "/" + key.second + " slot " +
                         std::to_string(slot) + ": " + e.what());
    }
    return std::nullopt;
  }
}

std::vector<HeldSlot> held_slots(
    std::string_view domain, const std::string& node,
    const std::map<capacity::InstanceKey, store::StoredInstance>& instances,
    std::vector<std::string>* unnamed) {
  std::vector<HeldSlot> held;
  for (const auto& [key, stored] : instances) {
    auto slots = capacity::InstanceSlots::decode(stored.instance);
    for (uint32_t i = 0; i < slots.capacity; ++i) {
      if (auto slot = held_slot(domain, node, key, stored.instance, slots, i, unnamed))
        held.push_back(std::move(*slot));
    }
  }
  return held;
}

std::vector<DeviceRef> unclaimed_in_use(const std::vector<HeldSlot>& held,
                                        const DevicesInUse& in_use) {
  DevicesInUse named;
  for (const HeldSlot& slot : held) named.emplace(slot.resource, slot.device_id);
  std::vector<DeviceRef> unclaimed;
  for (const DeviceRef& device : in_use)
    if (named.count(device) == 0) unclaimed.push_back(device);
  return unclaimed;
}

namespace {

// A resource name without its domain ("akri.sh/cams" is "cams"). A pod
// admitted before --resource-domain changed is reported under the old one,
// and its slot is in use all the same. Another plugin's resource of the same
// name and device id can only keep a claim, never free one.
std::string_view without_domain(std::string_view resource) {
  const size_t slash = resource.find('/');
  return slash == std::string_view::npos ? resource : resource.substr(slash + 1);
}

}  // namespace

StaleSlotTracker::SlotKey StaleSlotTracker::key_of(const HeldSlot& slot) {
  return {slot.resource, slot.device_id, slot.instance, slot.slot};
}

std::vector<HeldSlot> StaleSlotTracker::due(const std::vector<HeldSlot>& held,
                                            const DevicesInUse& in_use, Clock::time_point now) {
  std::set<std::pair<std::string_view, std::string_view>> used;  // views into in_use
  for (const auto& [resource, device_id] : in_use)
    used.emplace(without_domain(resource), device_id);
  std::map<SlotKey, Clock::time_point> still_unused;
  std::vector<HeldSlot> stale;
  for (const HeldSlot& slot : held) {
    if (used.count({without_domain(slot.resource), slot.device_id}) > 0) continue;
    SlotKey key = key_of(slot);
    auto known = unused_since_.find(key);
    Clock::time_point since = known == unused_since_.end() ? now : known->second;
    if (now - since >= grace_) {
      stale.push_back(slot);
    } else {
      still_unused.emplace(std::move(key), since);
    }
  }
  // Rebuilt from this pass alone: slots in use again, no longer held or
  // returned now are forgotten.
  unused_since_ = std::move(still_unused);
  return stale;
}

void StaleSlotTracker::granted(const HeldSlot& slot, Clock::time_point now) {
  unused_since_[key_of(slot)] = now;
}

}  // namespace dowser::reclaim
