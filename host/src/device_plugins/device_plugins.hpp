// DevicePlugins: the kubelet's view of dowser. One gRPC server per plugin on
// its own unix socket in the kubelet's device-plugin directory; one
// Instance-level (IL) plugin per Instance visible on this node, one
// Configuration-level (CL) plugin per Configuration; registration with the
// kubelet and re-registration when the kubelet restarts.
//
// Threading: every public member runs on the core thread (the io_context
// given at construction); gRPC callbacks post their work there and answer
// from there.
#pragma once

#include "capacity_manager.hpp"

#include <dowser/handler.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace grpc {
class Channel;
class Status;
}  // namespace grpc

namespace v1beta1 {
class AllocateRequest;
class AllocateResponse;
class ContainerAllocateResponse;
class PreferredAllocationRequest;
class PreferredAllocationResponse;
}  // namespace v1beta1

namespace dowser::plugins {

// A list as advertised, shared so that publishing, metrics and the status
// page read one copy. A backend may return the same object while its list is
// unchanged, so the list need not be compared entry by entry.
using DeviceList = capacity::SharedDeviceList;

// What the daemon does for one plugin (on the core thread).
class PluginBackend {
 public:
  virtual ~PluginBackend() = default;
  // The full list to advertise now (never null).
  virtual DeviceList devices() = 0;
  // Claims and answers; throws capacity::AllocationError to refuse.
  virtual void allocate(const v1beta1::AllocateRequest& request,
                        v1beta1::AllocateResponse& response) = 0;
  virtual void preferred_allocation(const v1beta1::PreferredAllocationRequest& request,
                                    v1beta1::PreferredAllocationResponse& response) = 0;
};

struct PluginStats {
  uint64_t lists_sent = 0;
  uint64_t registrations = 0;
  bool registered = false;
  std::string last_error;
  std::string socket_name;   // the plugin's current socket in the kubelet directory
  size_t calls_waiting = 0;  // Allocate and GetPreferredAllocation calls queued for the core
};

// Where plugins live and how they reach the kubelet.
struct PluginManagerOptions {
  std::filesystem::path kubelet_dir = "/var/lib/kubelet/device-plugins";
  std::chrono::milliseconds register_timeout =
      std::chrono::seconds(15);  // > kubelet's 10 s dial-back
  std::chrono::milliseconds max_retry_delay = std::chrono::seconds(10);
};

struct PluginThreads;

// Tells a directory from one made anew at the same path.
struct DirectoryIdentity {
  uint32_t device_major = 0;
  uint32_t device_minor = 0;
  uint64_t inode = 0;
  int64_t birth_seconds = 0;
  uint32_t birth_nanoseconds = 0;
  bool operator==(const DirectoryIdentity&) const = default;
};

// How a changed list reaches the kubelet. `prompt`: a short list is written
// at once by the calling thread (a new device should reach the kubelet
// without a hand-off to another thread). `background`: the publisher thread
// writes it, so the caller (the core thread answering Allocates) does no
// more than hand it over. Long lists always go to the publisher.
enum class ListDelivery { prompt, background };

// Owns every plugin of this daemon: serving, registering, re-registering.
class PluginManager {
 public:
  PluginManager(boost::asio::io_context& core, PluginManagerOptions options);
  ~PluginManager();
  PluginManager(const PluginManager&) = delete;
  PluginManager& operator=(const PluginManager&) = delete;

  // Starts watching the kubelet directory (kubelet.sock re-created, a plugin
  // socket deleted) so every plugin re-registers with a fresh socket.
  void start();
  // Serves a plugin for resource_name (already validated) and registers it
  // once its server is up; the socket is bound off the core thread. A server
  // that cannot start is logged, its stats say why, and it is tried again
  // with the registration's back-off. The backend must outlive the plugin.
  void add(const std::string& resource_name, PluginBackend& backend);
  // Stops the plugin: streams end, the server stops, the socket goes.
  void remove(const std::string& resource_name);
  // The backend's list may have changed: push it to the kubelet if it did.
  void changed(const std::string& resource_name, ListDelivery delivery = ListDelivery::background);
  void changed_all();
  bool has(const std::string& resource_name) const;
  std::vector<std::string> resources() const;
  std::optional<PluginStats> stats(const std::string& resource_name) const;
  // Why the kubelet cannot be reached now, if it cannot: kubelet.sock is
  // missing, or refuses connections (a killed kubelet leaves it). A plugin
  // registered with it stays registered in its stats; this tells the truth.
  // One non-blocking connect, for readiness probes.
  std::optional<std::string> kubelet_unreachable() const;
  // Called on the core thread after every answer to a registration (its
  // stats say whether it succeeded), for metrics.
  using RegistrationObserver =
      std::function<void(const std::string& resource_name, const PluginStats& stats)>;
  void set_registration_observer(RegistrationObserver observer) {
    registration_observer_ = std::move(observer);
  }
  // Called on the core thread when the kubelet directory, deleted, is there
  // again, before the plugins are served in it anew (to take its lock again).
  void set_directory_observer(std::function<void()> observer) {
    directory_observer_ = std::move(observer);
  }
  // Stops every plugin (removing sockets).
  void stop_all();
  // A file in the kubelet directory was created or deleted. The directory
  // watcher calls this; tests call it to replay an order of events the
  // kernel cannot be made to deliver on demand.
  void kubelet_dir_changed(const std::string& file_name, bool created);
  // The kernel dropped the directory's events (its queue overflowed): what
  // they would have told is looked for instead.
  void kubelet_dir_events_lost();

