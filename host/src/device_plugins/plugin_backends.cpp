// What IL and CL plugins advertise and how they answer Allocate and
// GetPreferredAllocation, over the shared CapacityManager.
#include "device_plugins.hpp"

#include "deviceplugin/v1beta1/api.pb.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

namespace dowser::plugins {
namespace {

std::vector<std::vector<std::string>> requested_ids(const v1beta1::AllocateRequest& request) {
  std::vector<std::vector<std::string>> ids;
  for (const auto& container : request.container_requests())
    ids.emplace_back(container.devices_ids().begin(), container.devices_ids().end());
  return ids;
}

SlotGrant grant_for(const capacity::CapacityManager& capacity,
                    const capacity::DeviceCatalog& catalog, const std::string& namespace_name,
                    const std::string& instance, uint32_t slot) {
  SlotGrant grant;
  grant.instance = instance;
  grant.slot = slot;
  capacity::InstanceKey key{namespace_name, instance};
  if (const auto* stored = capacity.find(key)) {
    grant.environment = stored->instance.broker_properties;
    auto usage = stored->instance.device_usage.find(naming::slot_name(instance, slot));
    if (usage != stored->instance.device_usage.end()) grant.usage = usage->second;
  }
  if (const auto* device = catalog.device(key)) {
    grant.mounts = device->mounts;
    grant.device_nodes = device->device_nodes;
  }
  return grant;
}

void respond(const capacity::CapacityManager& capacity, const capacity::DeviceCatalog& catalog,
             const std::string& namespace_name,
             const std::vector<capacity::ContainerClaims>& claims,
             v1beta1::AllocateResponse& response) {
  for (const auto& container : claims) {
    std::vector<SlotGrant> grants;
    grants.reserve(container.size());
    for (const auto& [instance, slot] : container)
      grants.push_back(grant_for(capacity, catalog, namespace_name, instance, slot));
    fill_container_response(grants, *response.add_container_responses());
  }
}

// The kubelet's must-include ids first, then its other ids in order, as
// many as it asked for, skipping what `acceptable` refuses.
template <typename Acceptable>
void prefer(const v1beta1::ContainerPreferredAllocationRequest& request,
            v1beta1::ContainerPreferredAllocationResponse& answer, Acceptable&& acceptable) {
  std::set<std::string> chosen(request.must_include_deviceids().begin(),
                               request.must_include_deviceids().end());
  for (const auto& id : chosen) answer.add_deviceids(id);
  for (const auto& id : request.available_deviceids()) {
    if (answer.deviceids_size() >= request.allocation_size()) break;
    if (chosen.count(id) || !acceptable(id)) continue;
    chosen.insert(id);
    answer.add_deviceids(id);
  }
}

// The variables every grant has with the same value: they may also go
// unsuffixed, as no device would read another's value under the plain name.
// Everything with one device (or slots of one); the Configuration's
// brokerProperties (which win a clash with a device's) with several.
std::map<std::string, std::string> agreed_environment(const std::vector<SlotGrant>& grants) {
  if (grants.empty()) return {};
  std::map<std::string, std::string> agreed = grants.front().environment;
  for (const auto& grant : grants) {
    std::erase_if(agreed, [&](const auto& entry) {
      auto value = grant.environment.find(entry.first);
      return value == grant.environment.end() || value->second != entry.second;
    });
  }
  return agreed;
}

bool any_id(const std::string& /*id*/) { return true; }

// What a container's answer may still take under uniqueInstances Required.
// Held vdevs name their Instance; Allocate binds them first, then each
// placeholder to a candidate Instance the container does not use yet. So a
// held vdev may not share an Instance with another, nor take the last
// candidate a placeholder already counts on.
class DistinctInstances {
 public:
  explicit DistinctInstances(const capacity::VirtualDeviceTable& table) : table_(table) {
    for (const auto& candidate : table.candidates()) unbound_candidates_.insert(candidate.instance);
  }

  bool fits(const std::string& id) const {
    const auto* slot = held(id);
    if (!slot) return placeholders_ < unbound_candidates_.size();
    if (used_.count(slot->instance)) return false;
    return !unbound_candidates_.count(slot->instance) || placeholders_ < unbound_candidates_.size();
  }

  void take(const std::string& id) {
    if (const auto* slot = held(id)) {
      used_.insert(slot->instance);
      unbound_candidates_.erase(slot->instance);
    } else {
      ++placeholders_;
    }
  }

 private:
  const capacity::ClaimedSlot* held(const std::string& id) const {
    auto found = table_.claimed().find(id);
    return found == table_.claimed().end() ? nullptr : &found->second;
  }

