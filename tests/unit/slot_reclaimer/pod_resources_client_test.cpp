#include "fake_kubelet.hpp"
#include "slot_reclaimer.hpp"

#include <gtest/gtest.h>

#include <future>

namespace dowser::reclaim {
namespace {

using namespace std::chrono_literals;
using testing::FakeKubelet;
using testing::ListMode;
using testing::TempDir;

void add_devices(v1::ContainerResources* container, const std::string& resource,
                 const std::vector<std::string>& ids) {
  auto* entry = container->add_devices();
  entry->set_resource_name(resource);
  for (const auto& id : ids) entry->add_device_ids(id);
}

class PodResourcesClientTest : public ::testing::Test {
 protected:
  TempDir dir;
  std::filesystem::path socket = dir.path() / "kubelet.sock";
  PodResourcesClient client{socket};
};

TEST_F(PodResourcesClientTest, CollectsEveryDeviceOfEveryContainerOfEveryPod) {
  FakeKubelet kubelet(socket);
  v1::ListPodResourcesResponse response;
  auto* web = response.add_pod_resources();
  web->set_name("web");
  auto* app = web->add_containers();
  add_devices(app, "akri.sh/camera-a1b2c3", {"camera-a1b2c3-0", "camera-a1b2c3-2"});
  add_devices(app, "nvidia.com/gpu", {"GPU-1"});
  add_devices(web->add_containers(), "akri.sh/camera", {"0"});
  auto* idle = response.add_pod_resources();
  idle->set_name("idle");
  idle->add_containers()->set_name("no-devices");
  add_devices(response.add_pod_resources()->add_containers(), "akri.sh/camera", {"1"});
  kubelet.pod_resources().set_response(response);

  std::string error;
  auto in_use = client.list_in_use(5s, &error);

  ASSERT_TRUE(in_use.has_value()) << error;
  const DevicesInUse expected{{"akri.sh/camera-a1b2c3", "camera-a1b2c3-0"},
                              {"akri.sh/camera-a1b2c3", "camera-a1b2c3-2"},
                              {"nvidia.com/gpu", "GPU-1"},
                              {"akri.sh/camera", "0"},
                              {"akri.sh/camera", "1"}};
  EXPECT_EQ(*in_use, expected);
}

TEST_F(PodResourcesClientTest, NoPodsMeansNothingInUse) {
  FakeKubelet kubelet(socket);
  std::string error;
  auto in_use = client.list_in_use(5s, &error);
  ASSERT_TRUE(in_use.has_value()) << error;
  EXPECT_TRUE(in_use->empty());
}

TEST_F(PodResourcesClientTest, ServerAbsentIsAFailureWithAReason) {
  std::string error;
  EXPECT_EQ(client.list_in_use(5s, &error), std::nullopt);
  EXPECT_NE(error.find(socket.string()), std::string::npos) << error;
}

TEST_F(PodResourcesClientTest, ServerErrorIsAFailureWithItsMessage) {
  FakeKubelet kubelet(socket);
  kubelet.pod_resources().set_mode(ListMode::fail);
  std::string error;
  EXPECT_EQ(client.list_in_use(5s, &error), std::nullopt);
  EXPECT_NE(error.find("kubelet is restarting"), std::string::npos) << error;
}

TEST_F(PodResourcesClientTest, AnUnansweredListTimesOut) {
  FakeKubelet kubelet(socket);
  kubelet.pod_resources().set_mode(ListMode::hold_until_cancelled);
  std::string error;
  EXPECT_EQ(client.list_in_use(200ms, &error), std::nullopt);
  EXPECT_FALSE(error.empty());
}

TEST_F(PodResourcesClientTest, AStopRequestCancelsTheListInFlight) {
  FakeKubelet kubelet(socket);
  kubelet.pod_resources().set_mode(ListMode::hold_until_cancelled);
  std::stop_source stop;
  auto listing = std::async(std::launch::async, [&] {
    std::string error;
    return client.list_in_use(60s, &error, stop.get_token());
  });
  ASSERT_TRUE(kubelet.pod_resources().wait_for_lists(1, 10s));
  stop.request_stop();
  ASSERT_EQ(listing.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(listing.get(), std::nullopt);
}

}  // namespace
}  // namespace dowser::reclaim
