// A small device plugin for the tests: a real gRPC server (callback API) on a
// unix socket in the device plugin directory. It streams the device list it
// is given, answers Allocate with something derived from the ids, and records
// what the kubelet asked.
#pragma once

#include "deviceplugin/v1beta1/api.grpc.pb.h"

#include <grpcpp/server.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace dowser::testkit::test {

using DeviceList = std::vector<std::pair<std::string, std::string>>;  // id, health

v1beta1::DevicePluginOptions plugin_options(bool pre_start_required, bool preferred_allocation);

class TestDevicePlugin {
 public:
  // Starts serving <dir>/<socket_name>.
  TestDevicePlugin(const std::filesystem::path& dir, std::string socket_name,
                   v1beta1::DevicePluginOptions options = {}, DeviceList devices = {});
  ~TestDevicePlugin();
  TestDevicePlugin(const TestDevicePlugin&) = delete;
  TestDevicePlugin& operator=(const TestDevicePlugin&) = delete;

  const std::string& endpoint() const { return socket_name_; }
  std::filesystem::path socket() const { return dir_ / socket_name_; }

  // Calls Register on kubelet.sock with this plugin's endpoint.
  grpc::Status register_with(const std::filesystem::path& kubelet_socket,
                             const std::string& resource, const std::string& version = "v1beta1");

  // Sends the new complete list on every open ListAndWatch stream.
  void set_devices(DeviceList devices);
  // What GetPreferredAllocation answers; an error status makes it fail.
  void set_preferred(std::vector<std::string> ids, grpc::Status status = grpc::Status::OK);
  // Makes Allocate fail with `status` (OK restores success).
  void set_allocate_status(grpc::Status status);

  // Shuts the server down; open ListAndWatch streams end.
  void stop();

  std::size_t options_calls() const;
  std::vector<v1beta1::AllocateRequest> allocate_requests() const;
  std::vector<v1beta1::PreferredAllocationRequest> preferred_requests() const;

  // Waits until `predicate(open streams, ended streams)` holds.
  bool wait_for_streams(const std::function<bool(std::size_t open, std::size_t ended)>& predicate,
                        std::chrono::milliseconds timeout) const;

 private:
  class Service;
  class ListStream;

  void attach(ListStream* stream);
  void detach(ListStream* stream);
  v1beta1::ListAndWatchResponse current_list() const;  // callers hold mutex_

  std::filesystem::path dir_;
  std::string socket_name_;
  v1beta1::DevicePluginOptions options_;

  mutable std::mutex mutex_;
  mutable std::condition_variable streams_changed_;
  DeviceList devices_;
  std::set<ListStream*> streams_;
  std::size_t ended_streams_ = 0;
  std::size_t options_calls_ = 0;
  std::vector<std::string> preferred_;
  grpc::Status preferred_status_;
  grpc::Status allocate_status_;
  std::vector<v1beta1::AllocateRequest> allocate_requests_;
  std::vector<v1beta1::PreferredAllocationRequest> preferred_requests_;

  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace dowser::testkit::test
