#include "instance_reconciler.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace dowser::reconcile {
namespace {

bool is_shared(const Device& device) { return device.sharing == Sharing::shared; }

// Keeps claims that fit the capacity; a shrunk capacity drops the rest,
// which are returned (slot -> usage) for the caller to log once written.
std::map<std::string, std::string> fit_claims_to_capacity(store::Instance& instance) {
  std::map<std::string, std::string> dropped;
  for (auto it = instance.device_usage.begin(); it != instance.device_usage.end();) {
    if (naming::slot_index(it->first, instance.name, instance.capacity)) {
      ++it;
    } else {
      dropped.insert(*it);
      it = instance.device_usage.erase(it);
    }
  }
  return dropped;
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
  reported_.insert(key);
  const uint64_t snapshot = ++snapshots_;
  std::set<capacity::InstanceKey> changed;
  // A complete snapshot: only its devices may wait for a name.
  std::erase_if(waiting_for_name_,
                [&](const auto& waiting) { return waiting.second.configuration == key; });
  for (const auto& device : devices)
    report(configuration, device, same_configuration, snapshot, changed);
  // Instances stored before this process saw them can only predate its first
  // snapshot of the Configuration (or the first after a failed write).
  if (!same_configuration) adopt_stored(key);
  // What this Configuration had here but the snapshot lacks.
  for (auto it = seen_.begin(); it != seen_.end();) {
    auto& [instance_key, seen] = *it;
    const bool missing = seen.snapshot != snapshot && seen.configuration == key;
    if (missing &&
        !went_missing(instance_key, seen, configuration.shared_offline_grace, now, changed)) {
      it = forget(it);
    } else {
      ++it;
    }
  }
  // Every device was looked at: none waits to be joined again.
  std::erase_if(unlisted_, [&](const auto& instance_key) {
    auto seen = seen_.find(instance_key);
    return seen == seen_.end() || seen->second.configuration == key;
  });
  offer_waiting(configuration, snapshot, changed);
  return changed;
}

std::set<capacity::InstanceKey> InstanceReconciler::apply(
    const configuration::Configuration& configuration, const host::DeviceChanges& changes,
    Clock::time_point now) {
  ConfigurationKey key{configuration.namespace_name, configuration.name};
  if (changes.complete) {
    // Discovery works again: the devices it reports again are Healthy again.
    std::set<capacity::InstanceKey> changed;
    if (discovery_failed_.erase(key)) changed = instance_keys_of(key);
    changed.merge(reconcile(configuration, changes.reported, now));
    return changed;
  }
  auto last = reconciled_with_.find(key);
  if (last == reconciled_with_.end() || last->second != configuration)
    return reconcile(configuration, reported_devices(key, changes), now);
  const uint64_t snapshot = ++snapshots_;
  std::set<capacity::InstanceKey> changed;
  for (const auto& device : changes.reported)
    report(configuration, device, true, snapshot, changed);
  for (const auto& device : changes.gone) {
    const auto instance_key = key_of(configuration, device);
    waiting_for_name_.erase({instance_key, device.id});
    auto seen = seen_.find(instance_key);
    if (seen == seen_.end() || seen->second.configuration != key ||
        seen->second.device.id != device.id)
      continue;
    if (!went_missing(seen->first, seen->second, configuration.shared_offline_grace, now, changed))
      forget(seen);
  }
  rejoin_unlisted(configuration, snapshot, changed);
  offer_waiting(configuration, snapshot, changed);
  return changed;
}

std::set<capacity::InstanceKey> InstanceReconciler::reapply(
    const configuration::Configuration& configuration, Clock::time_point now) {
  ConfigurationKey key{configuration.namespace_name, configuration.name};
  if (!reported_.count(key)) return {};
  return reconcile(configuration, reported_devices(key, {}), now);
}

std::optional<ConfigurationKey> InstanceReconciler::stored_instance_changed(
    const capacity::InstanceKey& instance) {
  auto seen = seen_.find(instance);
  if (seen == seen_.end() || seen->second.offline_until || seen->second.adopted ||
      lists_this_node(instance))
    return std::nullopt;
  if (!unlisted_.insert(instance).second) return std::nullopt;
  return seen->second.configuration;
}

void InstanceReconciler::report(const configuration::Configuration& configuration,
                                const Device& device, bool same_configuration, uint64_t snapshot,
                                std::set<capacity::InstanceKey>& changed) {
  ConfigurationKey key{configuration.namespace_name, configuration.name};
  auto instance_key = key_of(configuration, device);
  if (name_held_by_another(key, instance_key, device)) return;
  auto& seen = seen_[instance_key];
  seen.snapshot = snapshot;
  if (same_configuration && seen.configuration == key && !seen.offline_until &&
      seen.device == device && lists_this_node(instance_key))
    return;
  if (seen.offline_until || seen.configuration != key) changed.insert(instance_key);
  // The other half of "is gone; kept, offline": an operator following a
  // flapping device needs both.
  if (seen.offline_until && seen.configuration == key)
    spdlog::info("{}: device {} is back; online again", instance_key.second, device.id);
  seen = Seen{key, device, std::nullopt, snapshot};
  offline_.erase(instance_key);
  auto wanted = instance_for(configuration, device, node_, domain_);
  try {
    join(wanted);
  } catch (const store::StoreError& e) {
    write_failed(key, wanted.name, e);
  }
}

bool InstanceReconciler::name_held_by_another(const ConfigurationKey& configuration,
                                              const capacity::InstanceKey& instance,
                                              const Device& device) {
  auto holder = seen_.find(instance);
  if (holder == seen_.end() || holder->second.configuration != configuration ||
      holder->second.adopted ||
      (holder->second.device.id == device.id && holder->second.device.sharing == device.sharing))
    return false;
  waiting_for_name_.insert_or_assign({instance, device.id}, Waiting{configuration, device});
  if (clashes_told_.emplace(instance, device.id).second) {
    spdlog::error(
        "Configuration {}/{}: devices {} and {} both make Instance {} (its name keeps 6 hex "
        "digits of a digest of the device id, as Akri's does); {} is left out while {} holds "
        "the name",
        configuration.first, configuration.second, holder->second.device.id, device.id,
        instance.second, device.id, holder->second.device.id);
  }
  return true;
}

void InstanceReconciler::offer_waiting(const configuration::Configuration& configuration,
                                       uint64_t snapshot,
                                       std::set<capacity::InstanceKey>& changed) {
  const ConfigurationKey key{configuration.namespace_name, configuration.name};
  // All of a name's waiting devices are offered: the first takes it, and
  // report() puts the others back to wait.
  std::vector<Device> free_now;
  std::erase_if(waiting_for_name_, [&](const auto& entry) {
    const auto& [waiting_key, waiting] = entry;
    if (waiting.configuration != key || seen_.count(waiting_key.first)) return false;
    free_now.push_back(waiting.device);
    return true;
  });
  for (const auto& device : free_now) {
    report(configuration, device, false, snapshot, changed);
    const auto name = key_of(configuration, device);
    if (auto holder = seen_.find(name); holder != seen_.end() && holder->second.device == device)
      spdlog::info("{}: device {} takes the name its clashing device left", name.second, device.id);
  }
}

void InstanceReconciler::write_failed(const ConfigurationKey& configuration,
                                      const std::string& instance, const store::StoreError& error) {
  spdlog::error("Configuration {}/{}: cannot write Instance {}: {}", configuration.first,
                configuration.second, instance, error.what());
  reconciled_with_.erase(configuration);
  failed_writes_.insert(configuration);
}

std::set<capacity::InstanceKey> InstanceReconciler::write_staged() {
  staging_ = false;
  std::set<capacity::InstanceKey> changed;
  for (auto& [key, fresh] : std::exchange(staged_, {})) {
    try {
      if (create(fresh)) continue;
      // Created by another writer since the pool last heard of it: join that
      // one, claims and all, instead of what was offered.
      capacity_.forget(key);
      join(fresh);
    } catch (const store::StoreError& e) {
      capacity_.forget(key);
      write_failed({key.first, fresh.configuration_name}, key.second, e);
    }
    changed.insert(key);
  }
  return changed;
}

bool InstanceReconciler::went_missing(const capacity::InstanceKey& key, Seen& seen,
                                      std::chrono::seconds grace, Clock::time_point now,
                                      std::set<capacity::InstanceKey>& changed) {
  const bool in_grace = is_shared(seen.device) && grace.count() > 0;
  if (in_grace || holds_claims(key)) {
    if (!seen.offline_until) {
      seen.offline_until = now + (in_grace ? grace : std::chrono::seconds(0));
      offline_.insert(key);
      changed.insert(key);
      const std::string grace_text = "for its grace of " + std::to_string(grace.count()) + " s";
      const char* claims_text = "while pods here hold its slots";
      spdlog::info("{}: device {} is gone; kept, offline, {}", key.second, seen.device.id,
                   !in_grace           ? claims_text
                   : holds_claims(key) ? grace_text + ", and " + claims_text
                                       : grace_text);
    }
    return true;
  }
  withdraw(key);
  changed.insert(key);
  return false;
}

host::Snapshot InstanceReconciler::reported_devices(const ConfigurationKey& configuration,
                                                    const host::DeviceChanges& changes) const {
  std::map<std::pair<std::string, Sharing>, const Device*> devices;
  // An adopted entry stands for a device not reported yet: its Device is a
  // placeholder, and no snapshot holds it.
  for (const auto& [key, seen] : seen_)
    if (seen.configuration == configuration && !seen.offline_until && !seen.adopted)
      devices[{seen.device.id, seen.device.sharing}] = &seen.device;
  for (const auto& [key, waiting] : waiting_for_name_)
    if (waiting.configuration == configuration)
      devices[{waiting.device.id, waiting.device.sharing}] = &waiting.device;
  for (const auto& device : changes.gone) devices.erase({device.id, device.sharing});
  for (const auto& device : changes.reported) devices[{device.id, device.sharing}] = &device;
  host::Snapshot result;
  result.reserve(devices.size());
  for (const auto& [identity, device] : devices) result.push_back(*device);
  return result;
}

// A store change took this node out of an Instance whose device is still
// reported: rejoined now, as a complete snapshot would.
void InstanceReconciler::rejoin_unlisted(const configuration::Configuration& configuration,
                                         uint64_t snapshot,
                                         std::set<capacity::InstanceKey>& changed) {
  ConfigurationKey key{configuration.namespace_name, configuration.name};
  for (auto it = unlisted_.begin(); it != unlisted_.end();) {
    auto seen = seen_.find(*it);
    if (seen != seen_.end() && seen->second.configuration != key) {
      ++it;
      continue;
    }
    if (seen != seen_.end() && !seen->second.offline_until) {
      const Device device = seen->second.device;  // report() overwrites the entry
      report(configuration, device, true, snapshot, changed);
    }
    it = unlisted_.erase(it);
  }
}

capacity::InstanceKey InstanceReconciler::key_of(const configuration::Configuration& configuration,
                                                 const Device& device) const {
  return {configuration.namespace_name, configuration.name + "-" + digest_of(device, node_)};
}

std::set<capacity::InstanceKey> InstanceReconciler::discovery_failed(
    const ConfigurationKey& configuration) {
  adopt_stored(configuration);
  discovery_failed_.insert(configuration);
  return instance_keys_of(configuration);
}

std::set<capacity::InstanceKey> InstanceReconciler::instance_keys_of(
    const ConfigurationKey& configuration) const {
  std::set<capacity::InstanceKey> keys;
  for (const auto& [key, seen] : seen_)
    if (seen.configuration == configuration) keys.insert(key);
  return keys;
}

std::set<capacity::InstanceKey> InstanceReconciler::withdraw_all(
    const ConfigurationKey& configuration) {
  // Those stored before a restart and not reported since go too (refused
  // before its first snapshot, the Configuration never had one).
  adopt_stored(configuration);
  std::erase_if(waiting_for_name_,
                [&](const auto& waiting) { return waiting.second.configuration == configuration; });
  reconciled_with_.erase(configuration);
  reported_.erase(configuration);
  discovery_failed_.erase(configuration);
  std::set<capacity::InstanceKey> changed;
  for (auto it = seen_.begin(); it != seen_.end();) {
    if (it->second.configuration != configuration) {
      ++it;
      continue;
    }
    withdraw(it->first);
    changed.insert(it->first);
    it = forget(it);
  }
  return changed;
}

std::set<capacity::InstanceKey> InstanceReconciler::withdraw_unknown(
    const std::set<ConfigurationKey>& known,
    const std::function<std::string(const ConfigurationKey&)>& why) {
  std::vector<std::pair<capacity::InstanceKey, ConfigurationKey>> orphans;
  for (const auto& [key, stored] : capacity_.instances()) {
    ConfigurationKey owner{stored.instance.namespace_name, stored.instance.configuration_name};
    if (visible_here(stored.instance) && !known.count(owner)) orphans.emplace_back(key, owner);
  }
  std::erase_if(discovery_failed_, [&](const auto& owner) { return !known.count(owner); });
  std::set<capacity::InstanceKey> withdrawn;
  for (const auto& [key, owner] : orphans) {
    spdlog::info("{}: its Configuration {}/{} {}; withdrawing", key.second, owner.first,
                 owner.second, why(owner));
    withdraw(key);
    if (auto seen = seen_.find(key); seen != seen_.end()) forget(seen);
    withdrawn.insert(key);
  }
  return withdrawn;
}

std::set<capacity::InstanceKey> InstanceReconciler::expire(Clock::time_point now) {
  std::set<capacity::InstanceKey> changed;
  for (auto key = offline_.begin(); key != offline_.end();) {
    auto seen = seen_.find(*key);  // offline_ holds only keys of seen_
    if (*seen->second.offline_until > now || holds_claims(*key)) {
      ++key;
      continue;
    }
    spdlog::info("{}: device {} did not come back; withdrawing", key->second,
                 seen->second.device.id);
    const ConfigurationKey owner = seen->second.configuration;
    withdraw(*key);
    changed.insert(*key);
    seen_.erase(seen);
    key = offline_.erase(key);
    // A copy: a write that fails in offer_waiting erases reconciled_with_'s entry.
    if (auto last = reconciled_with_.find(owner); last != reconciled_with_.end())
      offer_waiting(configuration::Configuration(last->second), snapshots_, changed);
  }
  return changed;
}

std::optional<Clock::time_point> InstanceReconciler::next_expiry() const {
  std::optional<Clock::time_point> next;
  for (const auto& key : offline_) {
    const auto& until = seen_.at(key).offline_until;
    if (!holds_claims(key) && (!next || *until < *next)) next = until;
  }
  return next;
}

std::map<capacity::InstanceKey, InstanceReconciler::Seen>::iterator InstanceReconciler::forget(
    std::map<capacity::InstanceKey, Seen>::iterator seen) {
  offline_.erase(seen->first);
  return seen_.erase(seen);
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
    unknown.id = "(not reported since the restart)";
    unknown.sharing = instance.shared ? Sharing::shared : Sharing::local;
    seen_[key] = Seen{configuration, unknown, std::nullopt, 0, true};
  }
}

