// KubeletSimulator against TestDevicePlugin: both real gRPC servers on unix
// sockets in a temporary device plugin directory.
#include "dowser/kubelet_sim.hpp"
#include "podresources/v1/api.grpc.pb.h"
#include "test_plugin.hpp"
#include "test_support.hpp"

#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

namespace dowser::testkit::test {
namespace {

using ::testing::ElementsAre;

constexpr const char* kResource = "example.com/widget";

class KubeletSimulatorTest : public ::testing::Test {
 protected:
  KubeletSimulatorConfig config() const {
    KubeletSimulatorConfig config;
    config.device_plugin_dir = dir_.path() / "dp";
    config.podresources_socket = dir_.path() / "pr" / "kubelet.sock";
    return config;
  }

  std::filesystem::path plugin_dir() const { return dir_.path() / "dp"; }

  // A plugin serving `devices`, registered for kResource, whose list has arrived.
  std::unique_ptr<TestDevicePlugin> registered_plugin(
      const DeviceList& devices, const v1beta1::DevicePluginOptions& options = {},
      const std::string& socket = "widget.sock") {
    auto plugin = std::make_unique<TestDevicePlugin>(plugin_dir(), socket, options, devices);
    const grpc::Status status = plugin->register_with(simulator_.kubelet_socket(), kResource);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(wait_for_resource(
        [&](const ResourceStatus& r) { return r.endpoint == socket && listed(r) == devices; }));
    return plugin;
  }

  static DeviceList listed(const ResourceStatus& resource) {
    DeviceList devices;
    for (const auto& device : resource.devices) devices.emplace_back(device.id, device.health);
    return devices;
  }

  bool wait_for_resource(const std::function<bool(const ResourceStatus&)>& predicate) {
    return simulator_.wait_for(
        [&](const SimulatorStatus& status) {
          const auto* resource = status.resource(kResource);
          return resource && predicate(*resource);
        },
        kDeadline);
  }

  ResourceStatus resource_status() const {
    const auto status = simulator_.status();
    const auto* resource = status.resource(kResource);
    return resource ? *resource : ResourceStatus{};
  }

  std::unique_ptr<v1::PodResourcesLister::Stub> podresources_client() const {
    return v1::PodResourcesLister::NewStub(
        grpc::CreateChannel("unix:" + simulator_.config().podresources_socket.string(),
                            grpc::InsecureChannelCredentials()));
  }

  TempDir dir_;
  KubeletSimulator simulator_{config()};
};

std::vector<std::string> ids_of(const google::protobuf::RepeatedPtrField<std::string>& ids) {
  return {ids.begin(), ids.end()};
}

// Watches a directory for files created and deleted, as plugins watch the
// device plugin directory to notice a kubelet restart.
class DirectoryWatch {
 public:
  explicit DirectoryWatch(const std::filesystem::path& dir)
      : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    ::inotify_add_watch(fd_, dir.c_str(), IN_CREATE | IN_DELETE);
  }
  ~DirectoryWatch() { ::close(fd_); }

  // Events already queued, as "created <name>" or "deleted <name>".
  std::vector<std::string> events() {
    std::vector<std::string> seen;
    alignas(inotify_event) char buffer[4096];
    ssize_t got = 0;
    while ((got = ::read(fd_, buffer, sizeof buffer)) > 0) {
      for (char* at = buffer; at < buffer + got;) {
        const auto* event = reinterpret_cast<const inotify_event*>(at);
        seen.push_back(std::string(event->mask & IN_CREATE ? "created " : "deleted ") +
                       event->name);
        at += sizeof(inotify_event) + event->len;
      }
    }
    return seen;
  }

