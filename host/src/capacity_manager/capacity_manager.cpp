#include "capacity_manager.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>

namespace dowser::capacity {

using naming::SlotUsage;

// ---- slots of one Instance -------------------------------------------------

InstanceSlots InstanceSlots::decode(const store::Instance& instance, bool offline) {
  InstanceSlots result;
  result.name = instance.name;
  result.capacity = instance.capacity;
  result.slots.assign(instance.capacity, SlotUsage::free_slot());
  result.unreadable.assign(instance.capacity, false);
  result.offline = offline;
  for (const auto& [slot, value] : instance.device_usage) {
    auto index = naming::slot_index(slot, instance.name, instance.capacity);
    if (!index) {
      result.problems.push_back("deviceUsage key '" + slot + "' is not a slot of " + instance.name +
                                " (capacity " + std::to_string(instance.capacity) + ")");
      continue;
    }
    try {
      result.slots[*index] = naming::parse_usage(value);
    } catch (const naming::UsageParseError& e) {
      result.unreadable[*index] = true;  // held by something we cannot read: never hand it out
      result.problems.push_back(slot + ": " + e.what());
    }
  }
  return result;
}

uint32_t InstanceSlots::free_count() const {
  uint32_t count = 0;
  for (uint32_t i = 0; i < capacity; ++i) count += is_free(i) ? 1 : 0;
  return count;
}

std::optional<uint32_t> InstanceSlots::first_free() const {
  for (uint32_t i = 0; i < capacity; ++i)
    if (is_free(i)) return i;
  return std::nullopt;
}

std::optional<uint32_t> InstanceSlots::held_by_or_first_free(const naming::SlotUsage& usage) const {
  for (uint32_t i = 0; i < capacity; ++i)
    if (slots[i] == usage && !unreadable[i]) return i;
  return first_free();
}

void SlotTally::add(const InstanceSlots& instance, const std::string& node) {
  for (uint32_t i = 0; i < instance.capacity; ++i) {
    const SlotUsage& usage = instance.slots[i];
    if (instance.unreadable[i]) {
      ++unreadable;
    } else if (usage.is_free()) {
      ++(instance.offline ? offline : free);
    } else if (usage.node != node) {
      ++other_nodes;
    } else {
      ++(usage.kind == SlotUsage::Kind::instance ? instance_level : configuration_level);
    }
  }
}

uint64_t SlotTally::total() const {
  return free + offline + instance_level + configuration_level + other_nodes + unreadable;
}

std::vector<PluginDevice> instance_level_devices(const InstanceSlots& instance,
                                                 const std::string& node) {
  std::vector<PluginDevice> devices;
  auto own = SlotUsage::instance_level(node);
  for (uint32_t i = 0; i < instance.capacity; ++i) {
    bool healthy = !instance.offline && (instance.is_free(i) || instance.slots[i] == own);
    devices.push_back({naming::slot_name(instance.name, i), healthy});
  }
  return devices;
}

// ---- virtual devices of a CL plugin ------------------------------------------

namespace {

bool is_decimal(std::string_view id) {
  return !id.empty() &&
         std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string_view without_leading_zeros(std::string_view id) {
  auto first = id.find_first_not_of('0');
  return first == std::string_view::npos ? id.substr(id.size() - 1) : id.substr(first);
}

}  // namespace

bool VdevOrder::operator()(std::string_view a, std::string_view b) const {
  bool decimal_a = is_decimal(a), decimal_b = is_decimal(b);
  if (decimal_a != decimal_b) return decimal_a;
  if (!decimal_a) return a < b;
  // Decimal without leading zeros: shorter is smaller, then digit by digit.
  std::string_view value_a = without_leading_zeros(a), value_b = without_leading_zeros(b);
  if (value_a.size() != value_b.size()) return value_a.size() < value_b.size();
  if (value_a != value_b) return value_a < value_b;
  return a < b;  // "07" and "7" are different ids: keep the order strict
}

bool CandidateOrder::operator()(const Candidate& a, const Candidate& b) const {
  return a.free != b.free ? a.free > b.free : a.instance < b.instance;
}

VirtualDeviceTable::VirtualDeviceTable(std::string node, UniqueInstances policy)
    : node_(std::move(node)), policy_(policy) {}

std::vector<PluginDevice> VirtualDeviceTable::listed_claims(const InstanceSlots& instance) const {
  std::vector<PluginDevice> listed;
  for (const auto& usage : instance.slots)
    if (usage.kind == SlotUsage::Kind::configuration && usage.node == node_)
      listed.push_back({usage.vdev, !instance.offline});
  return listed;
}

void VirtualDeviceTable::put(InstanceSlots instance) {
  auto [entry, added] = instances_.try_emplace(instance.name);
  auto listed_before = listed_claims(entry->second);
  if (!added) subtract(entry->second);
  entry->second = std::move(instance);
  add(entry->second);
  settle_placeholders();
  for (const auto& device : listed_before) sync_listed(device.id);
  for (const auto& device : listed_claims(entry->second)) sync_listed(device.id);
}

void VirtualDeviceTable::remove(const std::string& instance) {
  auto entry = instances_.find(instance);
  if (entry == instances_.end()) return;
  auto listed_before = listed_claims(entry->second);
  subtract(entry->second);
  instances_.erase(entry);
  settle_placeholders();
  for (const auto& device : listed_before) sync_listed(device.id);
}

void VirtualDeviceTable::set_policy(UniqueInstances policy) {
  if (policy == policy_) return;
  for (const auto& [name, instance] : instances_) wanted_ -= placeholders_wanted(instance);
  policy_ = policy;
  for (const auto& [name, instance] : instances_) wanted_ += placeholders_wanted(instance);
  settle_placeholders();
}

void VirtualDeviceTable::set_held_without_claim(const std::set<std::string>& vdevs) {
  std::set<std::string, VdevOrder> held;
  for (const auto& vdev : vdevs)
    if (!claimed_.count(vdev)) held.insert(vdev);
  for (const auto& vdev : held_without_claim_)
    if (!held.count(vdev)) release_id(vdev);  // neither claimed nor a placeholder
  for (const auto& vdev : held) {
    if (placeholders_.erase(vdev))
      sync_listed(vdev);  // withdrawn; its id stays taken
    else
      take_id(vdev);
  }
  held_without_claim_ = std::move(held);
  settle_placeholders();
}

std::vector<std::string> VirtualDeviceTable::instance_names() const {
  std::vector<std::string> names;
  names.reserve(instances_.size());
  for (const auto& [name, instance] : instances_) names.push_back(name);
  return names;
}

size_t VirtualDeviceTable::placeholders_wanted(const InstanceSlots& instance) const {
  if (instance.offline) return 0;
  uint32_t free = instance.free_count();
  return policy_ == UniqueInstances::required ? (free > 0 ? 1 : 0) : free;
}

void VirtualDeviceTable::add(const InstanceSlots& instance) {
  for (uint32_t i = 0; i < instance.capacity; ++i) {
    const auto& usage = instance.slots[i];
    if (usage.kind != SlotUsage::Kind::configuration || usage.node != node_) continue;
    // A consumed placeholder's id is already taken, as is one held without
    // a claim until now (the claim takes it over).
    if (!placeholders_.erase(usage.vdev) && !held_without_claim_.erase(usage.vdev))
      take_id(usage.vdev);
    claimed_[usage.vdev] = {instance.name, i};
    if (instance.offline) offline_claims_.insert(usage.vdev);
  }
  wanted_ += placeholders_wanted(instance);
  uint32_t free = instance.free_count();
  if (!instance.offline && free > 0) candidates_.insert({free, instance.name});
}

void VirtualDeviceTable::subtract(const InstanceSlots& instance) {
  for (uint32_t i = 0; i < instance.capacity; ++i) {
    const auto& usage = instance.slots[i];
    if (usage.kind != SlotUsage::Kind::configuration || usage.node != node_) continue;
    auto held = claimed_.find(usage.vdev);
    // Two slots holding one vdev (a broken store): the later one kept it.
    if (held == claimed_.end() || held->second != ClaimedSlot{instance.name, i}) continue;
    claimed_.erase(held);
    offline_claims_.erase(usage.vdev);
    release_id(usage.vdev);
  }
  wanted_ -= placeholders_wanted(instance);
  candidates_.erase({instance.free_count(), instance.name});
}

namespace {

// The number of an id dowser would make ("0", "17"; not "07"), if it is one.
std::optional<uint64_t> vdev_number(std::string_view id) {
  if (!is_decimal(id) || id.size() > 19 || (id.size() > 1 && id.front() == '0'))
    return std::nullopt;
  return std::stoull(std::string(id));
}

// The smallest number not in `taken` (sorted, distinct): where the numbers
// stop matching their positions.
uint64_t smallest_unused(const std::vector<uint64_t>& taken) {
  size_t low = 0, high = taken.size();
  while (low < high) {
    size_t middle = low + (high - low) / 2;
    if (taken[middle] == middle)
      low = middle + 1;
    else
      high = middle;
  }
  return low;
}

// One id twice in one call (in one container or two) would be one slot
// granted twice: the kubelet never asks that, so it is refused.
void refuse_repeated_ids(const std::vector<std::vector<std::string>>& container_ids,
                         const std::string& what) {
  std::set<std::string_view> seen;
  for (const auto& ids : container_ids)
    for (const auto& id : ids)
      if (!seen.insert(id).second) throw AllocationError(what + id + " is requested twice");
}

}  // namespace

void VirtualDeviceTable::take_id(const std::string& vdev) {
  auto number = vdev_number(vdev);
  if (!number) return;
  auto at = std::lower_bound(numbers_taken_.begin(), numbers_taken_.end(), *number);
  if (at == numbers_taken_.end() || *at != *number) numbers_taken_.insert(at, *number);
}

void VirtualDeviceTable::release_id(const std::string& vdev) {
  auto number = vdev_number(vdev);
  if (!number) return;
  auto at = std::lower_bound(numbers_taken_.begin(), numbers_taken_.end(), *number);
  if (at != numbers_taken_.end() && *at == *number) numbers_taken_.erase(at);
}

void VirtualDeviceTable::settle_placeholders() {
  while (placeholders_.size() > wanted_) {
    auto surplus = placeholders_.extract(std::prev(placeholders_.end()));
    release_id(surplus.value());
    sync_listed(surplus.value());
  }
  while (placeholders_.size() < wanted_) {
    std::string id = std::to_string(smallest_unused(numbers_taken_));
    take_id(id);
    placeholders_.insert(id);
    sync_listed(id);
  }
}

void VirtualDeviceTable::sync_listed(const std::string& vdev) {
  std::optional<bool> healthy;
  if (claimed_.count(vdev))
    healthy = !offline_claims_.count(vdev);
  else if (placeholders_.count(vdev))
    healthy = true;
  const auto& list = *list_;
  auto at = std::lower_bound(
      list.begin(), list.end(), vdev,
      [](const PluginDevice& d, const std::string& id) { return VdevOrder{}(d.id, id); });
  bool listed = at != list.end() && at->id == vdev;
  if (listed ? healthy == at->healthy : !healthy) return;
  auto index = at - list.begin();
  auto& writable = writable_list();
  if (!healthy)
    writable.erase(writable.begin() + index);
  else if (listed)
    writable[index].healthy = *healthy;
  else
    writable.insert(writable.begin() + index, {vdev, *healthy});
}

std::vector<PluginDevice>& VirtualDeviceTable::writable_list() {
  // Someone (the publisher, the status page) still holds the list: change a
  // copy. use_count() is a relaxed read; the fence pairs it with the last
  // holder's release, so its reads happen before our writes.
  if (list_.use_count() > 1)
    list_ = std::make_shared<std::vector<PluginDevice>>(*list_);
  else
    std::atomic_thread_fence(std::memory_order_acquire);
  return *list_;
}

ContainerPlan plan_container(const std::vector<std::string>& vdevs,
                             const VirtualDeviceTable& table) {
  ContainerPlan plan;
  std::set<std::string> seen;
  for (const auto& vdev : vdevs) {
    if (!seen.insert(vdev).second)
      throw std::invalid_argument("virtual device " + vdev + " is requested twice");
    if (auto it = table.claimed().find(vdev); it != table.claimed().end()) {
      plan.reused.emplace_back(vdev, it->second);
    } else if (vdev_number(vdev)) {
      // A placeholder (every one is decimal), or an id of ours no longer
      // listed (withdrawn when another node took a device's last free slot,
      // or freed by the reclaimer) while the kubelet's list still had it:
      // placeholders are interchangeable, and the claim still decides on the
      // stored Instances.
      plan.new_vdevs.push_back(vdev);
    } else {
      throw std::invalid_argument("unknown virtual device " + vdev);
    }
  }
  return plan;
}

// ---- the manager -------------------------------------------------------------

CapacityManager::CapacityManager(store::InstanceStore& store, std::string node)
    : store_(store), node_(std::move(node)) {}

bool CapacityManager::apply(const store::StoredInstance& stored) {
  InstanceKey key{stored.instance.namespace_name, stored.instance.name};
  auto it = cache_.find(key);
  if (it != cache_.end() && it->second.revision >= stored.revision) return false;
  const bool same_content = it != cache_.end() && it->second.instance == stored.instance;
  cache_[key] = stored;
  if (listener_ && !same_content) listener_(stored);
  return true;
}

void CapacityManager::forget(const InstanceKey& key) { cache_.erase(key); }

const store::StoredInstance* CapacityManager::find(const InstanceKey& key) const {
  auto it = cache_.find(key);
  return it == cache_.end() ? nullptr : &it->second;
}

std::optional<CapacityManager::Claim> CapacityManager::claim(const InstanceKey& instance,
                                                             const ChooseSlot& choose,
                                                             const SlotUsage& wanted,
                                                             SlotEvent written) {
  std::optional<Claim> result;
  int writes = 0;
  auto stored = store::update_with_retry(
      store_, instance.first, instance.second,
      [&](const store::Instance& current) -> std::optional<store::Instance> {
        result.reset();  // re-decided on every attempt
        auto slots = InstanceSlots::decode(current);
        auto index = choose(slots);
        if (!index) return std::nullopt;
        bool already = slots.slots[*index] == wanted && !slots.unreadable[*index];
        // Ours already after a write of ours this call: that write landed,
        // though it was refused when sent again (its answer lost): new all the same.
        result = Claim{instance, *index, wanted, !already || writes > 0};
        if (already) return std::nullopt;
        ++writes;
        store::Instance next = current;
        next.device_usage[naming::slot_name(current.name, *index)] = naming::format_usage(wanted);
        return next;
      },
      store::kUpdateAttempts, find(instance));
  bool claimed = stored && result && result->newly_claimed;
  observe(claimed ? std::optional(written) : std::nullopt, wanted, claimed ? writes - 1 : writes);
  if (!stored) return std::nullopt;
  apply(*stored);
  return result;
}

// Why claim_slot refused, from the cache, which it refreshed if the store
// still has the Instance: the stored Instance may have fewer slots than the
// cached one had (its capacity lowered by another node meanwhile).
std::string CapacityManager::refusal_of_slot(const InstanceKey& instance, const std::string& id,
                                             uint32_t index) const {
  const auto* now = find(instance);
  if (!now) return "device " + instance.second + " is gone";
  if (index >= now->instance.capacity) {
    return "unknown device id " + id + ": " + instance.second + " has only " +
           std::to_string(now->instance.capacity) + " slots now";
  }
  return "slot " + id + " is in use";
}

std::vector<ContainerClaims> CapacityManager::allocate_instance_level(
    const InstanceKey& instance, const std::vector<std::vector<std::string>>& container_ids,
    bool offline) {
  auto own = SlotUsage::instance_level(node_);
  return all_or_nothing(instance.first, [&](std::vector<Claim>& made) {
    std::vector<ContainerClaims> result;
    if (offline) throw AllocationError("device " + instance.second + " is offline");
    refuse_repeated_ids(container_ids, "device id ");
    for (const auto& ids : container_ids) {
      ContainerClaims claims;
      for (const auto& id : ids) {
        const auto* cached = find(instance);
        if (!cached) throw AllocationError("device " + instance.second + " is gone");
        auto index = naming::slot_index(id, instance.second, cached->instance.capacity);
        if (!index) throw AllocationError("unknown device id " + id);
        auto got = claim_slot(instance, *index, own, SlotEvent::claimed);
        if (!got) throw AllocationError(refusal_of_slot(instance, id, *index));
        made.push_back(*got);
        claims.emplace_back(instance.second, got->slot);
      }
      result.push_back(std::move(claims));
    }
    return result;
  });
}

std::optional<CapacityManager::Claim> CapacityManager::claim_for_vdev(
    const std::string& namespace_name, const std::string& vdev, const VirtualDeviceTable& table,
    std::set<std::string>& used, UniqueInstances policy) {
  auto wanted = SlotUsage::configuration_level(vdev, node_);
  // A slot holding the vdev already took this claim's own write, which
  // landed though its answer was lost (the write sent again was refused as
  // a conflict): that slot is the claim, not a second one.
  auto choose = [&wanted](const InstanceSlots& slots) {
    return slots.held_by_or_first_free(wanted);
  };
  // Distinct Instances first; Preferred may then take more slots of one.
  for (bool allow_used : {false, true}) {
    if (allow_used && policy == UniqueInstances::required) break;
    for (const auto& candidate : table.candidates()) {
      if (!allow_used && used.count(candidate.instance)) continue;
      if (auto got = claim({namespace_name, candidate.instance}, choose, wanted)) {
        used.insert(candidate.instance);
        return got;
      }
    }
  }
  return std::nullopt;
}

CapacityManager::Claim CapacityManager::claim_reused(const std::string& namespace_name,
                                                     const std::string& vdev,
                                                     const ClaimedSlot& held) {
  auto got = claim_slot({namespace_name, held.instance}, held.slot,
                        SlotUsage::configuration_level(vdev, node_), SlotEvent::claimed);
  if (!got) {
    throw AllocationError("virtual device " + vdev + ": slot " + std::to_string(held.slot) +
                          " of " + held.instance + " is no longer this node's");
  }
  return *got;
}

std::vector<ContainerClaims> CapacityManager::allocate_configuration_level(
    const std::string& namespace_name, const std::vector<std::vector<std::string>>& container_vdevs,
    const VirtualDeviceTable& table, UniqueInstances policy) {
  return all_or_nothing(namespace_name, [&](std::vector<Claim>& made) {
    std::vector<ContainerClaims> result;
    refuse_repeated_ids(container_vdevs, "virtual device ");
    for (const auto& vdevs : container_vdevs) {
      ContainerPlan plan;
      try {
        plan = plan_container(vdevs, table);
      } catch (const std::invalid_argument& e) {
        throw AllocationError(e.what());
      }
      ContainerClaims claims;
      std::set<std::string> used;
      std::map<std::string, std::string> reused_on;  // Instance -> the vdev reused on it
      for (const auto& [vdev, slot] : plan.reused) {
        // As IL refuses an offline device: a container given its slot would
        // start without the device it asked for.
        if (table.is_offline(vdev)) {
          throw AllocationError("virtual device " + vdev + ": device " + slot.instance +
                                " is offline");
        }
        // The kubelet may hand one container two held vdevs of one device
        // (it chose them itself, or no preferred allocation was asked for).
        auto [other, distinct] = reused_on.emplace(slot.instance, vdev);
        if (!distinct && policy == UniqueInstances::required) {
          throw AllocationError("virtual devices " + other->second + " and " + vdev +
                                " are both slots of " + slot.instance +
                                ": the Configuration requires distinct devices (uniqueInstances "
                                "Required)");
        }
        made.push_back(claim_reused(namespace_name, vdev, slot));
        claims.emplace_back(slot.instance, slot.slot);
        used.insert(slot.instance);
      }
      for (const auto& vdev : plan.new_vdevs) {
        auto got = claim_for_vdev(namespace_name, vdev, table, used, policy);
        if (!got) {
          throw AllocationError(
              "not enough " + std::string(policy == UniqueInstances::required ? "distinct " : "") +
              "devices with a free slot for " + std::to_string(vdevs.size()) + " virtual devices");
        }
        made.push_back(*got);
        claims.emplace_back(got->instance.second, got->slot);
      }
      result.push_back(std::move(claims));
    }
    return result;
  });
}

std::vector<ContainerClaims> CapacityManager::all_or_nothing(const std::string& namespace_name,
                                                             const AllocationBody& body) {
  // The kubelet waits for the answer: the claims are on the disk when it
  // goes, and flushed by the store's thread right after (see
  // InstanceStore::Deferring::flush for why that loses no claim the kubelet
  // knows of).
  const store::DeferredSync claims_on_disk(store_, store::DeferredSync::SyncOn::store_thread,
                                           store::InstanceStore::Deferring::flush);
  std::vector<Claim> made;
  try {
    auto granted = body(made);
    if (grant_listener_) {
      for (const auto& claims : granted)
        for (const auto& [instance, slot] : claims)
          grant_listener_({namespace_name, instance}, slot);
    }
    return granted;
  } catch (const AllocationError&) {
    rollback(made);
    throw;
  } catch (const store::StoreError& e) {
    rollback(made);
    throw AllocationStoreError(std::string("the instance store failed: ") + e.what());
  } catch (const std::exception& e) {
    // Anything else (out of memory, a file system error not wrapped): the
    // call fails whole, and dowserd serves on.
    rollback(made);
    throw AllocationStoreError(std::string("claiming failed: ") + e.what());
  }
}

bool CapacityManager::release(const InstanceKey& instance, uint32_t slot,
                              const SlotUsage& expected) {
  bool released = false;
  int writes = 0;
  auto stored = store::update_with_retry(
      store_, instance.first, instance.second,
      [&](const store::Instance& current) -> std::optional<store::Instance> {
        released = false;
        auto slots = InstanceSlots::decode(current);
        if (slot >= slots.capacity || slots.unreadable[slot] || slots.slots[slot] != expected)
          return std::nullopt;
        ++writes;
        store::Instance next = current;
        next.device_usage.erase(naming::slot_name(current.name, slot));
        released = true;
        return next;
      },
      store::kUpdateAttempts, find(instance));
  if (stored) apply(*stored);
  released = released && stored.has_value();
  observe(released ? std::optional(SlotEvent::released) : std::nullopt, expected,
          released ? writes - 1 : writes);
  return released;
}

void CapacityManager::observe(std::optional<SlotEvent> event, const SlotUsage& usage,
                              int lost_races) {
  if (!slot_observer_) return;
  for (int lost = 0; lost < lost_races; ++lost) slot_observer_(SlotEvent::lost_race, usage);
  if (event) slot_observer_(*event, usage);
}

std::optional<CapacityManager::Claim> CapacityManager::claim_slot(const InstanceKey& instance,
                                                                  uint32_t slot,
                                                                  const SlotUsage& usage,
                                                                  SlotEvent written) {
  return claim(
      instance,
      [&](const InstanceSlots& slots) -> std::optional<uint32_t> {
        if (slots.claimable_by(slot, usage)) return slot;
        return std::nullopt;
      },
      usage, written);
}

bool CapacityManager::restore(const InstanceKey& instance, uint32_t slot, const SlotUsage& usage) {
  return claim_slot(instance, slot, usage, SlotEvent::restored).has_value();
}

void CapacityManager::rollback(const std::vector<Claim>& claims) {
  for (const auto& claim : claims) {
    if (!claim.newly_claimed) continue;  // it was ours before this call
    try {
      release(claim.instance, claim.slot, claim.usage);
    } catch (const store::StoreError& e) {
      // The reclaimer frees it later: no container holds it.
      spdlog::warn("could not undo the claim of slot {} of {}: {}", claim.slot,
                   claim.instance.second, e.what());
    }
  }
}

}  // namespace dowser::capacity