  const capacity::VirtualDeviceTable& table_;
  std::set<std::string> used_;                // Instances of held vdevs taken
  std::set<std::string> unbound_candidates_;  // candidates no held vdev taken uses
  size_t placeholders_ = 0;
};

}  // namespace

// ---- response contents ------------------------------------------------------------

void fill_container_response(const std::vector<SlotGrant>& grants,
                             v1beta1::ContainerAllocateResponse& response) {
  std::set<std::pair<std::string, std::string>> mounts_seen, nodes_seen;
  for (const auto& [key, value] : agreed_environment(grants))
    (*response.mutable_envs())[key] = value;
  for (const auto& grant : grants) {
    std::string hash = grant.instance.substr(grant.instance.rfind('-') + 1);
    std::transform(hash.begin(), hash.end(), hash.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    for (const auto& [key, value] : grant.environment) {
      std::string suffixed = key;
      suffixed.append("_").append(hash);
      (*response.mutable_envs())[suffixed] = value;
    }
    for (const auto& mount : grant.mounts) {
      if (!mounts_seen.emplace(mount.container_path, mount.host_path).second) continue;
      auto* entry = response.add_mounts();
      entry->set_container_path(mount.container_path);
      entry->set_host_path(mount.host_path);
      entry->set_read_only(mount.read_only);
    }
    for (const auto& node : grant.device_nodes) {
      if (!nodes_seen.emplace(node.container_path, node.host_path).second) continue;
      auto* entry = response.add_devices();
      entry->set_container_path(node.container_path);
      entry->set_host_path(node.host_path.empty() ? node.container_path : node.host_path);
      entry->set_permissions(node.permissions);
    }
    (*response.mutable_annotations())["akri.agent.slot-" +
                                      naming::slot_name(grant.instance, grant.slot)] = grant.usage;
  }
}

// ---- Instance-level ---------------------------------------------------------------

InstancePluginBackend::InstancePluginBackend(capacity::CapacityManager& capacity,
                                             const capacity::DeviceCatalog& catalog,
                                             capacity::InstanceKey instance)
    : capacity_(capacity), catalog_(catalog), instance_(std::move(instance)) {}

DeviceList InstancePluginBackend::devices() {
  const auto* stored = capacity_.find(instance_);
  if (!stored) return std::make_shared<std::vector<capacity::PluginDevice>>();
  auto slots = capacity::InstanceSlots::decode(stored->instance, catalog_.offline(instance_));
  return std::make_shared<std::vector<capacity::PluginDevice>>(
      capacity::instance_level_devices(slots, capacity_.node()));
}

void InstancePluginBackend::allocate(const v1beta1::AllocateRequest& request,
                                     v1beta1::AllocateResponse& response) {
  auto claims = capacity_.allocate_instance_level(instance_, requested_ids(request),
                                                  catalog_.offline(instance_));
  respond(capacity_, catalog_, instance_.first, claims, response);
}

void InstancePluginBackend::preferred_allocation(const v1beta1::PreferredAllocationRequest& request,
                                                 v1beta1::PreferredAllocationResponse& response) {
  // Every slot of one Instance is the same device: any healthy ones will do.
  for (const auto& container : request.container_requests())
    prefer(container, *response.add_container_responses(), any_id);
}

// ---- Configuration-level ------------------------------------------------------------

ConfigurationPluginBackend::ConfigurationPluginBackend(capacity::CapacityManager& capacity,
                                                       const capacity::DeviceCatalog& catalog,
                                                       std::string namespace_name,
                                                       std::string configuration,
                                                       capacity::UniqueInstances policy)
    : capacity_(capacity),
      catalog_(catalog),
      namespace_(std::move(namespace_name)),
      configuration_(std::move(configuration)),
      table_(capacity.node(), policy) {}

void ConfigurationPluginBackend::instances_changed(
    const std::set<capacity::InstanceKey>& instances) {
  for (const auto& key : instances) {
    if (key.first != namespace_) continue;
    const auto* stored = capacity_.find(key);
    bool ours = stored && stored->instance.configuration_name == configuration_;
    if (ours || table_.contains(key.second)) stale_.insert(key.second);
  }
}

void ConfigurationPluginBackend::reread(const std::string& instance) {
  capacity::InstanceKey key{namespace_, instance};
  const auto* stored = capacity_.find(key);
  if (!stored || !catalog_.is_instance_of(key, configuration_)) {
    table_.remove(instance);
    return;
  }
  table_.put(capacity::InstanceSlots::decode(stored->instance, catalog_.offline(key)));
}

void ConfigurationPluginBackend::refresh() {
  if (std::exchange(all_stale_, false)) {
    for (const auto& key : catalog_.instances_of(namespace_, configuration_))
      stale_.insert(key.second);
    for (auto& name : table_.instance_names()) stale_.insert(std::move(name));
  }
  for (const auto& name : std::exchange(stale_, {})) reread(name);
}

void ConfigurationPluginBackend::set_held_without_claim(const std::set<std::string>& vdevs) {
  refresh();
  table_.set_held_without_claim(vdevs);
}

DeviceList ConfigurationPluginBackend::devices() {
  refresh();
  return table_.shared_devices();
}

void ConfigurationPluginBackend::allocate(const v1beta1::AllocateRequest& request,
                                          v1beta1::AllocateResponse& response) {
  refresh();
  auto claims = capacity_.allocate_configuration_level(namespace_, requested_ids(request), table_,
                                                       table_.policy());
  respond(capacity_, catalog_, namespace_, claims, response);
}

void ConfigurationPluginBackend::preferred_allocation(
    const v1beta1::PreferredAllocationRequest& request,
    v1beta1::PreferredAllocationResponse& response) {
  refresh();
  for (const auto& container : request.container_requests()) {
    if (table_.policy() == capacity::UniqueInstances::preferred) {
      prefer(container, *response.add_container_responses(), any_id);
      continue;
    }
    DistinctInstances distinct(table_);
    for (const auto& id : container.must_include_deviceids()) distinct.take(id);
    prefer(container, *response.add_container_responses(), [&](const std::string& id) {
      if (!distinct.fits(id)) return false;
      distinct.take(id);
      return true;
    });
  }
}

}  // namespace dowser::plugins