 private:
  int fd_;
};

TEST_F(KubeletSimulatorTest, RegisterDialsBackAndReadsOptionsBeforeReturning) {
  TestDevicePlugin plugin(plugin_dir(), "widget.sock", plugin_options(true, false),
                          {{"w0", "Healthy"}});

  const grpc::Status status = plugin.register_with(simulator_.kubelet_socket(), kResource);

  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(plugin.options_calls(), 1u);  // already, without waiting
  const auto resource = resource_status();
  EXPECT_EQ(resource.endpoint, "widget.sock");
  EXPECT_EQ(resource.registrations, 1u);
  EXPECT_TRUE(resource.pre_start_required);
  EXPECT_FALSE(resource.get_preferred_allocation_available);
  EXPECT_TRUE(wait_for_resource([](const ResourceStatus& r) { return r.allocatable() == 1; }));
}

TEST_F(KubeletSimulatorTest, RefusesUnsupportedVersionAndInvalidResourceNames) {
  TestDevicePlugin plugin(plugin_dir(), "widget.sock");
  const std::string long_name_part(64, 'a');
  const std::string long_prefix = std::string(240, 'a') + ".example";  // 253 with "requests."
  const std::vector<std::string> invalid = {
      "widget",                         // no prefix: a native resource
      "kubernetes.io/widget",           // native prefix
      "example.com/kubernetes.io/w",    // native prefix anywhere
      "requests.example.com/widget",    // quota prefix
      "Example.com/widget",             // the prefix is a lowercase DNS subdomain
      "example..com/widget",            // empty label
      "/widget",                        // empty prefix
      "example.com/",                   // empty name
      "example.com/-widget",            // name must start alphanumeric
      "example.com/widget_",            // and end alphanumeric
      "example.com/wid/get",            // one '/' only
      "example.com/" + long_name_part,  // name part over 63
      long_prefix + "/widget",          // prefix over 253 once "requests." is added
  };
  for (const auto& name : invalid) {
    const grpc::Status status = plugin.register_with(simulator_.kubelet_socket(), name);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << name;
    EXPECT_NE(status.error_message().find(name), std::string::npos) << status.error_message();
  }
  EXPECT_EQ(plugin.register_with(simulator_.kubelet_socket(), kResource, "v1alpha").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(plugin.options_calls(), 0u);  // refused before dialling back
  EXPECT_TRUE(simulator_.status().resources.empty());

  const std::vector<std::string> valid = {"example.com/widget", "akri.sh/udev-camera-a1b2c3",
                                          "vendor.example/Res_1.x", "a/" + std::string(63, 'b')};
  for (const auto& name : valid) {
    const grpc::Status status = plugin.register_with(simulator_.kubelet_socket(), name);
    EXPECT_TRUE(status.ok()) << name << ": " << status.error_message();
  }
}

TEST_F(KubeletSimulatorTest, RegisterFailsWhenThePluginDoesNotServe) {
  auto short_dial = config();
  short_dial.device_plugin_dir = dir_.path() / "dp2";
  short_dial.podresources_socket = dir_.path() / "pr2" / "kubelet.sock";
  short_dial.dial_timeout = std::chrono::milliseconds(300);
  KubeletSimulator simulator(short_dial);
  std::filesystem::create_directories(dir_.path() / "elsewhere");
  TestDevicePlugin plugin(dir_.path() / "elsewhere", "widget.sock");  // not in dp2

  const grpc::Status status = plugin.register_with(simulator.kubelet_socket(), kResource);

  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(simulator.status().resources.empty());
}

TEST_F(KubeletSimulatorTest, RecordsEveryListAndMarksAllUnhealthyWhenTheStreamEnds) {
  auto plugin = registered_plugin({{"w0", "Healthy"}, {"w1", "Unhealthy"}});
  auto resource = resource_status();
  EXPECT_EQ(resource.capacity(), 2u);
  EXPECT_EQ(resource.allocatable(), 1u);

  plugin->set_devices({{"w0", "Healthy"}, {"w2", "Healthy"}, {"w3", "healthy"}});
  ASSERT_TRUE(wait_for_resource([](const ResourceStatus& r) { return r.lists_received >= 2; }));
  resource = resource_status();
  EXPECT_EQ(resource.capacity(), 3u);     // w1 is gone: every list replaces the last
  EXPECT_EQ(resource.allocatable(), 2u);  // only "Healthy" counts
  EXPECT_EQ(resource.device("w1"), nullptr);
  EXPECT_TRUE(resource.streaming);

  plugin->stop();
  ASSERT_TRUE(wait_for_resource([](const ResourceStatus& r) { return !r.streaming; }));
  resource = resource_status();
  EXPECT_EQ(resource.capacity(), 3u);
  EXPECT_EQ(resource.allocatable(), 0u);
  EXPECT_EQ(resource.device("w0")->health, "Unhealthy");
}

// A benchmark's latency to the kubelet ends when the stream's reader got the
// list, not when a waiting thread woke up: each list carries that time.
TEST_F(KubeletSimulatorTest, StampsEveryListWithTheTimeItArrived) {
  const auto before_first = std::chrono::steady_clock::now();
  auto plugin = registered_plugin({{"w0", "Healthy"}});
  const auto first = resource_status().last_list_at;
  EXPECT_GE(first, before_first);

  const auto before_second = std::chrono::steady_clock::now();
  plugin->set_devices({{"w0", "Healthy"}, {"w1", "Healthy"}});
  ASSERT_TRUE(wait_for_resource([](const ResourceStatus& r) { return r.lists_received >= 2; }));
  const auto after_second = std::chrono::steady_clock::now();
  const auto second = resource_status().last_list_at;
  EXPECT_GE(second, before_second);
  EXPECT_LE(second, after_second);
  EXPECT_GT(second, first);
}

TEST_F(KubeletSimulatorTest, AllocatesHealthyIdsHeldByNoOtherContainer) {
  auto plugin = registered_plugin(
      {{"w0", "Healthy"}, {"w1", "Unhealthy"}, {"w2", "Healthy"}, {"w3", "Healthy"}});

  const auto first = simulator_.allocate(kResource, {"default", "pod-a"}, "main", 2);
  ASSERT_TRUE(first.ok()) << first.status.error_message();
  EXPECT_THAT(first.device_ids, ElementsAre("w0", "w2"));
  ASSERT_EQ(first.response.container_responses_size(), 1);
  EXPECT_EQ(first.response.container_responses(0).envs().at("DEVICE_w2"), "w2");
  EXPECT_EQ(first.response.container_responses(0).cdi_devices(0).name(), "example.com/dev=w0");
  auto requests = plugin->allocate_requests();
  ASSERT_EQ(requests.size(), 1u);
  ASSERT_EQ(requests[0].container_requests_size(), 1);  // one container per call
  EXPECT_THAT(ids_of(requests[0].container_requests(0).devices_ids()), ElementsAre("w0", "w2"));

  const auto too_many = simulator_.allocate(kResource, {"default", "pod-b"}, "main", 2);
  EXPECT_EQ(too_many.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(plugin->allocate_requests().size(), 1u);  // the plugin was not asked

  const auto last = simulator_.allocate(kResource, {"default", "pod-b"}, "main", 1);
  ASSERT_TRUE(last.ok()) << last.status.error_message();
  EXPECT_THAT(last.device_ids, ElementsAre("w3"));

  EXPECT_EQ(
      simulator_.allocate("example.com/other", {"default", "pod-c"}, "main", 1).status.error_code(),
      grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(simulator_.status().allocations.size(), 2u);
}

TEST_F(KubeletSimulatorTest, ContainerAdmittedAgainGetsTheSameIds) {
  auto plugin = registered_plugin({{"w0", "Healthy"}, {"w1", "Healthy"}});
  ASSERT_TRUE(simulator_.allocate(kResource, {"default", "pod-a"}, "main", 1).ok());

  const auto again = simulator_.allocate(kResource, {"default", "pod-a"}, "main", 1);

  ASSERT_TRUE(again.ok()) << again.status.error_message();
  EXPECT_THAT(again.device_ids, ElementsAre("w0"));
  EXPECT_EQ(plugin->allocate_requests().size(), 2u);
  EXPECT_EQ(simulator_.status().allocations.size(), 1u);
  EXPECT_EQ(simulator_.allocate(kResource, {"default", "pod-a"}, "main", 2).status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(KubeletSimulatorTest, FailedAllocateRecordsNothing) {
  auto plugin = registered_plugin({{"w0", "Healthy"}});
  plugin->set_allocate_status({grpc::StatusCode::UNAVAILABLE, "slot taken"});

  const auto result = simulator_.allocate(kResource, {"default", "pod-a"}, "main", 1);

  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(result.status.error_message(), "slot taken");
  EXPECT_TRUE(simulator_.status().allocations.empty());
  plugin->set_allocate_status(grpc::Status::OK);
  EXPECT_TRUE(simulator_.allocate(kResource, {"default", "pod-a"}, "main", 1).ok());
}

TEST_F(KubeletSimulatorTest, HonoursGetPreferredAllocationWhenOffered) {
  auto plugin = registered_plugin(
      {{"w0", "Healthy"}, {"w1", "Healthy"}, {"w2", "Unhealthy"}, {"w3", "Healthy"}},
      plugin_options(false, true));
  plugin->set_preferred({"w3", "w1"});

  const auto chosen = simulator_.allocate(kResource, {"default", "pod-a"}, "main", 2);

  ASSERT_TRUE(chosen.ok()) << chosen.status.error_message();
  EXPECT_THAT(chosen.device_ids, ElementsAre("w3", "w1"));
  const auto asked = plugin->preferred_requests();
  ASSERT_EQ(asked.size(), 1u);
  ASSERT_EQ(asked[0].container_requests_size(), 1);
  EXPECT_THAT(ids_of(asked[0].container_requests(0).available_deviceids()),
              ElementsAre("w0", "w1", "w3"));
  EXPECT_EQ(asked[0].container_requests(0).allocation_size(), 2);

  // An answer naming devices that are not available is ignored.
  plugin->set_preferred({"w2", "w3"});
  const auto fallback = simulator_.allocate(kResource, {"default", "pod-b"}, "main", 1);
  ASSERT_TRUE(fallback.ok()) << fallback.status.error_message();
  EXPECT_THAT(fallback.device_ids, ElementsAre("w0"));

  // A failing GetPreferredAllocation fails admission.
  ASSERT_EQ(simulator_.delete_pod({"default", "pod-b"}), 1u);
  plugin->set_preferred({}, {grpc::StatusCode::INTERNAL, "no topology"});
  const auto failed = simulator_.allocate(kResource, {"default", "pod-c"}, "main", 1);
  EXPECT_EQ(failed.status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(plugin->allocate_requests().size(), 2u);
}

TEST_F(KubeletSimulatorTest, PodResourcesReportsAllocationsUntilThePodIsDeleted) {
  auto plugin = registered_plugin({{"w0", "Healthy"}, {"w1", "Healthy"}, {"w2", "Unhealthy"}});
  ASSERT_TRUE(simulator_.allocate(kResource, {"default", "pod-a"}, "main", 1).ok());
  ASSERT_TRUE(simulator_.allocate(kResource, {"tenant", "pod-b"}, "side", 1).ok());
  auto client = podresources_client();

  v1::ListPodResourcesResponse listed;
  grpc::ClientContext list_context;
  ASSERT_TRUE(client->List(&list_context, {}, &listed).ok());
  ASSERT_EQ(listed.pod_resources_size(), 2);
  const auto& pod_a = listed.pod_resources(0);
  EXPECT_EQ(pod_a.namespace_(), "default");
  EXPECT_EQ(pod_a.name(), "pod-a");
  ASSERT_EQ(pod_a.containers_size(), 1);
  EXPECT_EQ(pod_a.containers(0).name(), "main");
  ASSERT_EQ(pod_a.containers(0).devices_size(), 1);
  EXPECT_EQ(pod_a.containers(0).devices(0).resource_name(), kResource);
  EXPECT_THAT(ids_of(pod_a.containers(0).devices(0).device_ids()), ElementsAre("w0"));

  v1::AllocatableResourcesResponse allocatable;
  grpc::ClientContext allocatable_context;
  ASSERT_TRUE(client->GetAllocatableResources(&allocatable_context, {}, &allocatable).ok());
  ASSERT_EQ(allocatable.devices_size(), 1);
  EXPECT_THAT(ids_of(allocatable.devices(0).device_ids()), ElementsAre("w0", "w1"));

  EXPECT_EQ(simulator_.delete_pod({"default", "pod-a"}), 1u);

  v1::ListPodResourcesResponse after;
  grpc::ClientContext after_context;
  ASSERT_TRUE(client->List(&after_context, {}, &after).ok());
  ASSERT_EQ(after.pod_resources_size(), 1);
  EXPECT_EQ(after.pod_resources(0).name(), "pod-b");
  v1::GetPodResourcesRequest get_request;
  get_request.set_pod_namespace("default");
  get_request.set_pod_name("pod-a");
  v1::GetPodResourcesResponse got;
  grpc::ClientContext get_context;
  EXPECT_EQ(client->Get(&get_context, get_request, &got).error_code(), grpc::StatusCode::NOT_FOUND);
  // The freed device can be given again.
  const auto reused = simulator_.allocate(kResource, {"default", "pod-c"}, "main", 1);
  ASSERT_TRUE(reused.ok());
  EXPECT_THAT(reused.device_ids, ElementsAre("w0"));
}

// A kubelet restarted without the API server: podresources shows no pods,
// while their allocations stay (a container admitted again keeps its ids).
TEST_F(KubeletSimulatorTest, HiddenPodsAreNotListedButKeepTheirDevices) {
  auto plugin = registered_plugin({{"w0", "Healthy"}, {"w1", "Healthy"}});
  ASSERT_TRUE(simulator_.allocate(kResource, {"default", "pod-a"}, "main", 1).ok());
  auto client = podresources_client();
  auto listed_pods = [&] {
    v1::ListPodResourcesResponse listed;
    grpc::ClientContext context;
    EXPECT_TRUE(client->List(&context, {}, &listed).ok());
    return listed.pod_resources_size();
  };
  auto get_status = [&] {
    v1::GetPodResourcesRequest request;
    request.set_pod_namespace("default");
    request.set_pod_name("pod-a");
    v1::GetPodResourcesResponse got;
    grpc::ClientContext context;
    return client->Get(&context, request, &got).error_code();
  };

  simulator_.set_pods_listed(false);
  EXPECT_EQ(listed_pods(), 0);
  EXPECT_EQ(get_status(), grpc::StatusCode::NOT_FOUND);
  const auto again = simulator_.allocate(kResource, {"default", "pod-a"}, "main", 1);
  ASSERT_TRUE(again.ok());
  EXPECT_THAT(again.device_ids, ElementsAre("w0")) << "the allocation stayed";

  simulator_.set_pods_listed(true);
  EXPECT_EQ(listed_pods(), 1);
  EXPECT_EQ(get_status(), grpc::StatusCode::OK);
}

TEST_F(KubeletSimulatorTest, NewestRegistrationWins) {
  auto old_plugin = registered_plugin({{"w0", "Healthy"}}, {}, "widget-1.sock");
  auto new_plugin = registered_plugin({{"n0", "Healthy"}, {"n1", "Healthy"}}, {}, "widget-2.sock");

  EXPECT_TRUE(old_plugin->wait_for_streams(
      [](std::size_t open, std::size_t ended) { return open == 0 && ended == 1; }, kDeadline));
  old_plugin->set_devices({{"w0", "Healthy"}, {"w9", "Healthy"}});  // no longer listened to
  const auto resource = resource_status();
  EXPECT_EQ(resource.registrations, 2u);
  EXPECT_EQ(resource.capacity(), 2u);
  EXPECT_NE(resource.device("n1"), nullptr);
  const auto result = simulator_.allocate(kResource, {"default", "pod-a"}, "main", 1);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(new_plugin->allocate_requests().size(), 1u);
  EXPECT_TRUE(old_plugin->allocate_requests().empty());
}

TEST_F(KubeletSimulatorTest, RestartDeletesPluginSocketsAndCreatesKubeletSocketAgain) {
  auto plugin = registered_plugin({{"w0", "Healthy"}, {"w1", "Healthy"}});
  ASSERT_TRUE(simulator_.allocate(kResource, {"default", "pod-a"}, "main", 1).ok());
  std::ofstream(plugin_dir() / "DEPRECATION") << "not a socket\n";
  DirectoryWatch watch(plugin_dir());

  simulator_.restart();

  // restart() has returned, so every event is queued already. The old
  // kubelet's socket went with it, before the new kubelet cleaned up.
  EXPECT_THAT(watch.events(),
              ElementsAre("deleted kubelet.sock", "deleted widget.sock", "created kubelet.sock"));
  EXPECT_FALSE(std::filesystem::exists(plugin->socket()));
  EXPECT_TRUE(std::filesystem::is_socket(simulator_.kubelet_socket()));
  EXPECT_TRUE(plugin->wait_for_streams(
      [](std::size_t open, std::size_t ended) { return open == 0 && ended == 1; }, kDeadline));
  const auto resource = resource_status();
  EXPECT_TRUE(resource.endpoint.empty());
  EXPECT_EQ(resource.capacity(), 0u);
  EXPECT_EQ(simulator_.status().allocations.size(), 1u);  // checkpointed

  // The plugin comes back with a fresh socket; the held device stays taken.
  auto again = registered_plugin({{"w0", "Healthy"}, {"w1", "Healthy"}}, {}, "widget-2.sock");
  EXPECT_EQ(resource_status().registrations, 2u);
  EXPECT_EQ(simulator_.allocate(kResource, {"default", "pod-b"}, "main", 2).status.error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  const auto result = simulator_.allocate(kResource, {"default", "pod-b"}, "main", 1);
  ASSERT_TRUE(result.ok()) << result.status.error_message();
  EXPECT_THAT(result.device_ids, ElementsAre("w1"));
}

// A killed kubelet leaves its socket: a plugin sees its own socket deleted
// while kubelet.sock is still there (refusing connections).
TEST_F(KubeletSimulatorTest, ACrashedKubeletsSocketStaysUntilThePluginSocketsAreGone) {
  auto plugin = registered_plugin({{"w0", "Healthy"}});
  DirectoryWatch watch(plugin_dir());

  simulator_.restart(KubeletExit::crash);

  EXPECT_THAT(watch.events(),
              ElementsAre("deleted widget.sock", "deleted kubelet.sock", "created kubelet.sock"));
  EXPECT_TRUE(std::filesystem::is_socket(simulator_.kubelet_socket()));
  auto again = registered_plugin({{"w0", "Healthy"}}, {}, "widget-2.sock");
  EXPECT_EQ(resource_status().registrations, 2u);
}

}  // namespace
}  // namespace dowser::testkit::test
