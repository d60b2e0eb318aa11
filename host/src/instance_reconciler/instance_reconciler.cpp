#include "instance_reconciler.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace dowser::reconcile {
namespace {

bool is_shared(const Device& device) { return device.sharing == Sharing::shared; }

// Keeps claims that fit the capacity; a shrunk capacity drops the rest.
void fit_claims_to_capacity(store::Instance& instance) {
  for (auto it = instance.device_usage.begin(); it != instance.device_usage.end();) {
    if (naming::slot_index(it->first, instance.name, instance.capacity)) {
      ++it;
    } else {
      spdlog::warn("{}: dropping claim {}={} beyond capacity {}", instance.name, it->first,
                   it->second, instance.capacity);
      it = instance.device_usage.erase(it);
    }
  }
}

}  // namespace

namespace {

std::string digest_of(const Device& device, const std::string& node) {
  return naming::device_digest(device.id, is_shared(device), node);
}

}  // namespace

store::Instance instance_for(const configuration::Configuration& configuration,
                             const Device& device, const std::string& node,
                             const std::string& resource_domain) {
  bool shared = is_shared(device);
  std::string digest = digest_of(device, node);
  store::Instance instance;
  instance.namespace_name = configuration.namespace_name;
  instance.name = configuration.name + "-" + digest;
  instance.configuration_name = configuration.name;
  instance.cdi_name = resource_domain + "/" + configuration.name + "=" + digest;
  instance.capacity = configuration.capacity;
  instance.shared = shared;
  for (const auto& [key, value] : device.properties)
    if (value) instance.broker_properties[key] = *value;
  for (const auto& [key, value] : configuration.broker_properties)
    instance.broker_properties[key] = value;  // the Configuration's win
  return instance;
}

InstanceReconciler::InstanceReconciler(store::InstanceStore& store,
                                       capacity::CapacityManager& capacity, std::string node,
                                       std::string resource_domain)
    : store_(store),
      capacity_(capacity),
      node_(std::move(node)),
      domain_(std::move(resource_domain)) {}

std::set<capacity::InstanceKey> InstanceReconciler::reconcile(
    const configuration::Configuration& configuration, const host::Snapshot& devices,
    Clock::time_point now) {
  ConfigurationKey key{configuration.namespace_name, configuration.name};
  // A device reported as before, under the same Configuration, into an
  // Instance that still lists this node, needs no write: a snapshot of many
  // devices costs a comparison per device, not an Instance per device.
  auto [last, first_time] = reconciled_with_.try_emplace(key, configuration);
  const bool same_configuration = !first_time && last->second == configuration;
  last->second = configuration;
  const uint64_t snapshot = ++snapshots_;
  std::set<capacity::InstanceKey> changed;
  for (const auto& device : devices) {
    capacity::InstanceKey instance_key{configuration.namespace_name,
                                       configuration.name + "-" + digest_of(device, node_)};
    auto& seen = seen_[instance_key];
    seen.snapshot = snapshot;
    if (same_configuration && seen.configuration == key && !seen.offline_until &&
        seen.device == device && lists_this_node(instance_key))
      continue;
    if (seen.offline_until || seen.configuration != key) changed.insert(instance_key);
    seen = Seen{key, device, std::nullopt, snapshot};
    auto wanted = instance_for(configuration, device, node_, domain_);
    try {
      join(wanted);
    } catch (const store::StoreError& e) {
      spdlog::error("{}: cannot write Instance {}: {}", configuration.name, wanted.name, e.what());
      reconciled_with_.erase(key);  // the next snapshot writes every Instance again
    }
  }
  // Instances stored before this process saw them can only predate its first
  // snapshot of the Configuration (or the first after a failed write).
  if (!same_configuration) adopt_stored(key);
  // What this Configuration had here but the snapshot lacks.
  auto grace = configuration.shared_offline_grace;
  for (auto it = seen_.begin(); it != seen_.end();) {
    auto& [instance_key, seen] = *it;
    if (seen.snapshot == snapshot || seen.configuration != key) {
      ++it;
      continue;
    }
    const bool in_grace = is_shared(seen.device) && grace.count() > 0;
    if (in_grace || holds_claims(instance_key)) {
      if (!seen.offline_until) {
        seen.offline_until = now + (in_grace ? grace : std::chrono::seconds(0));
        changed.insert(instance_key);
        spdlog::info("{}: device {} is gone; offline for {} s{}", instance_key.second,
                     seen.device.id, in_grace ? grace.count() : 0,
                     holds_claims(instance_key) ? ", and while pods here hold its slots" : "");
      }
      ++it;
      continue;
    }
    withdraw(instance_key);
    changed.insert(instance_key);
    it = seen_.erase(it);
  }
  return changed;
}

