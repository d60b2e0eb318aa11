#include "fake_kubelet.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace dowser::reclaim::testing {
namespace {

// Finishes only when the client cancels (or its deadline passes).
class UntilCancelled final : public grpc::ServerUnaryReactor {
 public:
  void OnCancel() override { Finish(grpc::Status::CANCELLED); }
  void OnDone() override { delete this; }
};

}  // namespace

void FakePodResources::set_response(v1::ListPodResourcesResponse response) {
  std::lock_guard lock(mutex_);
  response_ = std::move(response);
}

void FakePodResources::set_in_use(const DevicesInUse& devices) {
  v1::ListPodResourcesResponse response;
  auto* pod = response.add_pod_resources();
  pod->set_name("consumer");
  pod->set_namespace_("default");
  for (const auto& [resource, id] : devices) {
    auto* container = pod->add_containers();
    container->set_name("c-" + id);
    auto* entry = container->add_devices();
    entry->set_resource_name(resource);
    entry->add_device_ids(id);
  }
  set_response(std::move(response));
}

void FakePodResources::set_mode(ListMode mode) {
  std::lock_guard lock(mutex_);
  mode_ = mode;
}

uint64_t FakePodResources::lists() const {
  std::lock_guard lock(mutex_);
  return lists_;
}

bool FakePodResources::wait_for_lists(uint64_t count, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return listed_.wait_for(lock, timeout, [&] { return lists_ >= count; });
}

grpc::ServerUnaryReactor* FakePodResources::List(grpc::CallbackServerContext* context,
                                                 const v1::ListPodResourcesRequest* /*request*/,
                                                 v1::ListPodResourcesResponse* response) {
  std::lock_guard lock(mutex_);
  ++lists_;
  listed_.notify_all();
  if (mode_ == ListMode::hold_until_cancelled) return new UntilCancelled();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (mode_ == ListMode::fail) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "kubelet is restarting"));
  } else {
    *response = response_;
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

FakeKubelet::FakeKubelet(const std::filesystem::path& socket) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket.string(), grpc::InsecureServerCredentials());
  builder.RegisterService(&service_);
  server_ = builder.BuildAndStart();
  if (!server_) throw std::runtime_error("cannot serve podresources on " + socket.string());
}

FakeKubelet::~FakeKubelet() {
  // A held List is cancelled rather than waited for.
  server_->Shutdown(std::chrono::system_clock::now());
}

}  // namespace dowser::reclaim::testing
