// dowser::testkit::KubeletSimulator: the kubelet's device manager, as far as a
// device plugin can see it, for tests. It serves v1beta1.Registration on
// <device-plugin-dir>/kubelet.sock and v1.PodResourcesLister on its own
// socket, dials back every plugin that registers, records every ListAndWatch
// list, and admits containers the way the kubelet does (device choice,
// GetPreferredAllocation, one ContainerAllocateRequest per Allocate).
// All gRPC runs over unix sockets.
#pragma once

#include "deviceplugin/v1beta1/api.pb.h"

#include <grpcpp/support/status.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dowser::testkit {

struct KubeletSimulatorConfig {
  std::filesystem::path device_plugin_dir = "/var/lib/kubelet/device-plugins";
  std::filesystem::path podresources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  // How long Register waits for the plugin's socket to accept (the kubelet's 10 s).
  std::chrono::milliseconds dial_timeout{10'000};
};

// One device of a ListAndWatch list. Only "Healthy" counts as healthy.
struct ListedDevice {
  std::string id;
  std::string health;
  bool healthy() const { return health == "Healthy"; }
};

// What the kubelet knows about one extended resource.
struct ResourceStatus {
  std::string endpoint;  // socket file name of the newest registration; empty after a restart
  bool pre_start_required = false;
  bool get_preferred_allocation_available = false;
  bool streaming = false;          // the ListAndWatch stream is open
  std::size_t registrations = 0;   // successful Register calls, counted across restarts
  std::size_t lists_received = 0;  // ListAndWatch messages, counted across restarts
  // When the stream's reader got the last list (std::chrono::steady_clock, so
  // CLOCK_MONOTONIC on Linux), before anyone waiting for it wakes up: what a
  // latency to the kubelet ends at. Unset before the first list.
  std::chrono::steady_clock::time_point last_list_at{};
  // The last list in the order received; all Unhealthy once the stream has ended,
  // empty after a restart until the plugin registers again.
  std::vector<ListedDevice> devices;

  std::size_t capacity() const { return devices.size(); }
  std::size_t allocatable() const;
  std::vector<std::string> healthy_ids() const;  // in list order
  const ListedDevice* device(const std::string& id) const;
};

struct PodRef {
  std::string pod_namespace;
  std::string pod_name;
};

// Devices of one resource held by one container, as podresources reports them.
struct Allocation {
  PodRef pod;
  std::string container;
  std::string resource;
  std::vector<std::string> device_ids;
};

struct SimulatorStatus {
  std::map<std::string, ResourceStatus> resources;
  std::vector<Allocation> allocations;

  const ResourceStatus* resource(const std::string& name) const;
};

struct AllocationResult {
  grpc::Status status;                  // the plugin's error, or the kubelet's refusal
  std::vector<std::string> device_ids;  // what was sent in Allocate
  v1beta1::AllocateResponse response;

  bool ok() const { return status.ok(); }
};

// How the kubelet before a restart went away (KubeletSimulator::restart).
enum class KubeletExit {
  // Its kubelet.sock went with it, before the new kubelet cleans the directory.
  clean,
  // Killed: its kubelet.sock stays, refusing connections, until the new
  // kubelet's cleanup deletes it after every plugin socket (the cleanup goes
  // in directory order; this is the order hardest on a plugin, which sees its
  // socket go while a kubelet.sock is still there).
  crash,
};

class KubeletSimulator {
 public:
  // Creates the device plugin directory, removes every socket in it (as a
  // starting kubelet does) and starts serving. Throws std::runtime_error when
  // a socket cannot be served.
  explicit KubeletSimulator(KubeletSimulatorConfig config);
  ~KubeletSimulator();
  KubeletSimulator(const KubeletSimulator&) = delete;
  KubeletSimulator& operator=(const KubeletSimulator&) = delete;

  std::filesystem::path kubelet_socket() const;
  const KubeletSimulatorConfig& config() const;

  // Admits one container asking for `count` devices of `resource`. A container
  // that already holds devices of the resource gets the same ids sent again.
  // Nothing is recorded unless Allocate succeeds.
  AllocationResult allocate(const std::string& resource, const PodRef& pod,
                            const std::string& container, std::size_t count);

  // Forgets the pod's allocations; returns how many were dropped.
  std::size_t delete_pod(const PodRef& pod);

  // A kubelet restart: ListAndWatch streams close, every socket in the device
  // plugin directory is deleted, kubelet.sock is created anew. Allocations
  // survive (the kubelet checkpoints them); device lists do not.
  void restart(KubeletExit exit = KubeletExit::clean);

  // Whether podresources (List, Get) reports the pods; true at first. A
  // kubelet restarted while the API server is unreachable reports none of
  // the pods it had from there until its pod sources sync, though their
  // containers keep running with their devices: false models that.
  // Allocations and admissions are unchanged.
  void set_pods_listed(bool listed);

  // A kubelet too busy to answer in time: the next `count` Register calls
  // that succeed are answered `delay` after the plugin was dialled back and
  // registered, so a plugin's Register may time out although the kubelet
  // took its socket.
  void answer_registrations_late(std::chrono::milliseconds delay, std::size_t count);

  SimulatorStatus status() const;

  // Waits until predicate(status) holds, re-checking on every change. The
  // predicate sees the live status under the simulator's lock, without a
  // copy: it must not call the simulator. A zero timeout checks once.
  bool wait_for(const std::function<bool(const SimulatorStatus&)>& predicate,
                std::chrono::milliseconds timeout) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dowser::testkit