std::set<capacity::InstanceKey> InstanceReconciler::withdraw_all(
    const ConfigurationKey& configuration) {
  reconciled_with_.erase(configuration);
  std::set<capacity::InstanceKey> changed;
  for (auto it = seen_.begin(); it != seen_.end();) {
    if (it->second.configuration != configuration) {
      ++it;
      continue;
    }
    withdraw(it->first);
    changed.insert(it->first);
    it = seen_.erase(it);
  }
  return changed;
}

std::set<capacity::InstanceKey> InstanceReconciler::withdraw_unknown(
    const std::set<ConfigurationKey>& known) {
  std::vector<capacity::InstanceKey> orphans;
  for (const auto& [key, stored] : capacity_.instances()) {
    ConfigurationKey owner{stored.instance.namespace_name, stored.instance.configuration_name};
    if (visible_here(stored.instance) && !known.count(owner)) orphans.push_back(key);
  }
  for (const auto& key : orphans) {
    spdlog::info("{}: its Configuration is gone; withdrawing", key.second);
    withdraw(key);
    seen_.erase(key);
  }
  return {orphans.begin(), orphans.end()};
}

std::set<capacity::InstanceKey> InstanceReconciler::expire(Clock::time_point now) {
  std::set<capacity::InstanceKey> changed;
  for (auto it = seen_.begin(); it != seen_.end();) {
    if (!it->second.offline_until || *it->second.offline_until > now || holds_claims(it->first)) {
      ++it;
      continue;
    }
    spdlog::info("{}: device {} did not come back; withdrawing", it->first.second,
                 it->second.device.id);
    withdraw(it->first);
    changed.insert(it->first);
    it = seen_.erase(it);
  }
  return changed;
}

std::optional<Clock::time_point> InstanceReconciler::next_expiry() const {
  std::optional<Clock::time_point> next;
  for (const auto& [key, seen] : seen_)
    if (seen.offline_until && !holds_claims(key) && (!next || *seen.offline_until < *next))
      next = seen.offline_until;
  return next;
}

// Instances stored with this node before this process saw them (a restart):
// they count as seen, so a device that did not come back is withdrawn.
void InstanceReconciler::adopt_stored(const ConfigurationKey& configuration) {
  for (const auto& [key, stored] : capacity_.instances()) {
    const auto& instance = stored.instance;
    if (seen_.count(key) || !visible_here(instance) ||
        ConfigurationKey{instance.namespace_name, instance.configuration_name} != configuration)
      continue;
    Device unknown;
    unknown.id = "(not seen since restart)";
    unknown.sharing = instance.shared ? Sharing::shared : Sharing::local;
    seen_[key] = Seen{configuration, unknown, std::nullopt, 0};
  }
}

