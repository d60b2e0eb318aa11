#include "test_plugin.hpp"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <stdexcept>

namespace dowser::testkit::test {

v1beta1::DevicePluginOptions plugin_options(bool pre_start_required, bool preferred_allocation) {
  v1beta1::DevicePluginOptions options;
  options.set_pre_start_required(pre_start_required);
  options.set_get_preferred_allocation_available(preferred_allocation);
  return options;
}

namespace {

// Something a test can recognise for every allocated id.
void describe_device(const std::string& id, v1beta1::ContainerAllocateResponse& response) {
  (*response.mutable_envs())["DEVICE_" + id] = id;
  (*response.mutable_annotations())["example.com/" + id] = "allocated";
  auto* device = response.add_devices();
  device->set_host_path("/dev/" + id);
  device->set_container_path("/dev/" + id);
  device->set_permissions("rw");
  auto* mount = response.add_mounts();
  mount->set_host_path("/srv/" + id);
  mount->set_container_path("/data/" + id);
  mount->set_read_only(true);
  response.add_cdi_devices()->set_name("example.com/dev=" + id);
}

}  // namespace

// One ListAndWatch stream: writes the newest list whenever the previous write
// is done, and finishes when the kubelet goes away or the server stops.
class TestDevicePlugin::ListStream final
    : public grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse> {
 public:
  explicit ListStream(TestDevicePlugin& plugin) : plugin_(plugin) { plugin_.attach(this); }

  void send(v1beta1::ListAndWatchResponse list) {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    pending_ = std::move(list);
    if (!writing_) write_pending();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mutex_);
    writing_ = false;
    if (!ok) return finish();
    if (pending_) write_pending();
  }

  void OnCancel() override {
    std::lock_guard lock(mutex_);
    finish();
  }

  void OnDone() override {
    plugin_.detach(this);
    delete this;
  }

 private:
  void write_pending() {
    in_flight_ = std::move(*pending_);
    pending_.reset();
    writing_ = true;
    StartWrite(&in_flight_);
  }

  void finish() {
    if (finished_) return;
    finished_ = true;
    Finish(grpc::Status::OK);
  }

  TestDevicePlugin& plugin_;
  std::mutex mutex_;
  std::optional<v1beta1::ListAndWatchResponse> pending_;
  v1beta1::ListAndWatchResponse in_flight_;  // kept alive until OnWriteDone
  bool writing_ = false;
  bool finished_ = false;
};

class TestDevicePlugin::Service final : public v1beta1::DevicePlugin::CallbackService {
 public:
  explicit Service(TestDevicePlugin& plugin) : plugin_(plugin) {}

  grpc::ServerUnaryReactor* GetDevicePluginOptions(grpc::CallbackServerContext* context,
                                                   const v1beta1::Empty*,
                                                   v1beta1::DevicePluginOptions* options) override {
    std::lock_guard lock(plugin_.mutex_);
    ++plugin_.options_calls_;
    *options = plugin_.options_;
    return finished(context, grpc::Status::OK);
  }

  grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>* ListAndWatch(
      grpc::CallbackServerContext*, const v1beta1::Empty*) override {
    return new ListStream(plugin_);
  }

  grpc::ServerUnaryReactor* GetPreferredAllocation(
      grpc::CallbackServerContext* context, const v1beta1::PreferredAllocationRequest* request,
      v1beta1::PreferredAllocationResponse* response) override {
    std::lock_guard lock(plugin_.mutex_);
    plugin_.preferred_requests_.push_back(*request);
    for (int i = 0; i < request->container_requests_size(); ++i) {
      auto* answer = response->add_container_responses();
      for (const auto& id : plugin_.preferred_) answer->add_deviceids(id);
    }
    return finished(context, plugin_.preferred_status_);
  }

  grpc::ServerUnaryReactor* Allocate(grpc::CallbackServerContext* context,
                                     const v1beta1::AllocateRequest* request,
                                     v1beta1::AllocateResponse* response) override {
    std::lock_guard lock(plugin_.mutex_);
    plugin_.allocate_requests_.push_back(*request);
    for (const auto& container : request->container_requests()) {
      auto* answer = response->add_container_responses();
      for (const auto& id : container.devices_ids()) describe_device(id, *answer);
    }
    return finished(context, plugin_.allocate_status_);
  }

