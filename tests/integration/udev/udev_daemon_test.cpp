// dowserd with a udev Configuration, against the kubelet simulator, on the
// devices of tests/peers/udev. The test process owns the umockdev testbed
// and dowserd runs as its child, inheriting the preload and the testbed.
#include "../daemon/daemon_harness.hpp"
#include "testbed.hpp"

#include <set>

namespace dowser::it {
namespace {

using namespace udev_handler::testing;

const testkit::PodRef pod_a{"default", "pod-a"};

class UdevDaemonTest : public DaemonTest {
 protected:
  UdevDaemonTest() {
    testbed.load_lab();
    fs::copy_file(UDEV_SO, handler_dir_ / "libdowser-handler-udev.so");
  }
  // Daemons go before the testbed they look at.
  ~UdevDaemonTest() override { nodes_.clear(); }

  // Capture devices only; events alone (a day between rescans), so what the
  // kubelet sees after a hot-plug came through the udev monitor.
  void capture_configuration(int capacity) {
    write_file(config_dir_ / "cams.yaml", R"(apiVersion: akri.sh/v0
kind: Configuration
metadata: {name: cams}
spec:
  capacity: )" + std::to_string(capacity) + R"(
  discoveryHandler:
    name: udev
    discoveryDetails: |
      udevRules:
        - SUBSYSTEM=="video4linux", ENV{ID_V4L_CAPABILITIES}==":capture:"
      permissions: rw
    discoveryProperties:
      - {name: rescanIntervalSeconds, value: "86400"}
)");
  }

  // The devpaths of the stored Instances, once there are `count` (the
  // kubelet may list a new local device before its Instance is written).
  std::set<std::string> devpaths(size_t count) {
    std::set<std::string> result;
    for (const auto& stored : instances(count))
      result.insert(stored.instance.broker_properties.at("UDEV_DEVPATH"));
    return result;
  }

  std::string instance_of(const std::string& devpath) {
    for (const auto& stored : instances())
      if (stored.instance.broker_properties.at("UDEV_DEVPATH") == devpath)
        return stored.instance.name;
    return "";
  }

  Testbed testbed;
};

TEST_F(UdevDaemonTest, MockedCamerasBecomeInstancesAndAHotPluggedOneIsFollowed) {
  capture_configuration(1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 2)) << node.log();
  EXPECT_EQ(devpaths(2), (std::set<std::string>{kVideo0, kVideo2}));
  for (const auto& stored : instances()) EXPECT_FALSE(stored.instance.shared) << "local devices";

  // Hot-plug: a third camera appears, changes twice, then goes.
  std::string video9 =
      testbed.add("video4linux", "video9", kCamera10 + "/1-10:1.0", {{"name", "Hotplug Cam"}},
                  {{"DEVNAME", "/dev/video9"}, {"ID_V4L_CAPABILITIES", ":capture:"}});
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 3)) << node.log();
  ASSERT_EQ(devpaths(3), (std::set<std::string>{kVideo0, kVideo2, video9}));
  // Its own IL plugin is registered before it goes (and stops with it).
  ASSERT_TRUE(node.wait_allocatable("akri.sh/" + instance_of(video9), 1)) << node.log();

  // A change that stops the rule matching, then one that makes it match again.
  testbed.set_property(video9, "ID_V4L_CAPABILITIES", ":video_output:");
  testbed.uevent(video9, "change");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 2)) << node.log();
  EXPECT_EQ(devpaths(2), (std::set<std::string>{kVideo0, kVideo2}));
  testbed.set_property(video9, "ID_V4L_CAPABILITIES", ":capture:");
  testbed.uevent(video9, "change");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 3)) << node.log();
  ASSERT_EQ(devpaths(3), (std::set<std::string>{kVideo0, kVideo2, video9}));
  ASSERT_TRUE(node.wait_allocatable("akri.sh/" + instance_of(video9), 1)) << node.log();

  testbed.remove(video9);
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 2)) << node.log();
  EXPECT_EQ(devpaths(2), (std::set<std::string>{kVideo0, kVideo2})) << "its Instance is gone";

  // The container gets the device node with the configured permissions.
  auto result = node.kubelet->allocate("akri.sh/cams", pod_a, "c", 1);
  ASSERT_TRUE(result.ok()) << result.status.error_message();
  const auto& response = result.response.container_responses(0);
  ASSERT_EQ(response.devices_size(), 1);
  const std::string devnode = response.devices(0).host_path();
  EXPECT_TRUE(devnode == "/dev/video0" || devnode == "/dev/video2") << devnode;
  EXPECT_EQ(response.devices(0).container_path(), devnode);
  EXPECT_EQ(response.devices(0).permissions(), "rw");
  EXPECT_EQ(response.envs().at("UDEV_DEVNODE"), devnode);
}

TEST_F(UdevDaemonTest, ABadRuleIsRefusedWhenTheConfigurationIsLoaded) {
  write_file(config_dir_ / "bad.yaml", R"(apiVersion: akri.sh/v0
kind: Configuration
metadata: {name: bad}
spec:
  discoveryHandler:
    name: udev
    discoveryDetails: |
      udevRules: ['KERNEL=="video*" SUBSYSTEM=="video4linux"']
)");
  capture_configuration(1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 2)) << node.log();
  EXPECT_TRUE(node.wait(
      [&](const auto&) {
        auto log = node.log();
        return log.find("refused by handler udev") != std::string::npos &&
               log.find("udevRules[0]") != std::string::npos;
      },
      5s))
      << node.log();
  EXPECT_EQ(node.kubelet->status().resource("akri.sh/bad"), nullptr);
  EXPECT_TRUE(node.running());
}

}  // namespace
}  // namespace dowser::it
