#include "dowser/kubelet_sim.hpp"

#include "device_choice.hpp"
#include "plugin_connection.hpp"
#include "podresources/v1/api.grpc.pb.h"
#include "podresources_view.hpp"
#include "resource_name.hpp"

#include <absl/synchronization/mutex.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

namespace dowser::testkit {

std::size_t ResourceStatus::allocatable() const {
  return static_cast<std::size_t>(
      std::count_if(devices.begin(), devices.end(), [](const auto& d) { return d.healthy(); }));
}

std::vector<std::string> ResourceStatus::healthy_ids() const {
  std::vector<std::string> ids;
  for (const auto& device : devices) {
    if (device.healthy()) ids.push_back(device.id);
  }
  return ids;
}

const ListedDevice* ResourceStatus::device(const std::string& id) const {
  auto found =
      std::find_if(devices.begin(), devices.end(), [&](const auto& d) { return d.id == id; });
  return found == devices.end() ? nullptr : &*found;
}

const ResourceStatus* SimulatorStatus::resource(const std::string& name) const {
  auto found = resources.find(name);
  return found == resources.end() ? nullptr : &found->second;
}

namespace {

constexpr std::string_view kSupportedVersion = "v1beta1";
constexpr std::string_view kUnhealthy = "Unhealthy";

bool same_pod(const PodRef& a, const PodRef& b) {
  return a.pod_namespace == b.pod_namespace && a.pod_name == b.pod_name;
}

std::string pod_name(const PodRef& pod) { return pod.pod_namespace + "/" + pod.pod_name; }

std::unique_ptr<grpc::Server> serve_unix(const std::filesystem::path& socket,
                                         grpc::Service& service) {
  std::filesystem::remove(socket);  // a stale socket would make bind fail
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket.string(), grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  if (!server) throw std::runtime_error("cannot serve gRPC on " + socket.string());
  return server;
}

void stop_server(std::unique_ptr<grpc::Server>& server) {
  if (!server) return;
  server->Shutdown(std::chrono::system_clock::now());  // cancels calls in flight
  server->Wait();
  server.reset();
}

// What the kubelet's CleanupPluginDirectory does: every socket goes, other
// files stay. `last` (a stale kubelet.sock) goes after the others.
void remove_sockets(const std::filesystem::path& dir, const std::filesystem::path& last) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path() != last &&
        entry.symlink_status(error).type() == std::filesystem::file_type::socket) {
      std::filesystem::remove(entry.path(), error);
    }
  }
  std::filesystem::remove(last, error);
}

}  // namespace

struct KubeletSimulator::Impl {
  // The plugin a registered resource came from (its status is in `state`).
  struct Plugin {
    std::shared_ptr<PluginConnection> connection;  // null after a restart
    std::uint64_t connection_id = 0;               // 0: none
  };

  // What admission needs from the shared state, copied under the lock so the
  // plugin can be called without it.
  struct AdmissionPlan {
    std::shared_ptr<PluginConnection> connection;
    std::vector<std::string> available;     // healthy and held by no container
    std::vector<std::string> already_held;  // ids this container holds; sent again
  };

  // One Register call. The kubelet dials back inside Register, so it answers
  // only after that; the dial runs on gRPC's threads, as many at once as
  // plugins register, without a thread each.
  class RegisterCall final : public grpc::ServerUnaryReactor {
   public:
    RegisterCall(Impl& impl, const v1beta1::RegisterRequest& request) {
      if (auto refusal = registration_refusal(request)) {
        spdlog::warn("registration of {} refused: {}", request.resource_name(), *refusal);
        Finish({grpc::StatusCode::INVALID_ARGUMENT, *refusal});
        return;
      }
      // OnDone cannot come before the handler returns this, even if the
      // dial is answered first: setting dial_ afterwards is safe.
      auto dial = PluginConnection::dial(
          impl.config.device_plugin_dir / request.endpoint(), impl.config.dial_timeout,
          impl.grpc_token,
          [this, &impl, request](const grpc::Status& status,
                                 const std::shared_ptr<PluginConnection>& connection) {
            answer(impl.dialled(request, status, connection), impl.late_answer_delay(status));
          });
      std::lock_guard lock(mutex_);
      dial_ = std::move(dial);
    }
    // A kubelet that stops does not wait for plugins that do not answer.
    void OnCancel() override {
      std::shared_ptr<grpc::ClientContext> dial;
      {
        std::lock_guard lock(mutex_);
        dial = dial_;
      }
      if (dial) dial->TryCancel();  // not under mutex_: the answer may run right here
    }
    void OnDone() override { delete this; }