  grpc::ServerUnaryReactor* PreStartContainer(grpc::CallbackServerContext* context,
                                              const v1beta1::PreStartContainerRequest*,
                                              v1beta1::PreStartContainerResponse*) override {
    return finished(context, grpc::Status::OK);
  }

 private:
  static grpc::ServerUnaryReactor* finished(grpc::CallbackServerContext* context,
                                            const grpc::Status& status) {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

  TestDevicePlugin& plugin_;
};

TestDevicePlugin::TestDevicePlugin(const std::filesystem::path& dir, std::string socket_name,
                                   v1beta1::DevicePluginOptions options, DeviceList devices)
    : dir_(dir),
      socket_name_(std::move(socket_name)),
      options_(std::move(options)),
      devices_(std::move(devices)),
      service_(std::make_unique<Service>(*this)) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket().string(), grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_) throw std::runtime_error("cannot serve " + socket().string());
}

TestDevicePlugin::~TestDevicePlugin() { stop(); }

grpc::Status TestDevicePlugin::register_with(const std::filesystem::path& kubelet_socket,
                                             const std::string& resource,
                                             const std::string& version) {
  auto channel =
      grpc::CreateChannel("unix:" + kubelet_socket.string(), grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest request;
  request.set_version(version);
  request.set_endpoint(socket_name_);
  request.set_resource_name(resource);
  *request.mutable_options() = options_;
  grpc::ClientContext context;
  // Longer than the kubelet's 10 s dial-back, which happens inside Register.
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(15));
  v1beta1::Empty empty;
  return stub->Register(&context, request, &empty);
}

void TestDevicePlugin::set_devices(DeviceList devices) {
  std::lock_guard lock(mutex_);
  devices_ = std::move(devices);
  for (auto* stream : streams_) stream->send(current_list());
}

void TestDevicePlugin::set_preferred(std::vector<std::string> ids, grpc::Status status) {
  std::lock_guard lock(mutex_);
  preferred_ = std::move(ids);
  preferred_status_ = std::move(status);
}

void TestDevicePlugin::set_allocate_status(grpc::Status status) {
  std::lock_guard lock(mutex_);
  allocate_status_ = std::move(status);
}

void TestDevicePlugin::stop() {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  // Reactors point at this object: wait until every stream is done with it.
  wait_for_streams([](std::size_t open, std::size_t) { return open == 0; },
                   std::chrono::seconds(10));
  server_.reset();
}

std::size_t TestDevicePlugin::options_calls() const {
  std::lock_guard lock(mutex_);
  return options_calls_;
}

std::vector<v1beta1::AllocateRequest> TestDevicePlugin::allocate_requests() const {
  std::lock_guard lock(mutex_);
  return allocate_requests_;
}

std::vector<v1beta1::PreferredAllocationRequest> TestDevicePlugin::preferred_requests() const {
  std::lock_guard lock(mutex_);
  return preferred_requests_;
}

bool TestDevicePlugin::wait_for_streams(
    const std::function<bool(std::size_t open, std::size_t ended)>& predicate,
    std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return streams_changed_.wait_for(lock, timeout,
                                   [&] { return predicate(streams_.size(), ended_streams_); });
}

void TestDevicePlugin::attach(ListStream* stream) {
  {
    std::lock_guard lock(mutex_);
    streams_.insert(stream);
    stream->send(current_list());
  }
  streams_changed_.notify_all();
}

void TestDevicePlugin::detach(ListStream* stream) {
  {
    std::lock_guard lock(mutex_);
    streams_.erase(stream);
    ++ended_streams_;
  }
  streams_changed_.notify_all();
}

v1beta1::ListAndWatchResponse TestDevicePlugin::current_list() const {
  v1beta1::ListAndWatchResponse list;
  for (const auto& [id, health] : devices_) {
    auto* device = list.add_devices();
    device->set_id(id);
    device->set_health(health);
  }
  return list;
}

}  // namespace dowser::testkit::test
