// The simulator's state as the kubelet's podresources API reports it.
#pragma once

#include "dowser/kubelet_sim.hpp"
#include "podresources/v1/api.pb.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dowser::testkit {

// One PodResources per pod, one ContainerResources per container, one
// ContainerDevices per resource the container holds.
v1::ListPodResourcesResponse list_pod_resources(const std::vector<Allocation>& allocations);

// The pod as List reports it; nullopt when it holds no devices.
std::optional<v1::PodResources> find_pod_resources(const std::vector<Allocation>& allocations,
                                                   const PodRef& pod);

// The healthy devices of every resource.
v1::AllocatableResourcesResponse allocatable_resources(
    const std::map<std::string, ResourceStatus>& resources);

}  // namespace dowser::testkit