   private:
    // A late answer comes from a thread of its own: the server's shutdown
    // waits for it (delay at most), as it waits for every call.
    void answer(const grpc::Status& status, std::chrono::milliseconds delay) {
      if (delay.count() == 0) return Finish(status);
      std::thread([this, status, delay] {
        std::this_thread::sleep_for(delay);
        Finish(status);
      }).detach();
    }

    std::mutex mutex_;
    std::shared_ptr<grpc::ClientContext> dial_;  // cancelling it once answered does nothing
  };

  class RegistrationService final : public v1beta1::Registration::CallbackService {
   public:
    explicit RegistrationService(Impl& impl) : impl_(impl) {}
    grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext*,
                                       const v1beta1::RegisterRequest* request,
                                       v1beta1::Empty*) override {
      return new RegisterCall(impl_, *request);
    }

   private:
    Impl& impl_;
  };

  // A callback service, like every other gRPC user here, and it outlives
  // every plugin channel: gRPC 1.51 may run callbacks on a completion queue
  // shared by every server and channel that uses them, and frees that queue
  // twice if the last of those goes away on the queue's own thread, as a
  // plugin channel freed at the end of its ListAndWatch stream or its dial
  // would. Hence grpc_token, waited for before this server stops.
  class PodResourcesService final : public v1::PodResourcesLister::CallbackService {
   public:
    explicit PodResourcesService(Impl& impl) : impl_(impl) {}
    grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* context,
                                   const v1::ListPodResourcesRequest*,
                                   v1::ListPodResourcesResponse* response) override {
      if (impl_.pods_listed) *response = list_pod_resources(impl_.status().allocations);
      return answer(context, grpc::Status::OK);
    }
    grpc::ServerUnaryReactor* GetAllocatableResources(
        grpc::CallbackServerContext* context, const v1::AllocatableResourcesRequest*,
        v1::AllocatableResourcesResponse* response) override {
      *response = allocatable_resources(impl_.status().resources);
      return answer(context, grpc::Status::OK);
    }
    grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context,
                                  const v1::GetPodResourcesRequest* request,
                                  v1::GetPodResourcesResponse* response) override {
      const PodRef pod{request->pod_namespace(), request->pod_name()};
      auto found =
          impl_.pods_listed ? find_pod_resources(impl_.status().allocations, pod) : std::nullopt;
      if (!found) {
        return answer(context,
                      {grpc::StatusCode::NOT_FOUND, "pod " + pod_name(pod) + " not found"});
      }
      *response->mutable_pod_resources() = std::move(*found);
      return answer(context, grpc::Status::OK);
    }

   private:
    static grpc::ServerUnaryReactor* answer(grpc::CallbackServerContext* context,
                                            const grpc::Status& status) {
      auto* reactor = context->DefaultReactor();
      reactor->Finish(status);
      return reactor;
    }

    Impl& impl_;
  };

  explicit Impl(KubeletSimulatorConfig config_in)
      : config(std::move(config_in)),
        kubelet_socket(config.device_plugin_dir / "kubelet.sock"),
        served_socket(config.device_plugin_dir / ".kubelet-sim" / "kubelet.sock"),
        grpc_token(std::make_shared<const TokenRelease>(*this)) {
    // Debian's abseil tracks lock order across every mutex gRPC creates (it
    // is built without NDEBUG): with thousands of plugins, that is most of
    // the work. The kubelet has no such cost.
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    if (std::filesystem::create_directories(config.device_plugin_dir)) {
      std::filesystem::permissions(config.device_plugin_dir, std::filesystem::perms(0750));
    }
    std::filesystem::create_directories(served_socket.parent_path());
    serve_registration();
    std::filesystem::create_directories(config.podresources_socket.parent_path());
    podresources_server = serve_unix(config.podresources_socket, podresources_service);
    spdlog::info("kubelet simulator: registration on {}, podresources on {}",
                 kubelet_socket.string(), config.podresources_socket.string());
  }

  ~Impl() {
    stop_server(registration_server);
    std::error_code ignored;
    std::filesystem::remove(kubelet_socket, ignored);
    std::filesystem::remove_all(served_socket.parent_path(), ignored);
    close_all();
    // A stream's end is handled before its reader lets go of the channel,
    // and a dial's answer before gRPC lets go of the dial.
    wait_for_grpc_token();
    stop_server(podresources_server);  // last: see PodResourcesService
  }

  // Runs when the last copy of grpc_token goes, on whichever thread drops it.
  struct TokenRelease {
    explicit TokenRelease(Impl& owner) : impl(owner) {}
    TokenRelease(const TokenRelease&) = delete;
    TokenRelease& operator=(const TokenRelease&) = delete;
    ~TokenRelease() {
      std::lock_guard lock(impl.mutex);
      impl.grpc_token_released = true;
      impl.changed.notify_all();  // under the lock: the waiter destroys `changed` next
    }
    Impl& impl;
  };

  // Drops the simulator's own copy and waits until every other one is gone.
  void wait_for_grpc_token() {
    grpc_token.reset();
    std::unique_lock lock(mutex);
    changed.wait(lock, [this] { return grpc_token_released; });
  }

  // A starting kubelet: clean the directory, then listen on a new kubelet.sock.
  // gRPC deletes a unix socket when its server stops, which a killed kubelet
  // never does: so it serves a socket in a directory of its own, and
  // kubelet.sock is a second name for it, which stays until removed.
  void serve_registration() {
    remove_sockets(config.device_plugin_dir, kubelet_socket);
    registration_service = std::make_unique<RegistrationService>(*this);
    registration_server = serve_unix(served_socket, *registration_service);
    std::filesystem::create_hard_link(served_socket, kubelet_socket);
  }

  // The end of a Register call's dial-back: Register's answer.
  grpc::Status dialled(const v1beta1::RegisterRequest& request, const grpc::Status& status,
                       const std::shared_ptr<PluginConnection>& connection) {
    if (!status.ok()) {
      spdlog::warn("registration of {} failed: {}", request.resource_name(),
                   status.error_message());
      return status;
    }
    auto replaced = install(request.resource_name(), request.endpoint(), connection);
    if (replaced) replaced->close();
    spdlog::info("registered {} at {}", request.resource_name(), request.endpoint());
    return grpc::Status::OK;
  }

  static std::optional<std::string> registration_refusal(const v1beta1::RegisterRequest& request) {
    if (request.version() != kSupportedVersion) {
      return "unsupported device plugin API version \"" + request.version() +
             "\"; supported: v1beta1";
    }
    if (auto error = extended_resource_name_error(request.resource_name())) {
      return "invalid extended resource name \"" + request.resource_name() + "\": " + *error;
    }
    return std::nullopt;
  }

  // The newest registration of a resource wins; returns the connection it replaces.
  std::shared_ptr<PluginConnection> install(const std::string& resource,
                                            const std::string& endpoint,
                                            const std::shared_ptr<PluginConnection>& connection) {
    std::shared_ptr<PluginConnection> replaced;
    std::uint64_t id = 0;
    {
      std::lock_guard lock(mutex);
      auto& plugin = plugins[resource];
      replaced = std::exchange(plugin.connection, connection);
      id = plugin.connection_id = ++last_connection_id;
      ++open_streams;
      auto& status = state.resources[resource];
      status.endpoint = endpoint;
      status.pre_start_required = connection->options().pre_start_required();
      status.get_preferred_allocation_available =
          connection->options().get_preferred_allocation_available();
      status.streaming = true;
      ++status.registrations;
    }
    changed.notify_all();
    connection->watch([this, resource, id](const auto& list) { record_list(resource, id, list); },
                      [this, resource, id] {
                        record_stream_end(resource, id);
                        stream_closed();
                      });
    return replaced;
  }

  // Runs `update` on the resource's status if `connection_id` is still its
  // plugin; lists from a replaced or closed connection no longer count.
  template <typename Update>
  void update_if_current(const std::string& resource, std::uint64_t connection_id, Update update) {
    {
      std::lock_guard lock(mutex);
      auto found = plugins.find(resource);
      if (found == plugins.end() || found->second.connection_id != connection_id) return;
      update(state.resources.at(resource));
    }
    changed.notify_all();
  }

  void record_list(const std::string& resource, std::uint64_t connection_id,
                   const v1beta1::ListAndWatchResponse& list) {
    const auto received = std::chrono::steady_clock::now();
    update_if_current(resource, connection_id, [&](ResourceStatus& status) {
      status.last_list_at = received;
      status.devices.clear();  // every message replaces the whole list
      for (const auto& device : list.devices())
        status.devices.push_back({device.id(), device.health()});
      ++status.lists_received;
      spdlog::debug("{}: list {} with {} devices, {} healthy", resource, status.lists_received,
                    status.capacity(), status.allocatable());
    });
  }

  // As the kubelet's PluginDisconnected: capacity stays, allocatable drops to 0.
  void record_stream_end(const std::string& resource, std::uint64_t connection_id) {
    update_if_current(resource, connection_id, [&](ResourceStatus& status) {
      status.streaming = false;
      for (auto& device : status.devices) device.health = kUnhealthy;
      spdlog::info("{}: ListAndWatch ended, all devices unhealthy", resource);
    });
  }

  AllocationResult allocate(const std::string& resource, const PodRef& pod,
                            const std::string& container, std::size_t count) {
    std::lock_guard admission(admission_mutex);
    AllocationResult result;
    result.status = admit(resource, pod, container, count, result);
    if (!result.status.ok()) {
      spdlog::warn("allocation of {} {} for container {} of {} failed: {}", count, resource,
                   container, pod_name(pod), result.status.error_message());
      return result;
    }
    record_allocation({pod, container, resource, result.device_ids});
    return result;
  }

  // Checks, device choice, then the plugin's Allocate: the first failure wins.
  grpc::Status admit(const std::string& resource, const PodRef& pod, const std::string& container,
                     std::size_t count, AllocationResult& result) {
    AdmissionPlan plan;
    grpc::Status status = plan_admission(resource, pod, container, count, plan);
    if (!status.ok()) return status;
    status = choose_ids(plan, count, result.device_ids);
    if (!status.ok()) return status;
    return call_allocate(*plan.connection, result.device_ids, result.response);
  }

  // The kubelet's devicesToAllocate checks, in its order and with its messages.
  grpc::Status plan_admission(const std::string& resource, const PodRef& pod,
                              const std::string& container, std::size_t count,
                              AdmissionPlan& plan) {
    std::lock_guard lock(mutex);
    auto found = state.resources.find(resource);
    if (found == state.resources.end()) {
      return {grpc::StatusCode::NOT_FOUND, "cannot allocate unregistered device " + resource};
    }
    const auto& status = found->second;
    const auto healthy = status.healthy_ids();
    if (healthy.empty()) {
      return {grpc::StatusCode::FAILED_PRECONDITION,
              "no healthy devices present; cannot allocate unhealthy devices " + resource};
    }
    if (count == 0) return {grpc::StatusCode::INVALID_ARGUMENT, "no devices requested"};
    plan.connection = plugins.at(resource).connection;
    if (const auto* held = held_by(pod, container, resource)) {
      return plan_reuse(status, *held, count, plan);
    }
    std::set<std::string> taken;
    for (const auto& allocation : state.allocations) {
      if (allocation.resource == resource)
        taken.insert(allocation.device_ids.begin(), allocation.device_ids.end());
    }
    for (const auto& id : healthy) {
      if (!taken.contains(id)) plan.available.push_back(id);
    }
    if (plan.available.size() < count) {
      return {grpc::StatusCode::RESOURCE_EXHAUSTED,
              "requested number of devices unavailable for " + resource + ". Requested: " +
                  std::to_string(count) + ", Available: " + std::to_string(plan.available.size())};
    }
    return grpc::Status::OK;
  }

  // A container admitted again (after a restart without a cached response)
  // gets the devices it already holds, if they are still healthy.
  static grpc::Status plan_reuse(const ResourceStatus& status, const Allocation& held,
                                 std::size_t count, AdmissionPlan& plan) {
    if (held.device_ids.size() != count) {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "container changed its request for " + held.resource + " from " +
                  std::to_string(held.device_ids.size()) + " to " + std::to_string(count)};
    }
    for (const auto& id : held.device_ids) {
      const auto* device = status.device(id);
      if (!device || !device->healthy()) {
        return {grpc::StatusCode::FAILED_PRECONDITION,
                "previously allocated devices are no longer healthy; cannot allocate unhealthy "
                "devices " +
                    held.resource};
      }
    }
    plan.already_held = held.device_ids;
    return grpc::Status::OK;
  }

  const Allocation* held_by(const PodRef& pod, const std::string& container,
                            const std::string& resource) const {
    for (const auto& allocation : state.allocations) {
      if (same_pod(allocation.pod, pod) && allocation.container == container &&
          allocation.resource == resource) {
        return &allocation;
      }
    }
    return nullptr;
  }

  // The plugin's preferred ids come first when it offers a preference; an
  // error from GetPreferredAllocation fails admission, as in the kubelet.
  static grpc::Status choose_ids(const AdmissionPlan& plan, std::size_t count,
                                 std::vector<std::string>& ids) {
    if (!plan.already_held.empty()) {
      ids = plan.already_held;
      return grpc::Status::OK;
    }
    std::vector<std::string> preferred;
    if (plan.connection->options().get_preferred_allocation_available()) {
      grpc::Status status = preferred_ids(*plan.connection, plan.available, count, preferred);
      if (!status.ok()) return status;
    }
    ids = choose_devices(plan.available, count, preferred);
    return grpc::Status::OK;
  }

  static grpc::Status preferred_ids(PluginConnection& connection,
                                    const std::vector<std::string>& available, std::size_t count,
                                    std::vector<std::string>& preferred) {
    v1beta1::PreferredAllocationRequest request;
    auto* container_request = request.add_container_requests();
    for (const auto& id : available) container_request->add_available_deviceids(id);
    container_request->set_allocation_size(static_cast<std::int32_t>(count));
    v1beta1::PreferredAllocationResponse response;
    grpc::ClientContext context;  // no deadline, as in the kubelet
    grpc::Status status = connection.stub().GetPreferredAllocation(&context, request, &response);
    if (!status.ok()) {
      return {status.error_code(), "GetPreferredAllocation failed: " + status.error_message()};
    }
    if (response.container_responses_size() > 0) {
      const auto& ids = response.container_responses(0).deviceids();
      preferred.assign(ids.begin(), ids.end());
    }
    return grpc::Status::OK;
  }

  // One ContainerAllocateRequest per call; only the first response counts.
  static grpc::Status call_allocate(PluginConnection& connection,
                                    const std::vector<std::string>& ids,
                                    v1beta1::AllocateResponse& response) {
    v1beta1::AllocateRequest request;
    auto* container_request = request.add_container_requests();
    for (const auto& id : ids) container_request->add_devices_ids(id);
    grpc::ClientContext context;  // no deadline, as in the kubelet
    grpc::Status status = connection.stub().Allocate(&context, request, &response);
    if (!status.ok()) return status;
    if (response.container_responses_size() == 0) {
      return {grpc::StatusCode::UNKNOWN, "no containers return in allocation response"};
    }
    return grpc::Status::OK;
  }

  void record_allocation(Allocation allocation) {
    {
      std::lock_guard lock(mutex);
      std::erase_if(state.allocations, [&](const Allocation& a) {
        return same_pod(a.pod, allocation.pod) && a.container == allocation.container &&
               a.resource == allocation.resource;
      });
      state.allocations.push_back(std::move(allocation));
    }
    changed.notify_all();
  }

  std::size_t delete_pod(const PodRef& pod) {
    std::size_t removed = 0;
    {
      std::lock_guard lock(mutex);
      removed = std::erase_if(state.allocations,
                              [&](const Allocation& a) { return same_pod(a.pod, pod); });
    }
    changed.notify_all();
    return removed;
  }

  // Takes every plugin connection and forgets every device list, as a new
  // kubelet that only has its checkpoint; the caller closes the connections.
  std::vector<std::shared_ptr<PluginConnection>> take_connections() {
    std::vector<std::shared_ptr<PluginConnection>> taken;
    {
      std::lock_guard lock(mutex);
      for (auto& [name, plugin] : plugins) {
        if (plugin.connection) taken.push_back(std::move(plugin.connection));
        plugin.connection.reset();
        plugin.connection_id = 0;
        auto& status = state.resources.at(name);
        status.endpoint.clear();
        status.pre_start_required = status.get_preferred_allocation_available = false;
        status.streaming = false;
        status.devices.clear();
      }
    }
    changed.notify_all();
    return taken;
  }

  void restart(KubeletExit exit) {
    std::lock_guard admission(admission_mutex);
    spdlog::info("kubelet restart{}", exit == KubeletExit::crash ? " after a crash" : "");
    // The old kubelet goes first: a Register in flight finishes before the
    // state is reset, so it cannot outlive the restart.
    stop_server(registration_server);
    if (exit == KubeletExit::clean) std::filesystem::remove(kubelet_socket);
    close_all();
    serve_registration();
  }

  // Ends every stream and waits until they are over: their handlers use this.
  void close_all() {
    for (auto& connection : take_connections()) connection->close();
    std::unique_lock lock(mutex);
    changed.wait(lock, [this] { return open_streams == 0; });
  }

  void stream_closed() {
    {
      std::lock_guard lock(mutex);
      --open_streams;
    }
    changed.notify_all();
  }

  SimulatorStatus status() const {
    std::lock_guard lock(mutex);
    return state;
  }

  void answer_registrations_late(std::chrono::milliseconds delay, std::size_t count) {
    std::lock_guard lock(mutex);
    late_delay = delay;
    late_answers_left = count;
  }

  // How long to hold back the answer of a Register that ended with status.
  std::chrono::milliseconds late_answer_delay(const grpc::Status& status) {
    std::lock_guard lock(mutex);
    if (!status.ok() || late_answers_left == 0) return std::chrono::milliseconds(0);
    --late_answers_left;
    return late_delay;
  }

  // The predicate sees the state itself: copying thousands of resources per
  // change would cost more than what a scale test measures.
  bool wait_for(const std::function<bool(const SimulatorStatus&)>& predicate,
                std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, timeout, [&] { return predicate(state); });
  }

  const KubeletSimulatorConfig config;
  const std::filesystem::path kubelet_socket;
  const std::filesystem::path served_socket;  // kubelet.sock is a second name for it

  mutable std::mutex mutex;  // guards state, plugins, last_connection_id, open_streams
  mutable std::condition_variable changed;
  SimulatorStatus state;  // every registered resource has a plugin entry too
  std::map<std::string, Plugin> plugins;
  std::uint64_t last_connection_id = 0;
  std::size_t open_streams = 0;             // ListAndWatch streams whose end was not handled yet
  std::chrono::milliseconds late_delay{0};  // see answer_registrations_late
  std::size_t late_answers_left = 0;
  // Held by every dial and plugin connection until their channels are gone.
  PluginConnection::Token grpc_token;
  bool grpc_token_released = false;  // guarded by mutex

  std::atomic<bool> pods_listed{true};  // see set_pods_listed
  std::mutex admission_mutex;           // admissions and restarts happen one at a time
  std::unique_ptr<RegistrationService> registration_service;
  std::unique_ptr<grpc::Server> registration_server;
  PodResourcesService podresources_service{*this};
  std::unique_ptr<grpc::Server> podresources_server;
};