void InstanceReconciler::join(const store::Instance& wanted) {
  auto decide = [&](const store::Instance& current) -> std::optional<store::Instance> {
    store::Instance next = current;
    next.configuration_name = wanted.configuration_name;
    next.cdi_name = wanted.cdi_name;
    next.capacity = wanted.capacity;
    next.shared = wanted.shared;
    next.broker_properties = wanted.broker_properties;
    next.nodes.insert(node_);
    fit_claims_to_capacity(next);
    if (next == current) return std::nullopt;
    return next;
  };
  // Every snapshot joins every device it holds: when the cached copy (kept
  // current by the store watch) already says so, the store is not read.
  const auto* cached = capacity_.find({wanted.namespace_name, wanted.name});
  if (cached && !decide(cached->instance)) return;
  // Not in the cache, so most likely new: create it without reading first.
  if (!cached && create(wanted)) return;
  for (int attempt = 0; attempt < 8; ++attempt) {
    if (auto stored =
            store::update_with_retry(store_, wanted.namespace_name, wanted.name, decide,
                                     store::kUpdateAttempts, attempt == 0 ? cached : nullptr)) {
      capacity_.apply(*stored);
      return;
    }
    if (create(wanted)) return;
  }
  throw store::StoreError(store::StoreError::Kind::conflict, "Instance keeps changing under us");
}

bool InstanceReconciler::create(const store::Instance& wanted) {
  store::Instance fresh = wanted;
  fresh.nodes = {node_};
  try {
    capacity_.apply({fresh, store_.create(fresh)});
    return true;
  } catch (const store::StoreError& e) {
    if (e.kind() != store::StoreError::Kind::already_exists) throw;
    return false;  // another node created it first: join it
  }
}

void InstanceReconciler::withdraw(const capacity::InstanceKey& key) {
  try {
    for (int attempt = 0; attempt < 16; ++attempt) {
      auto stored = store_.get(key.first, key.second);
      if (!stored) return capacity_.forget(key);
      store::Instance next = stored->instance;
      if (!next.nodes.erase(node_)) return;  // not ours (any more)
      naming::release_claims_of(next.device_usage, node_);
      try {
        if (next.nodes.empty()) {
          store_.remove(key.first, key.second, stored->revision);
          return capacity_.forget(key);
        }
        capacity_.apply({next, store_.update(next, stored->revision)});
        return;
      } catch (const store::StoreError& e) {
        if (e.kind() != store::StoreError::Kind::conflict) throw;
      }
    }
    spdlog::error("{}: could not withdraw this node: too many concurrent changes", key.second);
  } catch (const store::StoreError& e) {
    spdlog::error("{}: could not withdraw this node: {}", key.second, e.what());
  }
}

const Device* InstanceReconciler::device(const capacity::InstanceKey& instance) const {
  auto it = seen_.find(instance);
  return it == seen_.end() ? nullptr : &it->second.device;
}

bool InstanceReconciler::offline(const capacity::InstanceKey& instance) const {
  auto it = seen_.find(instance);
  return it != seen_.end() && it->second.offline_until.has_value();
}

std::vector<capacity::InstanceKey> InstanceReconciler::instances_of(
    const std::string& namespace_name, const std::string& configuration) const {
  std::vector<capacity::InstanceKey> result;
  for (const auto& [key, seen] : seen_)
    if (key.first == namespace_name && is_instance_of(key, configuration)) result.push_back(key);
  return result;
}

bool InstanceReconciler::is_instance_of(const capacity::InstanceKey& instance,
                                        const std::string& configuration) const {
  auto seen = seen_.find(instance);
  if (seen == seen_.end() ||
      seen->second.configuration != ConfigurationKey{instance.first, configuration})
    return false;
  const auto* stored = capacity_.find(instance);
  return stored && visible_here(stored->instance);
}

bool InstanceReconciler::holds_claims(const capacity::InstanceKey& key) const {
  const auto* stored = capacity_.find(key);
  if (!stored) return false;
  return std::any_of(stored->instance.device_usage.begin(), stored->instance.device_usage.end(),
                     [this](const auto& slot) { return naming::is_claim_of(slot.second, node_); });
}

bool InstanceReconciler::lists_this_node(const capacity::InstanceKey& key) const {
  const auto* stored = capacity_.find(key);
  return stored && visible_here(stored->instance);
}

bool InstanceReconciler::visible_here(const store::Instance& instance) const {
  return instance.nodes.count(node_) > 0;
}

}  // namespace dowser::reconcile