 private:
  struct Watcher;
  struct Entry;
  void register_plugin(const std::string& resource_name, std::chrono::milliseconds delay);
  void send_registration(const std::string& resource_name, uint64_t generation);
  void registration_done(const std::string& resource_name, uint64_t generation,
                         const grpc::Status& status);
  void retry_registration(const std::string& resource_name, Entry& entry);
  void serve(const std::string& resource_name, Entry& entry);  // on a fresh socket
  void reregister_all(const std::string& why);
  void kubelet_dir_recreated(const DirectoryIdentity& identity);
  // Registers the plugin again at once, with a fresh back-off; new_socket:
  // served on a fresh socket first (the kubelet saw the old one).
  void register_anew(const std::string& resource_name, Entry& entry, bool new_socket);
  void on_socket_deleted(const std::string& file_name);
  // Whether the kubelet directory is still the one start(), or the last
  // re-creation handled, serves in: between a deletion and the handling of
  // its re-creation no plugin is served or registered (the re-creation
  // does that for all, after the directory observer).
  bool in_served_directory() const;
  std::shared_ptr<grpc::Channel> kubelet_channel();
  void registration_answered();

  boost::asio::io_context& core_;
  PluginManagerOptions options_;
  std::unique_ptr<PluginThreads> threads_;  // outlives every plugin's server
  std::map<std::string, std::unique_ptr<Entry>> plugins_;
  std::unique_ptr<Watcher> watcher_;
  std::optional<DirectoryIdentity> served_directory_;
  class CoreLink;
  std::shared_ptr<CoreLink> link_;  // what other threads post through
  RegistrationObserver registration_observer_;
  std::function<void()> directory_observer_;
  // Every registration goes over one connection to kubelet.sock: a channel
  // per registration cost tens of KB each while thousands were in flight.
  std::shared_ptr<grpc::Channel> kubelet_channel_;
  size_t registrations_in_flight_ = 0;
  struct Registrations;
  std::shared_ptr<Registrations> registrations_;  // calls a stopping manager ends first
  size_t answered_since_trim_ = 0;
  // Registration attempts are numbered across all plugins, not per plugin: a
  // plugin removed and added again while its Register was in flight must
  // not take that call's answer for its own.
  uint64_t last_generation_ = 0;
};

// The IL plugin of one Instance: its devices are the Instance's slots.
class InstancePluginBackend : public PluginBackend {
 public:
  InstancePluginBackend(capacity::CapacityManager& capacity, const capacity::DeviceCatalog& catalog,
                        capacity::InstanceKey instance);
  DeviceList devices() override;
  void allocate(const v1beta1::AllocateRequest& request,
                v1beta1::AllocateResponse& response) override;
  void preferred_allocation(const v1beta1::PreferredAllocationRequest& request,
                            v1beta1::PreferredAllocationResponse& response) override;

 private:
  capacity::CapacityManager& capacity_;
  const capacity::DeviceCatalog& catalog_;
  capacity::InstanceKey instance_;
};

// The CL plugin of one Configuration: virtual devices over its Instances.
// Its table is kept up to date one Instance at a time: the daemon says which
// Instances may have changed, and only those are read again.
class ConfigurationPluginBackend : public PluginBackend {
 public:
  ConfigurationPluginBackend(capacity::CapacityManager& capacity,
                             const capacity::DeviceCatalog& catalog, std::string namespace_name,
                             std::string configuration, capacity::UniqueInstances policy);
  void set_policy(capacity::UniqueInstances policy) { table_.set_policy(policy); }
  // These Instances (of any Configuration) may have changed: claims, offline
  // state, visibility, gone. Read again before the table is next used.
  void instances_changed(const std::set<capacity::InstanceKey>& instances);
  // The vdev ids the kubelet reports in use with no claim on them (see
  // VirtualDeviceTable::set_held_without_claim).
  void set_held_without_claim(const std::set<std::string>& vdevs);
  DeviceList devices() override;
  void allocate(const v1beta1::AllocateRequest& request,
                v1beta1::AllocateResponse& response) override;
  void preferred_allocation(const v1beta1::PreferredAllocationRequest& request,
                            v1beta1::PreferredAllocationResponse& response) override;

 private:
  void refresh();
  void reread(const std::string& instance);

  capacity::CapacityManager& capacity_;
  const capacity::DeviceCatalog& catalog_;
  std::string namespace_;
  std::string configuration_;
  capacity::VirtualDeviceTable table_;
  std::set<std::string> stale_;  // Instance names to read again
  bool all_stale_ = true;        // read every Instance of the Configuration
};

// What an allocated slot brings into a container.
struct SlotGrant {
  std::string instance;  // Instance name
  uint32_t slot = 0;
  std::string usage;                               // deviceUsage value written for it
  std::map<std::string, std::string> environment;  // Instance brokerProperties
  std::vector<Mount> mounts;
  std::vector<DeviceNode> device_nodes;
};

// One ContainerAllocateResponse for one container request: every grant's
// environment suffixed with _<HASH> (the Instance's digest, upper case),
// plus unsuffixed what every grant has with the same value; mounts and device nodes
// of all (duplicates once); annotation akri.agent.slot-<slot> = usage.
void fill_container_response(const std::vector<SlotGrant>& grants,
                             v1beta1::ContainerAllocateResponse& response);

// The ListAndWatchResponse for devices, serialized: the bytes protobuf
// writes for the message with one Device {ID, health} per entry, in order.
// Written straight from the list: a CL plugin lists thousands of devices,
// and building a message of them first took ten times as long
// (bench/plugins/list_encoding_bench).
std::string serialized_device_list(const std::vector<capacity::PluginDevice>& devices);

}  // namespace dowser::plugins