KubeletSimulator::KubeletSimulator(KubeletSimulatorConfig config)
    : impl_(std::make_unique<Impl>(std::move(config))) {}

KubeletSimulator::~KubeletSimulator() = default;

std::filesystem::path KubeletSimulator::kubelet_socket() const { return impl_->kubelet_socket; }

const KubeletSimulatorConfig& KubeletSimulator::config() const { return impl_->config; }

AllocationResult KubeletSimulator::allocate(const std::string& resource, const PodRef& pod,
                                            const std::string& container, std::size_t count) {
  return impl_->allocate(resource, pod, container, count);
}

std::size_t KubeletSimulator::delete_pod(const PodRef& pod) { return impl_->delete_pod(pod); }

void KubeletSimulator::restart(KubeletExit exit) { impl_->restart(exit); }

void KubeletSimulator::set_pods_listed(bool listed) {
  impl_->pods_listed = listed;
  spdlog::info("podresources {}", listed ? "lists pods again" : "lists no pods");
}

void KubeletSimulator::answer_registrations_late(std::chrono::milliseconds delay,
                                                 std::size_t count) {
  impl_->answer_registrations_late(delay, count);
}

SimulatorStatus KubeletSimulator::status() const { return impl_->status(); }

bool KubeletSimulator::wait_for(const std::function<bool(const SimulatorStatus&)>& predicate,
                                std::chrono::milliseconds timeout) const {
  return impl_->wait_for(predicate, timeout);
}

}  // namespace dowser::testkit
