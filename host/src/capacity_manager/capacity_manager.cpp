#include "capacity_manager.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

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

bool VirtualDeviceTable::update(const std::vector<InstanceSlots>& instances,
                                const std::string& node, UniqueInstances policy) {
  auto before = devices();
  claimed_.clear();
  offline_claims_.clear();
  size_t wanted = 0;
  for (const auto& instance : instances) {
    for (uint32_t i = 0; i < instance.capacity; ++i) {
      const auto& usage = instance.slots[i];
      if (usage.kind == SlotUsage::Kind::configuration && usage.node == node) {
        claimed_[usage.vdev] = {instance.name, i};
        if (instance.offline) offline_claims_.insert(usage.vdev);
      }
    }
    if (instance.offline) continue;
    uint32_t free = instance.free_count();
    wanted += policy == UniqueInstances::required ? (free > 0 ? 1 : 0) : free;
  }

  // Keep placeholders that are still placeholders, the smallest ids first.
  std::erase_if(placeholders_, [this](const std::string& id) { return claimed_.count(id) > 0; });
  while (placeholders_.size() > wanted) placeholders_.erase(std::prev(placeholders_.end()));
  // Then the smallest decimal ids nobody uses.
  for (uint64_t next = 0; placeholders_.size() < wanted; ++next) {
    std::string id = std::to_string(next);
    if (!claimed_.count(id)) placeholders_.insert(std::move(id));
  }
  return devices() != before;
}

std::vector<PluginDevice> VirtualDeviceTable::devices() const {
  std::vector<PluginDevice> result;
  result.reserve(claimed_.size() + placeholders_.size());
  auto claimed = claimed_.begin();
  auto placeholder = placeholders_.begin();
  while (claimed != claimed_.end() || placeholder != placeholders_.end()) {
    bool take_claimed = placeholder == placeholders_.end() ||
                        (claimed != claimed_.end() && VdevOrder{}(claimed->first, *placeholder));
    if (take_claimed) {
      result.push_back({claimed->first, !offline_claims_.count(claimed->first)});
      ++claimed;
    } else {
      result.push_back({*placeholder++, true});
    }
  }
  return result;
}

ContainerPlan plan_container(const std::vector<std::string>& vdevs, const VirtualDeviceTable& table,
                             const std::vector<InstanceSlots>& instances) {
  ContainerPlan plan;
  std::set<std::string> seen;
  for (const auto& vdev : vdevs) {
    if (!seen.insert(vdev).second)
      throw std::invalid_argument("virtual device " + vdev + " is requested twice");
    if (auto it = table.claimed().find(vdev); it != table.claimed().end()) {
      plan.reused.emplace_back(vdev, it->second);
    } else if (table.is_placeholder(vdev)) {
      plan.new_vdevs.push_back(vdev);
    } else {
      throw std::invalid_argument("unknown virtual device " + vdev);
    }
  }
  std::vector<const InstanceSlots*> candidates;
  for (const auto& instance : instances)
    if (!instance.offline && instance.free_count() > 0) candidates.push_back(&instance);
  std::sort(candidates.begin(), candidates.end(), [](const auto* a, const auto* b) {
    uint32_t free_a = a->free_count(), free_b = b->free_count();
    return free_a != free_b ? free_a > free_b : a->name < b->name;
  });
  for (const auto* candidate : candidates) plan.candidates.push_back(candidate->name);
  return plan;
}

// ---- the manager -------------------------------------------------------------

CapacityManager::CapacityManager(store::InstanceStore& store, std::string node)
    : store_(store), node_(std::move(node)) {}

bool CapacityManager::apply(const store::StoredInstance& stored) {
  InstanceKey key{stored.instance.namespace_name, stored.instance.name};
  auto it = cache_.find(key);
  if (it != cache_.end() && it->second.revision >= stored.revision) return false;
  cache_[key] = stored;
  if (listener_) listener_(stored);
  return true;
}

void CapacityManager::forget(const InstanceKey& key) { cache_.erase(key); }

const store::StoredInstance* CapacityManager::find(const InstanceKey& key) const {
  auto it = cache_.find(key);
  return it == cache_.end() ? nullptr : &it->second;
}

std::optional<CapacityManager::Claim> CapacityManager::claim(const InstanceKey& instance,
                                                             const ChooseSlot& choose,
                                                             const SlotUsage& wanted) {
  std::optional<Claim> result;
  int attempts = 0;
  auto stored = store::update_with_retry(
      store_, instance.first, instance.second,
      [&](const store::Instance& current) -> std::optional<store::Instance> {
        ++attempts;
        result.reset();  // re-decided on every attempt
        auto slots = InstanceSlots::decode(current);
        auto index = choose(slots);
        if (!index) return std::nullopt;
        bool already = slots.slots[*index] == wanted && !slots.unreadable[*index];
        result = Claim{instance, *index, wanted, !already};
        if (already) return std::nullopt;
        store::Instance next = current;
        next.device_usage[naming::slot_name(current.name, *index)] = naming::format_usage(wanted);
        return next;
      });
  bool claimed = stored && result && result->newly_claimed;
  observe(claimed ? std::optional(SlotEvent::claimed) : std::nullopt, wanted, attempts);
  if (!stored) return std::nullopt;
  apply(*stored);
  return result;
}