void InstanceReconciler::join(const store::Instance& wanted) {
  std::map<std::string, std::string> dropped;  // by the decision that was written
  auto decide = [&](const store::Instance& current) -> std::optional<store::Instance> {
    store::Instance next = current;
    next.configuration_name = wanted.configuration_name;
    next.cdi_name = wanted.cdi_name;
    next.capacity = wanted.capacity;
    next.shared = wanted.shared;
    next.broker_properties = wanted.broker_properties;
    next.nodes.insert(node_);
    dropped = fit_claims_to_capacity(next);
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
      for (const auto& [slot, usage] : dropped)
        spdlog::warn("{}: dropping claim {}={} beyond capacity {}", wanted.name, slot, usage,
                     wanted.capacity);
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
  capacity::InstanceKey key{fresh.namespace_name, fresh.name};
  if (staging_ && !fresh.shared && !capacity_.find(key)) {
    capacity_.apply({fresh, 0});
    staged_.insert_or_assign(key, std::move(fresh));
    return true;
  }
  try {
    capacity_.apply({fresh, store_.create(fresh)});
    return true;
  } catch (const store::StoreError& e) {
    if (e.kind() != store::StoreError::Kind::already_exists) throw;
    return false;  // another node created it first: join it
  }
}

std::set<capacity::InstanceKey> InstanceReconciler::retry_withdrawals() {
  std::set<capacity::InstanceKey> tried;
  for (const auto& key : std::exchange(failed_withdrawals_, {})) {
    if (seen_.count(key)) continue;  // its device is back: this node stays
    withdraw(key);                   // noted again if it fails again
    tried.insert(key);
  }
  return tried;
}

void InstanceReconciler::withdraw(const capacity::InstanceKey& key) {
  if (staged_.erase(key)) return capacity_.forget(key);  // never written
  if (try_withdraw(key))
    failed_withdrawals_.erase(key);
  else
    failed_withdrawals_.insert(key);
}

// Takes this node out of the Instance (deleting it if no node is left);
// false if the store would not take the write.
bool InstanceReconciler::try_withdraw(const capacity::InstanceKey& key) {
  try {
    for (int attempt = 0; attempt < 16; ++attempt) {
      auto stored = store_.get(key.first, key.second);
      if (!stored) {
        capacity_.forget(key);
        return true;
      }
      store::Instance next = stored->instance;
      if (!next.nodes.erase(node_)) return true;  // not ours (any more)
      naming::release_claims_of(next.device_usage, node_);
      try {
        if (next.nodes.empty()) {
          remove_last_node_out(key, stored->revision);
        } else {
          capacity_.apply({next, store_.update(next, stored->revision)});
        }
        return true;
      } catch (const store::StoreError& e) {
        if (e.kind() != store::StoreError::Kind::conflict) throw;
      }
    }
    spdlog::error("{}: could not withdraw this node: too many concurrent changes", key.second);
  } catch (const store::StoreError& e) {
    spdlog::error("{}: could not withdraw this node: {}", key.second, e.what());
  }
  return false;
}

// Deletes the Instance this node was the last one in. Gone already is done:
// a delete sent again after its connection dropped finds it so.
void InstanceReconciler::remove_last_node_out(const capacity::InstanceKey& key, uint64_t revision) {
  try {
    store_.remove(key.first, key.second, revision);
  } catch (const store::StoreError& e) {
    if (e.kind() != store::StoreError::Kind::not_found) throw;
  }
  capacity_.forget(key);
}

const Device* InstanceReconciler::device(const capacity::InstanceKey& instance) const {
  auto it = seen_.find(instance);
  return it == seen_.end() ? nullptr : &it->second.device;
}

bool InstanceReconciler::offline(const capacity::InstanceKey& instance) const {
  auto it = seen_.find(instance);
  return it != seen_.end() && (it->second.offline_until.has_value() ||
                               discovery_failed_.count(it->second.configuration) > 0);
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
