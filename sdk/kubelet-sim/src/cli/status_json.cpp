#include "status_json.hpp"

#include <google/protobuf/util/json_util.h>

#include <array>

namespace dowser::testkit {
namespace {

nlohmann::json to_json(const ResourceStatus& resource) {
  nlohmann::json devices = nlohmann::json::object();
  for (const auto& device : resource.devices) devices[device.id] = device.health;
  return {
      {"endpoint", resource.endpoint},
      {"pre_start_required", resource.pre_start_required},
      {"get_preferred_allocation_available", resource.get_preferred_allocation_available},
      {"streaming", resource.streaming},
      {"registrations", resource.registrations},
      {"lists_received", resource.lists_received},
      {"capacity", resource.capacity()},
      {"allocatable", resource.allocatable()},
      {"devices", devices},
  };
}

nlohmann::json to_json(const Allocation& allocation) {
  return {
      {"pod", allocation.pod.pod_namespace + "/" + allocation.pod.pod_name},
      {"container", allocation.container},
      {"resource", allocation.resource},
      {"device_ids", allocation.device_ids},
  };
}

// Proto field names (cdi_devices, container_path), empty fields included, so
// scripts can rely on every key being present.
nlohmann::json message_json(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string text;
  if (!google::protobuf::util::MessageToJsonString(message, &text, options).ok()) return nullptr;
  return nlohmann::json::parse(text);
}

}  // namespace

nlohmann::json to_json(const SimulatorStatus& status) {
  nlohmann::json resources = nlohmann::json::object();
  for (const auto& [name, resource] : status.resources) resources[name] = to_json(resource);
  nlohmann::json allocations = nlohmann::json::array();
  for (const auto& allocation : status.allocations) allocations.push_back(to_json(allocation));
  return {{"resources", resources}, {"allocations", allocations}};
}

nlohmann::json to_json(const AllocationResult& result) {
  nlohmann::json response = nlohmann::json::object();
  if (result.response.container_responses_size() > 0) {
    response = message_json(result.response.container_responses(0));
  }
  return {{"ids", result.device_ids}, {"response", response}};
}

std::string status_code_name(grpc::StatusCode code) {
  static constexpr std::array<const char*, 17> kNames = {"OK",
                                                         "CANCELLED",
                                                         "UNKNOWN",
                                                         "INVALID_ARGUMENT",
                                                         "DEADLINE_EXCEEDED",
                                                         "NOT_FOUND",
                                                         "ALREADY_EXISTS",
                                                         "PERMISSION_DENIED",
                                                         "RESOURCE_EXHAUSTED",
                                                         "FAILED_PRECONDITION",
                                                         "ABORTED",
                                                         "OUT_OF_RANGE",
                                                         "UNIMPLEMENTED",
                                                         "INTERNAL",
                                                         "UNAVAILABLE",
                                                         "DATA_LOSS",
                                                         "UNAUTHENTICATED"};
  const auto index = static_cast<std::size_t>(code);
  return index < kNames.size() ? kNames[index] : "CODE_" + std::to_string(index);
}

}  // namespace dowser::testkit