std::vector<ContainerClaims> CapacityManager::allocate_instance_level(
    const InstanceKey& instance, const std::vector<std::vector<std::string>>& container_ids,
    bool offline) {
  auto own = SlotUsage::instance_level(node_);
  return all_or_nothing([&](std::vector<Claim>& made) {
    std::vector<ContainerClaims> result;
    if (offline) throw AllocationError("device " + instance.second + " is offline");
    for (const auto& ids : container_ids) {
      ContainerClaims claims;
      for (const auto& id : ids) {
        const auto* cached = find(instance);
        if (!cached) throw AllocationError("device " + instance.second + " is gone");
        auto index = naming::slot_index(id, instance.second, cached->instance.capacity);
        if (!index) throw AllocationError("unknown device id " + id);
        auto got = claim(
            instance,
            [&](const InstanceSlots& slots) -> std::optional<uint32_t> {
              if (slots.is_free(*index) || slots.slots[*index] == own) return index;
              return std::nullopt;
            },
            own);
        if (!got) throw AllocationError("slot " + id + " is in use");
        made.push_back(*got);
        claims.emplace_back(instance.second, got->slot);
      }
      result.push_back(std::move(claims));
    }
    return result;
  });
}

std::optional<CapacityManager::Claim> CapacityManager::claim_for_vdev(
    const std::string& namespace_name, const std::string& vdev, const ContainerPlan& plan,
    std::set<std::string>& used, UniqueInstances policy) {
  auto wanted = SlotUsage::configuration_level(vdev, node_);
  auto first_free = [](const InstanceSlots& slots) { return slots.first_free(); };
  // Distinct Instances first; Preferred may then take more slots of one.
  for (bool allow_used : {false, true}) {
    if (allow_used && policy == UniqueInstances::required) break;
    for (const auto& name : plan.candidates) {
      if (!allow_used && used.count(name)) continue;
      if (auto got = claim({namespace_name, name}, first_free, wanted)) {
        used.insert(name);
        return got;
      }
    }
  }
  return std::nullopt;
}

std::vector<ContainerClaims> CapacityManager::allocate_configuration_level(
    const std::string& namespace_name, const std::vector<std::vector<std::string>>& container_vdevs,
    const VirtualDeviceTable& table, const std::function<std::vector<InstanceSlots>()>& instances,
    UniqueInstances policy) {
  return all_or_nothing([&](std::vector<Claim>& made) {
    std::vector<ContainerClaims> result;
    std::set<std::string> vdevs_of_call;
    for (const auto& vdevs : container_vdevs) {
      for (const auto& vdev : vdevs)
        if (!vdevs_of_call.insert(vdev).second)
          throw AllocationError("virtual device " + vdev + " is requested twice");
      ContainerPlan plan;
      try {
        plan = plan_container(vdevs, table, instances());
      } catch (const std::invalid_argument& e) {
        throw AllocationError(e.what());
      }
      ContainerClaims claims;
      std::set<std::string> used;
      for (const auto& [vdev, slot] : plan.reused) {
        claims.emplace_back(slot.instance, slot.slot);
        used.insert(slot.instance);
      }
      for (const auto& vdev : plan.new_vdevs) {
        auto got = claim_for_vdev(namespace_name, vdev, plan, used, policy);
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

std::vector<ContainerClaims> CapacityManager::all_or_nothing(const AllocationBody& body) {
  std::vector<Claim> made;
  try {
    return body(made);
  } catch (const AllocationError&) {
    rollback(made);
    throw;
  } catch (const store::StoreError& e) {
    rollback(made);
    throw AllocationError(std::string("the instance store failed: ") + e.what());
  }
}

bool CapacityManager::release(const InstanceKey& instance, uint32_t slot,
                              const SlotUsage& expected) {
  bool released = false;
  int attempts = 0;
  auto stored = store::update_with_retry(
      store_, instance.first, instance.second,
      [&](const store::Instance& current) -> std::optional<store::Instance> {
        ++attempts;
        released = false;
        auto slots = InstanceSlots::decode(current);
        if (slot >= slots.capacity || slots.unreadable[slot] || slots.slots[slot] != expected)
          return std::nullopt;
        store::Instance next = current;
        next.device_usage.erase(naming::slot_name(current.name, slot));
        released = true;
        return next;
      });
  if (stored) apply(*stored);
  released = released && stored.has_value();
  observe(released ? std::optional(SlotEvent::released) : std::nullopt, expected, attempts);
  return released;
}

void CapacityManager::observe(std::optional<SlotEvent> event, const SlotUsage& usage,
                              int attempts) {
  if (!slot_observer_) return;
  for (int lost = 1; lost < attempts; ++lost) slot_observer_(SlotEvent::lost_race, usage);
  if (event) slot_observer_(*event, usage);
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
