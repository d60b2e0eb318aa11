#include "podresources_view.hpp"

namespace dowser::testkit {
namespace {

v1::PodResources& pod_entry(v1::ListPodResourcesResponse& response, const PodRef& pod) {
  for (auto& entry : *response.mutable_pod_resources()) {
    if (entry.namespace_() == pod.pod_namespace && entry.name() == pod.pod_name) return entry;
  }
  auto* entry = response.add_pod_resources();
  entry->set_namespace_(pod.pod_namespace);
  entry->set_name(pod.pod_name);
  return *entry;
}

v1::ContainerResources& container_entry(v1::PodResources& pod, const std::string& name) {
  for (auto& entry : *pod.mutable_containers()) {
    if (entry.name() == name) return entry;
  }
  auto* entry = pod.add_containers();
  entry->set_name(name);
  return *entry;
}

void add_devices(v1::ContainerDevices& devices, const std::string& resource,
                 const std::vector<std::string>& ids) {
  devices.set_resource_name(resource);
  for (const auto& id : ids) devices.add_device_ids(id);
}

}  // namespace

v1::ListPodResourcesResponse list_pod_resources(const std::vector<Allocation>& allocations) {
  v1::ListPodResourcesResponse response;
  for (const auto& allocation : allocations) {
    auto& container = container_entry(pod_entry(response, allocation.pod), allocation.container);
    add_devices(*container.add_devices(), allocation.resource, allocation.device_ids);
  }
  return response;
}

std::optional<v1::PodResources> find_pod_resources(const std::vector<Allocation>& allocations,
                                                   const PodRef& pod) {
  const auto listed = list_pod_resources(allocations);
  for (const auto& entry : listed.pod_resources()) {
    if (entry.namespace_() == pod.pod_namespace && entry.name() == pod.pod_name) return entry;
  }
  return std::nullopt;
}

v1::AllocatableResourcesResponse allocatable_resources(
    const std::map<std::string, ResourceStatus>& resources) {
  v1::AllocatableResourcesResponse response;
  for (const auto& [name, resource] : resources) {
    const auto healthy = resource.healthy_ids();
    if (!healthy.empty()) add_devices(*response.add_devices(), name, healthy);
  }
  return response;
}

}  // namespace dowser::testkit
