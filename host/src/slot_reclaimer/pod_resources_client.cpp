#include "slot_reclaimer.hpp"

#include "podresources/v1/api.grpc.pb.h"

#include <grpcpp/grpcpp.h>

namespace dowser::reclaim {
namespace {

DevicesInUse devices_in_use(const v1::ListPodResourcesResponse& response) {
  DevicesInUse devices;
  for (const auto& pod : response.pod_resources()) {
    for (const auto& container : pod.containers()) {
      for (const auto& entry : container.devices()) {
        for (const auto& id : entry.device_ids()) devices.emplace(entry.resource_name(), id);
      }
    }
  }
  return devices;
}

}  // namespace

std::optional<DevicesInUse> PodResourcesClient::list_in_use(std::chrono::milliseconds timeout,
                                                            std::string* error,
                                                            const std::stop_token& stop) const {
  const std::string target = "unix:" + socket_.string();
  auto stub = v1::PodResourcesLister::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  // Safe before the call starts too: gRPC then cancels it as it starts.
  std::stop_callback cancel_on_stop(stop, [&context] { context.TryCancel(); });

  v1::ListPodResourcesResponse response;
  const grpc::Status status = stub->List(&context, v1::ListPodResourcesRequest{}, &response);
  if (!status.ok()) {
    if (error != nullptr) {
      *error = "List on " + target + " failed (gRPC code " +
               std::to_string(static_cast<int>(status.error_code())) +
               "): " + status.error_message();
    }
    return std::nullopt;
  }
  return devices_in_use(response);
}

}  // namespace dowser::reclaim
