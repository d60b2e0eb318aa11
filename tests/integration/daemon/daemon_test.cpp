// dowserd as a process, driven by the kubelet simulator over real gRPC on
// unix sockets: the scenarios the daemon issue asks for.
#include "daemon_harness.hpp"
#include "naming.hpp"
#include "temp_dir.hpp"

#include "deviceplugin/v1beta1/api.grpc.pb.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <set>
#include <thread>

namespace dowser::it {
namespace {

const testkit::PodRef pod_a{"default", "pod-a"};
const testkit::PodRef pod_b{"default", "pod-b"};

// The upper-case digest suffix of an Instance or IL resource name.
std::string hash_of(const std::string& name) {
  std::string hash = name.substr(name.rfind('-') + 1);
  for (auto& c : hash) c = static_cast<char>(std::toupper(c));
  return hash;
}

size_t claims(const std::vector<store::StoredInstance>& instances) {
  size_t count = 0;
  for (const auto& stored : instances) count += stored.instance.device_usage.size();
  return count;
}

TEST_F(DaemonTest, TwoDevicesOfCapacityTwo) {
  echo_configuration("cams", {"cam0", "cam1"}, 2);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 2)) << node.log();
  auto stored = instances(2);
  ASSERT_EQ(stored.size(), 2u);
  auto il = il_resources(stored, "cams");
  for (const auto& resource : il) ASSERT_TRUE(node.wait_allocatable(resource, 2)) << resource;

  // Two CL devices: two distinct Instances.
  auto two = node.kubelet->allocate("akri.sh/cams", pod_a, "c", 2);
  ASSERT_TRUE(two.ok()) << two.status.error_message();
  ASSERT_EQ(two.response.container_responses_size(), 1) << "one response per container request";
  const auto& envs = two.response.container_responses(0).envs();
  std::set<std::string> described;
  for (const auto& [key, value] : envs)
    if (key.rfind("DEBUG_ECHO_DESCRIPTION_", 0) == 0) described.insert(value);
  EXPECT_EQ(described, (std::set<std::string>{"cam0", "cam1"})) << "two distinct devices";
  EXPECT_FALSE(envs.contains("DEBUG_ECHO_DESCRIPTION")) << "unsuffixed only for one device";
  EXPECT_EQ(two.response.container_responses(0).annotations_size(), 2);

  // Each camera now has one CL claim: every IL plugin shows that slot Unhealthy.
  for (const auto& resource : il) EXPECT_TRUE(node.wait_allocatable(resource, 1)) << resource;
  // The CL plugin lists its two claimed vdevs plus one placeholder per
  // camera that still has a free slot.
  EXPECT_TRUE(node.wait_allocatable("akri.sh/cams", 4));
  EXPECT_TRUE(node.wait_free("akri.sh/cams", 2));

  // Asking for three distinct cameras fails and claims nothing.
  size_t before = claims(instances());
  auto three = node.kubelet->allocate("akri.sh/cams", pod_b, "c", 3);
  EXPECT_FALSE(three.ok());
  EXPECT_EQ(claims(instances()), before);

  // An IL claim of the last slot of one camera: the CL list shrinks to one.
  auto il_claim = node.kubelet->allocate(il[0], pod_b, "c", 1);
  ASSERT_TRUE(il_claim.ok()) << il_claim.status.error_message();
  const auto& il_envs = il_claim.response.container_responses(0).envs();
  EXPECT_EQ(il_envs.at("DEBUG_ECHO_DESCRIPTION"),
            il_envs.at("DEBUG_ECHO_DESCRIPTION_" + hash_of(il[0])))
      << "one device: suffixed and plain";
  EXPECT_TRUE(node.wait_free("akri.sh/cams", 1));
  EXPECT_TRUE(node.wait_free(il[0], 0));
  EXPECT_TRUE(node.wait_allocatable(il[0], 1)) << "its own IL claim stays Healthy";
  EXPECT_EQ(claims(instances()), 3u);
}

// An Allocate's claim and the kubelet's record of it are durable with their
// own disks' flushes: dowserd warns when the two directories are apart.
TEST_F(DaemonTest, AStateDirectoryOffTheKubeletsFileSystemIsWarnedOf) {
  const fs::path shared_memory = "/dev/shm";
  struct stat memory {};
  struct stat here {};
  if (::stat(shared_memory.c_str(), &memory) != 0 || ::stat(root_.c_str(), &here) != 0 ||
      memory.st_dev == here.st_dev || ::access(shared_memory.c_str(), W_OK) != 0)
    GTEST_SKIP() << "no writable file system apart from " << root_;
  const test::TempDir apart_state("dowser-state", shared_memory);
  const char* const kWarning = "is on another file system than the kubelet directory";
  Node& together = add_node("node-a");
  Node apart(root_, "node-b", apart_state.path(), config_dir_, handler_dir_);
  EXPECT_TRUE(apart.wait_for_log(kWarning)) << apart.log();
  EXPECT_TRUE(together.wait_for_log("dowserd on node"));
  EXPECT_EQ(together.log().find(kWarning), std::string::npos) << together.log();
}

TEST_F(DaemonTest, PreferredLetsOneContainerTakeTwoSlotsOfOneDevice) {
  echo_configuration("solo", {"only"}, 2, false, "  uniqueInstances: Preferred\n");
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/solo", 2)) << node.log();
  auto result = node.kubelet->allocate("akri.sh/solo", pod_a, "c", 2);
  ASSERT_TRUE(result.ok()) << result.status.error_message();
  auto stored = instances();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].instance.device_usage.size(), 2u);
}

TEST_F(DaemonTest, RequiredRefusesTwoSlotsOfOneDevice) {
  echo_configuration("solo", {"only"}, 2);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/solo", 1)) << node.log();
  EXPECT_FALSE(node.kubelet->allocate("akri.sh/solo", pod_a, "c", 2).ok());
  EXPECT_EQ(claims(instances()), 0u);
}

TEST_F(DaemonTest, ReallocationAndReclaimingForBothPluginKinds) {
  echo_configuration("cams", {"cam0"}, 2);
  auto& node = add_node("node-a", {"--reclaim-interval-ms=50", "--reclaim-grace-ms=200"});
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  auto il = il_resources(instances(1), "cams").at(0);
  ASSERT_TRUE(node.wait_allocatable(il, 2));

  auto cl = node.kubelet->allocate("akri.sh/cams", pod_a, "c", 1);
  ASSERT_TRUE(cl.ok()) << cl.status.error_message();
  // The same container asks again (pod restart): same vdev, accepted.
  auto again = node.kubelet->allocate("akri.sh/cams", pod_a, "c", 1);
  ASSERT_TRUE(again.ok()) << again.status.error_message();
  EXPECT_EQ(again.device_ids, cl.device_ids);
  // The IL list shows the CL-held slot Unhealthy before the kubelet picks one.
  ASSERT_TRUE(node.wait_allocatable(il, 1));
  ASSERT_TRUE(node.kubelet->allocate(il, pod_b, "c", 1).ok());
  EXPECT_EQ(claims(instances()), 2u);

  // Claims of running pods are kept across many reclaim passes...
  ASSERT_FALSE(node.wait([](const auto&) { return false; }, 600ms));
  EXPECT_EQ(claims(instances()), 2u);
  // ...and freed once their pods are gone, IL and CL alike.
  node.kubelet->delete_pod(pod_a);
  node.kubelet->delete_pod(pod_b);
  EXPECT_TRUE(node.wait_allocatable(il, 2, 5s)) << node.log();
  EXPECT_EQ(claims(instances()), 0u);
}

TEST_F(DaemonTest, KubeletRestartReRegistersEveryPlugin) {
  echo_configuration("cams", {"cam0", "cam1"}, 1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 2)) << node.log();
  auto il = il_resources(instances(2), "cams");
  for (const auto& resource : il) ASSERT_TRUE(node.wait_allocatable(resource, 1));
  node.kubelet->restart();
  std::map<std::string, size_t> expected = {{"akri.sh/cams", 2}, {il[0], 1}, {il[1], 1}};
  EXPECT_TRUE(node.wait(
      [&](const testkit::SimulatorStatus& status) {
        for (const auto& [resource, allocatable] : expected) {
          const auto* r = status.resource(resource);
          if (!r || r->registrations < 2 || !r->streaming || r->allocatable() != allocatable)
            return false;
        }
        return true;
      },
      5s))
      << node.log();
}

TEST_F(DaemonTest, LocalDeviceGoesAtOnceSharedOneAfterItsGrace) {
  echo_configuration("local", {"l0"}, 1);
  echo_configuration("shared", {"s0"}, 1, true, "  sharedOfflineGraceSeconds: 2\n");
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/local", 1)) << node.log();
  ASSERT_TRUE(node.wait_allocatable("akri.sh/shared", 1)) << node.log();
  auto shared_il = il_resources(instances(), "shared").at(0);
  ASSERT_TRUE(node.wait_allocatable(shared_il, 1));

  set_availability("local", "OFFLINE");
  set_availability("shared", "OFFLINE");
  EXPECT_TRUE(node.wait_allocatable("akri.sh/local", 0));
  EXPECT_TRUE(il_resources(instances(), "local").empty()) << "a local device goes at once";
  // The shared one stays, every slot Unhealthy, for its grace period.
  EXPECT_TRUE(node.wait_allocatable(shared_il, 0));
  EXPECT_EQ(il_resources(instances(), "shared").size(), 1u);
  EXPECT_TRUE(node.wait_stopped(shared_il, 6s)) << "the Instance is gone\n" << node.log();
  EXPECT_TRUE(il_resources(instances(), "shared").empty());

  // Back online: both come back.
  set_availability("local", "ONLINE");
  set_availability("shared", "ONLINE");
  EXPECT_TRUE(node.wait_allocatable("akri.sh/local", 1));
  EXPECT_TRUE(node.wait_allocatable("akri.sh/shared", 1));
}

// A handler that ends its session with an error: what is there is unknown,
// not gone. The devices it reported stay, a local one too, but are offered
// Unhealthy (also by a restarted dowserd, before any report), until the
// restarted session reports again.
TEST_F(DaemonTest, AFailedDiscoveryKeepsItsDevicesUnhealthyUntilItReportsAgain) {
  const fs::path devices = root_ / "devices.yaml";
  write_file(devices, "devices: [{id: cam-1}, {id: cam-2, shared: true}]\n");
  test_devices_configuration("devs", devices);
  const std::string local = "akri.sh/devs-" + naming::device_digest("cam-1", false, "node-a");
  const std::string shared = "akri.sh/devs-" + naming::device_digest("cam-2", true, "node-a");
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/devs", 2)) << node.log();
  ASSERT_TRUE(node.wait_allocatable(local, 2)) << node.log();
  ASSERT_TRUE(node.wait_allocatable(shared, 2)) << node.log();

  write_file(devices, "fail: lost the bus\n");
  EXPECT_TRUE(node.wait_allocatable(local, 0)) << node.log();
  EXPECT_TRUE(node.wait_allocatable(shared, 0)) << node.log();
  EXPECT_TRUE(node.wait_allocatable("akri.sh/devs", 0)) << node.log();
  EXPECT_NE(node.log().find("the handler ended discovery: lost the bus"), std::string::npos)
      << node.log();
  EXPECT_EQ(instances().size(), 2u) << "unknown is not gone";

  node.stop(SIGKILL);
  node.start();
  auto registered_again_unhealthy = [&](const testkit::SimulatorStatus& status) {
    for (const auto& name : {local, shared}) {
      const auto* resource = status.resource(name);
      if (!resource || resource->registrations < 2 || !resource->streaming ||
          resource->allocatable() != 0)
        return false;
    }
    return true;
  };
  EXPECT_TRUE(node.wait(registered_again_unhealthy)) << node.log();
  EXPECT_EQ(instances().size(), 2u);

  // The session is retried with its backoff: once it reports, what it
  // reports is Healthy again, and the local device it left out goes.
  write_file(devices, "devices: [{id: cam-2, shared: true}]\n");
  EXPECT_TRUE(node.wait_allocatable(shared, 2, 20s)) << node.log();  // up to 8 s of backoff
  EXPECT_TRUE(node.wait_allocatable("akri.sh/devs", 1)) << node.log();
  EXPECT_TRUE(node.wait_stopped(local)) << node.log();
  EXPECT_EQ(instances().size(), 1u);
}

// A stored Instance whose name makes no valid resource name (written by
// another tool) gets no plugin and an error naming it; it used to end dowserd
// when a failed discovery adopted it, at every restart.
TEST_F(DaemonTest, AStoredInstanceWithAnInvalidNameGetsNoPluginAndEndsNothing) {
  const fs::path devices = root_ / "devices.yaml";
  write_file(devices, "devices: [{id: cam-1, shared: true}]\n");
  test_devices_configuration("devs", devices);
  const std::string reported = "akri.sh/devs-" + naming::device_digest("cam-1", true, "node-a");
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable(reported, 2)) << node.log();
  store::Instance foreign;
  foreign.name = "devs-" + std::string(70, 'a');  // over the 63 characters of a resource name
  foreign.configuration_name = "devs";
  foreign.capacity = 2;
  foreign.shared = true;
  foreign.nodes = {"node-a"};
  store::FileInstanceStore(state_dir_ / "instances").create(foreign);

  write_file(devices, "fail: lost the bus\n");
  ASSERT_TRUE(node.wait_for_log("Instance default/" + foreign.name + ": no device plugin: "))
      << node.log();
  EXPECT_TRUE(node.wait_allocatable(reported, 0)) << node.log();
  write_file(devices, "devices: [{id: cam-1, shared: true}]\n");
  EXPECT_TRUE(node.wait_allocatable(reported, 2, 20s)) << node.log();  // up to 8 s of backoff
  EXPECT_TRUE(node.running()) << node.log();
}

// A pod keeps the device it was given: while it runs, a local device that
// goes away stays offline with its claim, so the slot is still taken if the
// device comes back; once the pod is gone and the claim reclaimed, it goes.
TEST_F(DaemonTest, ALocalDeviceInUseKeepsItsClaimsWhileItIsAway) {
  echo_configuration("local", {"l0"}, 2);
  auto& node = add_node("node-a", {"--reclaim-interval-ms=50", "--reclaim-grace-ms=200"});
  ASSERT_TRUE(node.wait_allocatable("akri.sh/local", 1)) << node.log();
  auto il = il_resources(instances(1), "local").at(0);
  ASSERT_TRUE(node.wait_allocatable(il, 2));
  // A CL claim: the IL list shows its slot Unhealthy, which makes it visible.
  ASSERT_TRUE(node.kubelet->allocate("akri.sh/local", pod_a, "c", 1).ok());
  ASSERT_TRUE(node.wait_allocatable(il, 1));

  set_availability("local", "OFFLINE");
  ASSERT_TRUE(node.wait_allocatable(il, 0)) << node.log();
  EXPECT_EQ(il_resources(instances(), "local").size(), 1u) << "kept for the pod";
  EXPECT_EQ(claims(instances()), 1u);

  set_availability("local", "ONLINE");
  EXPECT_TRUE(node.wait_allocatable(il, 1)) << "the pod's slot is still taken\n" << node.log();
  EXPECT_EQ(claims(instances()), 1u);

  set_availability("local", "OFFLINE");
  ASSERT_TRUE(node.wait_allocatable(il, 0)) << node.log();
  node.kubelet->delete_pod(pod_a);
  EXPECT_TRUE(node.wait_stopped(il, 5s)) << "the Instance is gone\n" << node.log();
  EXPECT_TRUE(il_resources(instances(), "local").empty());
}

// The same, with the claim released by an edit of the store instead of the
// reclaimer: the device is not reported again, so nothing but the store's
// change can let it go.
TEST_F(DaemonTest, AnOfflineDeviceGoesWhenItsClaimIsReleasedInTheStore) {
  echo_configuration("local", {"l0"}, 2);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/local", 1)) << node.log();
  auto il = il_resources(instances(1), "local").at(0);
  ASSERT_TRUE(node.kubelet->allocate("akri.sh/local", pod_a, "c", 1).ok());
  set_availability("local", "OFFLINE");
  ASSERT_TRUE(node.wait_allocatable(il, 0)) << node.log();
  ASSERT_EQ(il_resources(instances(), "local").size(), 1u) << "kept for the pod";

  auto stored = instances().at(0);
  stored.instance.device_usage.clear();
  store::FileInstanceStore(state_dir_ / "instances").update(stored.instance, stored.revision);
  EXPECT_TRUE(node.wait_stopped(il, 5s)) << "the Instance is gone\n" << node.log();
  EXPECT_TRUE(il_resources(instances(), "local").empty());
}

TEST_F(DaemonTest, AllocateResponseCarriesMountsDeviceNodesAndSuffixedEnvs) {
  write_file(config_dir_ / "devs.yaml", R"(apiVersion: akri.sh/v0
kind: Configuration
metadata: {name: devs}
spec:
  capacity: 1
  brokerProperties: {RESOLUTION: "800", URL: overridden}
  discoveryHandler:
    name: testDevices
    discoveryDetails: |
      devices:
        - id: cam-1
          properties: {URL: "rtsp://cam-1", MODEL: x}
          mounts: [{containerPath: /in, hostPath: /tmp/in, readOnly: true}]
          deviceNodes: [{containerPath: /dev/video0, hostPath: /dev/null, permissions: rw}]
)");
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/devs", 1)) << node.log();
  auto result = node.kubelet->allocate("akri.sh/devs", pod_a, "c", 1);
  ASSERT_TRUE(result.ok()) << result.status.error_message();
  const auto& response = result.response.container_responses(0);
  auto instance = instances().at(0).instance.name;
  std::string hash = hash_of(instance);
  EXPECT_EQ(response.envs().at("URL"), "overridden") << "the Configuration's properties win";
  EXPECT_EQ(response.envs().at("URL_" + hash), "overridden");
  EXPECT_EQ(response.envs().at("MODEL_" + hash), "x");
  EXPECT_EQ(response.envs().at("RESOLUTION"), "800");
  ASSERT_EQ(response.mounts_size(), 1);
  EXPECT_EQ(response.mounts(0).container_path(), "/in");
  EXPECT_TRUE(response.mounts(0).read_only());
  ASSERT_EQ(response.devices_size(), 1);
  EXPECT_EQ(response.devices(0).host_path(), "/dev/null");
  EXPECT_EQ(response.devices(0).permissions(), "rw");
  EXPECT_EQ(response.annotations().at("akri.agent.slot-" + instance + "-0"),
            "C:" + result.device_ids.at(0) + ":node-a");
}

// A handler reports, every millisecond, a valid device with devices that
// break the device rules of handler.h. Each of those is left out with one
// warning (not one per report) naming the handler, the Configuration and
// the problems; no Instance write fails; the valid device is served as usual.
TEST_F(DaemonTest, DevicesThatBreakTheDeviceRulesAreLeftOutWithOneWarningEach) {
  fixture_configuration(FIXTURE_REPORTS_BAD_DEVICES_SO, "fixtureReportsBadDevices", "mixed");
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/mixed", 1)) << node.log();
  auto result = node.kubelet->allocate("akri.sh/mixed", pod_a, "c", 1);
  ASSERT_TRUE(result.ok()) << result.status.error_message();
  EXPECT_EQ(instances().size(), 1u) << "only the valid device has an Instance";

  const std::string warning =
      "Configuration default/mixed: handler fixtureReportsBadDevices: device left out of the "
      "snapshot: device \"cam-utf8\": property \"NAME\": value is not valid UTF-8 (byte 4)";
  ASSERT_TRUE(node.wait_for_log(warning)) << node.log();
  const std::string log = node.log();
  EXPECT_EQ(log.find(warning), log.rfind(warning)) << "told once, not once per report: " << log;
  EXPECT_NE(log.find("device 3: struct_size 4 is smaller than the 1.0 device record (76 bytes): "
                     "rule V3"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("cannot write Instance"), std::string::npos) << log;
}

TEST_F(DaemonTest, KillNineDuringAllocationsLosesAndDuplicatesNothing) {
  echo_configuration("cams", {"cam0", "cam1", "cam2", "cam3"}, 3);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 4)) << node.log();
  std::atomic<bool> done{false};
  std::atomic<int> granted{0};
  std::thread allocations([&] {
    for (int i = 0; !done && i < 200; ++i) {
      auto result = node.kubelet->allocate("akri.sh/cams", {"default", "pod-" + std::to_string(i)},
                                           "c", 1 + i % 2);
      if (result.ok()) ++granted;
    }
  });
  ASSERT_TRUE(node.wait([&](const auto&) { return granted >= 3; }, 10s));
  node.stop(SIGKILL);
  done = true;
  allocations.join();
  // Every grant the kubelet saw is a claim in the store, and no slot twice.
  auto status = node.kubelet->status();
  size_t granted_devices = 0;
  for (const auto& allocation : status.allocations) granted_devices += allocation.device_ids.size();
  size_t stored = claims(instances());
  EXPECT_GE(stored, granted_devices) << "a granted claim was lost";
  EXPECT_LE(stored, granted_devices + 2) << "at most the call in flight may leave a claim";

  node.start();
  ASSERT_TRUE(node.wait([](const testkit::SimulatorStatus& s) {
    const auto* r = s.resource("akri.sh/cams");
    return r && r->registrations >= 2 && r->streaming;
  })) << node.log();
  EXPECT_EQ(claims(instances()), stored) << "the restart keeps every claim";
}

// Two daemons share one store as two nodes; both plugin kinds allocate
// concurrently on both nodes. No slot is ever granted twice.
TEST_F(DaemonTest, TwoNodesNeverHoldASlotTwice) {
  echo_configuration("cams", {"cam0", "cam1"}, 3, true);
  // Pods come and go; the reclaimer frees what they held, so slots cycle.
  // The grace must outlast an Allocate round trip (a claim is in the store
  // before the kubelet records it): generous, for slow sanitizer builds.
  std::vector<std::string> fast_reclaim = {"--reclaim-interval-ms=20", "--reclaim-grace-ms=400"};
  auto& a = add_node("node-a", fast_reclaim);
  auto& b = add_node("node-b", fast_reclaim);
  ASSERT_TRUE(a.wait_allocatable("akri.sh/cams", 2)) << a.log();
  ASSERT_TRUE(b.wait_allocatable("akri.sh/cams", 2)) << b.log();
  auto il = il_resources(instances(), "cams");
  ASSERT_EQ(il.size(), 2u) << "a shared device is one Instance for both nodes";
  for (const auto& resource : il) {
    ASSERT_TRUE(a.wait_allocatable(resource, 3));
    ASSERT_TRUE(b.wait_allocatable(resource, 3));
  }
  std::atomic<int> granted{0}, refused{0};
  auto hammer = [&](Node& node, int seed) {
    for (int i = 0; i < 40; ++i) {
      testkit::PodRef pod{"default", node.name() + "-" + std::to_string(i)};
      const std::string& resource = (i + seed) % 3 == 0 ? "akri.sh/cams" : il[(i + seed) % 2];
      // Try when this node's kubelet sees something free (the other node
      // may take it first: that race is the point).
      node.wait([&](const auto& status) { return Node::free_count(status, resource) > 0; }, 2s);
      ++(node.kubelet->allocate(resource, pod, "c", 1).ok() ? granted : refused);
      // Each pod lives for two rounds, then goes; the reclaimer frees its slot.
      node.kubelet->delete_pod({"default", node.name() + "-" + std::to_string(i - 2)});
    }
  };
  std::thread ta([&] { hammer(a, 0); });
  std::thread tb([&] { hammer(b, 1); });
  ta.join();
  tb.join();
  // Slots are few (2 x 3) and pods come and go: both outcomes happen a lot.
  std::cout << "granted " << granted << ", refused " << refused << "\n";
  EXPECT_GT(granted.load(), 15);
  EXPECT_GT(refused.load(), 5);

  // Every device id a kubelet holds maps to one slot, held for that node.
  std::map<std::string, std::string> usage;
  for (const auto& stored : instances())
    for (const auto& [slot, value] : stored.instance.device_usage) usage[slot] = value;
  std::set<std::string> il_slots_held;
  for (Node* node : {&a, &b}) {
    for (const auto& allocation : node->kubelet->status().allocations) {
      for (const auto& id : allocation.device_ids) {
        if (allocation.resource == "akri.sh/cams") {
          size_t found = 0;
          for (const auto& [slot, value] : usage)
            found += value == "C:" + id + ":" + node->name() ? 1 : 0;
          EXPECT_EQ(found, 1u) << node->name() << " vdev " << id;
        } else {
          EXPECT_TRUE(il_slots_held.insert(id).second) << id << " granted to two containers";
          EXPECT_EQ(usage[id], node->name()) << id;
        }
      }
    }
  }
  for (const auto& stored : instances()) EXPECT_LE(stored.instance.device_usage.size(), 3u);
}

}  // namespace
}  // namespace dowser::it

namespace dowser::it {
namespace {

// A kubelet may hang up a ListAndWatch before the plugin has computed the
// stream's first list; the plugin must not touch the stream after that and
// must keep serving. (A race this test opens the window for but cannot force; a
// dowserd that used a gone stream crashed with "pure virtual method called".)
TEST_F(DaemonTest, ListAndWatchStreamsDroppedAtOnceLeaveThePluginServing) {
  echo_configuration("cams", {"cam0"}, 1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  auto endpoint = node.kubelet->status().resource("akri.sh/cams")->endpoint;
  auto stub = v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
      "unix:" + (node.plugin_dir() / endpoint).string(), grpc::InsecureChannelCredentials()));
  // Several kubelets at once, so the core thread has a queue to work through
  // while the streams go.
  std::vector<std::thread> kubelets;
  for (int k = 0; k < 4; ++k) {
    kubelets.emplace_back([&stub] {
      for (int i = 0; i < 150; ++i) {
        grpc::ClientContext context;
        auto reader = stub->ListAndWatch(&context, v1beta1::Empty());
        context.TryCancel();
        reader->Finish();
      }
    });
  }
  for (auto& kubelet : kubelets) kubelet.join();
  ASSERT_TRUE(node.running()) << node.log();
  auto allocated = node.kubelet->allocate("akri.sh/cams", pod_a, "c", 1);
  EXPECT_TRUE(allocated.ok()) << allocated.status.error_message();
}

// GetPreferredAllocation must answer with ids Allocate can grant. With this
// node's held vdevs on both devices, the one with a free slot also has a
// placeholder: a held vdev on that device and its placeholder cannot be
// granted together (distinct devices), so a pod needing two gets the two held
// vdevs. The kubelet passes its available ids in any order; this test puts
// the placeholder before the held vdev on the full device.
TEST_F(DaemonTest, APreferredAllocationIsOneAllocateCanGrant) {
  echo_configuration("cams", {"cam0", "cam1"}, 2);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 2)) << node.log();
  const auto first = node.kubelet->allocate("akri.sh/cams", pod_a, "c", 1);
  ASSERT_TRUE(first.ok()) << first.status.error_message();
  const auto second = node.kubelet->allocate("akri.sh/cams", pod_b, "c", 1);
  ASSERT_TRUE(second.ok()) << second.status.error_message();
  const std::string on_second = "C:" + second.device_ids.at(0) + ":node-a";
  std::string full;  // the device the second vdev is on: its other slot goes to an IL pod
  for (const auto& stored : instances(2))
    for (const auto& [slot, usage] : stored.instance.device_usage)
      if (usage == on_second) full = "akri.sh/" + stored.instance.name;
  ASSERT_FALSE(full.empty());
  ASSERT_TRUE(node.wait_free(full, 1)) << node.log();  // the CL claim's slot listed as taken
  ASSERT_TRUE(node.kubelet->allocate(full, {"default", "pod-c"}, "c", 1).ok());
  node.kubelet->delete_pod(pod_a);  // their claims stay until the reclaimer's grace ends
  node.kubelet->delete_pod(pod_b);
  // Listed: the two held vdevs and one placeholder, for the device with a free slot.
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 3)) << node.log();
  const auto status = node.kubelet->status();
  const auto& cams = *status.resource("akri.sh/cams");
  std::string placeholder;
  for (const auto& device : cams.devices)
    if (device.id != first.device_ids.at(0) && device.id != second.device_ids.at(0))
      placeholder = device.id;

  auto stub = v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
      "unix:" + (node.plugin_dir() / cams.endpoint).string(), grpc::InsecureChannelCredentials()));
  v1beta1::PreferredAllocationRequest request;
  auto* container = request.add_container_requests();
  for (const auto& id : {first.device_ids.at(0), placeholder, second.device_ids.at(0)})
    container->add_available_deviceids(id);
  container->set_allocation_size(2);
  v1beta1::PreferredAllocationResponse preferred;
  grpc::ClientContext preferring;
  ASSERT_TRUE(stub->GetPreferredAllocation(&preferring, request, &preferred).ok());
  ASSERT_EQ(preferred.container_responses_size(), 1);
  const auto& ids = preferred.container_responses(0).deviceids();
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()),
            (std::set<std::string>{first.device_ids.at(0), second.device_ids.at(0)}));

  v1beta1::AllocateRequest allocate;
  *allocate.add_container_requests()->mutable_devices_ids() = ids;
  v1beta1::AllocateResponse granted;
  grpc::ClientContext allocating;
  const grpc::Status allocated = stub->Allocate(&allocating, allocate, &granted);
  EXPECT_TRUE(allocated.ok()) << allocated.error_message();
}

TEST_F(DaemonTest, ChangedDiscoveryDetailsRestartDiscovery) {
  echo_configuration("cams", {"cam0"}, 1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  echo_configuration("cams", {"cam0", "cam1", "cam2"}, 1);
  EXPECT_TRUE(node.wait_allocatable("akri.sh/cams", 3)) << node.log();
  EXPECT_EQ(il_resources(instances(3), "cams").size(), 3u);
  // Capacity alone changes the Instances without new discovery results.
  echo_configuration("cams", {"cam0", "cam1", "cam2"}, 2, false, "  uniqueInstances: Preferred\n");
  EXPECT_TRUE(node.wait_allocatable("akri.sh/cams", 6)) << node.log();
  for (const auto& stored : instances()) EXPECT_EQ(stored.instance.capacity, 2u);
}

TEST_F(DaemonTest, ABadManifestIsReportedAndTheOthersKeepRunning) {
  echo_configuration("good", {"g0"}, 1);
  write_file(config_dir_ / "bad.yaml",
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: bad}\n"
             "spec:\n  capacity: -3\n  discoveryHandler: {name: debugEcho}\n");
  write_file(config_dir_ / "refused.yaml",
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: refused}\n"
             "spec:\n  discoveryHandler: {name: debugEcho, discoveryDetails: '{{{'}\n");
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/good", 1)) << node.log();
  // Reported with file, field path and reason; the handler refuses bad details at load.
  EXPECT_TRUE(node.wait_for_log("bad.yaml: spec.capacity: must be an integer")) << node.log();
  EXPECT_TRUE(node.wait_for_log(
      "Configuration default/refused: refused by handler debugEcho: discovery details are not "
      "valid YAML"))
      << node.log();
  auto status = node.kubelet->status();
  EXPECT_EQ(status.resource("akri.sh/bad"), nullptr);
  EXPECT_EQ(status.resource("akri.sh/refused"), nullptr);
  EXPECT_TRUE(node.running());
}

// A handler's line about one session (log_session, through the SDK's
// Reporter) names its Configuration; debugEcho warns, through its session,
// that it cannot watch a directory that does not exist.
TEST_F(DaemonTest, AHandlersLineAboutASessionNamesItsConfiguration) {
  const fs::path missing = root_ / "not-there";
  write_file(config_dir_ / "watched.yaml",
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: watched}\n"
             "spec:\n  discoveryHandler:\n    name: debugEcho\n"
             "    discoveryDetails: 'descriptions: [cam0]'\n"
             "    discoveryProperties:\n      - name: DEBUG_ECHO_AVAILABILITY_FILE\n"
             "        value: " +
                 (missing / "availability").string() + "\n");
  auto& node = add_node("node-a");
  EXPECT_TRUE(
      node.wait_for_log("[debugEcho default/watched] debugEcho: cannot watch " + missing.string()))
      << node.log();
}

// The request a deleted Configuration's handler accepted is forgotten (the
// state file would otherwise keep every Configuration there ever was); one
// still defined keeps its line.
TEST_F(DaemonTest, ADeletedConfigurationLeavesNoAcceptedRequestBehind) {
  echo_configuration("cams", {"cam0"}, 1);
  echo_configuration("keep", {"k0"}, 1);
  auto& node = add_node("node-a");
  auto accepted = [&] { return read_text(state_dir_ / "accepted-requests"); };
  ASSERT_TRUE(test::eventually([&] {
    const std::string text = accepted();
    return text.find("default/cams ") != std::string::npos &&
           text.find("default/keep ") != std::string::npos;
  })) << accepted()
      << node.log();
  fs::remove(config_dir_ / "cams.yaml");
  EXPECT_TRUE(test::eventually([&] {
    return accepted().find("default/cams ") == std::string::npos;
  })) << accepted()
      << node.log();
  EXPECT_NE(accepted().find("default/keep "), std::string::npos) << accepted();
}

// A newline in what the daemon logs (here a file name) would forge a log
// line of its own for whatever reads the log line by line: it is spelled out.
TEST_F(DaemonTest, ANewlineInAFileNameStaysInsideItsLogLine) {
  echo_configuration("good", {"g0"}, 1);
  write_file(config_dir_ / "bad\n[2026-01-01 00:00:00.000] [dowserd] [info] forged.yaml",
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: bad}\n"
             "spec:\n  capacity: -3\n  discoveryHandler: {name: debugEcho}\n");
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/good", 1)) << node.log();
  EXPECT_TRUE(node.wait_for_log(
      "bad\\n[2026-01-01 00:00:00.000] [dowserd] [info] forged.yaml: spec.capacity: must be an "
      "integer"))
      << node.log();
  std::istringstream lines(node.log());
  for (std::string line; std::getline(lines, line);)
    EXPECT_NE(line.rfind("[2026-01-01 00:00:00.000]", 0), 0u) << "a forged line: " << line;
}

// Restarted while a Configuration's file is invalid, dowserd does not know
// that Configuration: unknown is not gone, so its Instances and the claims
// of its running pods stay (they were withdrawn, and their slots handed out
// again). Instances of a Configuration really gone go once every file reads.
TEST_F(DaemonTest, ARestartWhileAFileIsInvalidKeepsItsClaims) {
  echo_configuration("cams", {"cam0"}, 2);
  echo_configuration("old", {"old0"}, 1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/old", 1)) << node.log();
  const auto il = il_resources(instances(2), "cams").at(0);
  ASSERT_TRUE(node.wait_allocatable(il, 2)) << node.log();
  ASSERT_TRUE(node.kubelet->allocate(il, pod_a, "c", 1).ok());
  node.stop(SIGKILL);

  std::ifstream original(config_dir_ / "cams.yaml");
  const std::string cams(std::istreambuf_iterator<char>(original), {});
  write_file(config_dir_ / "cams.yaml", "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: [");
  fs::remove(config_dir_ / "old.yaml");
  node.start();
  ASSERT_TRUE(
      node.wait_for_log("keeping the Instances of Configurations not found while 1 source "
                        "of Configurations cannot be read"))
      << node.log();
  EXPECT_EQ(instances().size(), 2u);
  EXPECT_EQ(claims(instances()), 1u) << "pod-a's claim is kept";

  write_file(config_dir_ / "cams.yaml", cams);
  ASSERT_TRUE(node.wait_for_log("its Configuration default/old is gone; withdrawing"))
      << node.log();
  EXPECT_EQ(instances(1).size(), 1u) << "the Instance of the Configuration gone is withdrawn";
  ASSERT_TRUE(node.wait_free(il, 1)) << node.log();
  EXPECT_TRUE(node.kubelet->allocate(il, pod_b, "c", 1).ok());
  EXPECT_FALSE(node.kubelet->allocate(il, {"default", "pod-c"}, "c", 1).ok())
      << "capacity 2: pod-a's slot was not handed out again";
}

// A file unreadable at a restart, then fixed into a duplicate of another
// file's Configuration: it is read now, and names what it holds, so the
// Instances of a Configuration really gone are withdrawn (no file became
// valid, which was the only moment dowserd looked again).
TEST_F(DaemonTest, AFileFixedIntoADuplicateLetsTheInstancesOfAGoneConfigurationGo) {
  auto& node = node_killed_after_serving_old_and_cams();
  ASSERT_FALSE(HasFailure());

  std::ifstream original(config_dir_ / "cams.yaml");
  const std::string cams(std::istreambuf_iterator<char>(original), {});
  fs::remove(config_dir_ / "old.yaml");
  write_file(config_dir_ / "copy.yaml", "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: [");
  node.start();
  ASSERT_TRUE(
      node.wait_for_log("keeping the Instances of Configurations not found while 1 source "
                        "of Configurations cannot be read"))
      << node.log();
  ASSERT_EQ(instances().size(), 2u);

  write_file(config_dir_ / "copy.yaml", cams);  // now a duplicate of cams.yaml
  ASSERT_TRUE(node.wait_for_log("is already defined in")) << node.log();
  EXPECT_TRUE(node.wait_for_log("its Configuration default/old is gone; withdrawing"))
      << node.log();
  EXPECT_EQ(instances(1).size(), 1u) << "only the Instance of cams is left";
}

// A file that duplicates a refused Configuration names it: while the
// duplicate stands, its Instances are kept (the file is not used, so what it
// holds is not known to be gone). Once the duplicate goes the file source
// says only that the file is valid, with no verdict after it: the Instances
// stayed until some other Configuration changed.
TEST_F(DaemonTest, ARefusedConfigurationLosesItsInstancesOnceItsDuplicateGoes) {
  auto& node = node_with_refused_cams_and_its_duplicate();
  ASSERT_FALSE(HasFailure());
  fs::remove(config_dir_ / "copy.yaml");
  EXPECT_TRUE(node.wait_for_log("its Configuration default/cams is not served (refused by handler"))
      << node.log();
  EXPECT_EQ(instances(0).size(), 0u) << node.log();
}

// The duplicate broken before it goes: its unreadable file keeps every
// Instance while it stands, and once it goes cams's Instance goes too. The
// record of the file's error named cams no more, and nothing looked again.
TEST_F(DaemonTest, ARefusedConfigurationLosesItsInstancesOnceItsBrokenDuplicateGoes) {
  auto& node = node_with_refused_cams_and_its_duplicate();
  ASSERT_FALSE(HasFailure());
  write_file(config_dir_ / "copy.yaml", "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: [");
  ASSERT_TRUE(node.wait_for_log("keeping the Instances of Configurations not found while 1 source"))
      << node.log();
  EXPECT_EQ(instances().size(), 1u) << node.log();
  fs::remove(config_dir_ / "copy.yaml");
  EXPECT_TRUE(node.wait_for_log("its Configuration default/cams is not served (refused by handler"))
      << node.log();
  EXPECT_EQ(instances(0).size(), 0u) << node.log();
}

TEST_F(DaemonTest, ASecondNamespaceCannotTakeTheSameResourceName) {
  echo_configuration("cams", {"cam0"}, 1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  write_file(config_dir_ / "other.yaml",
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: cams, namespace: "
             "other}\nspec:\n  discoveryHandler: {name: debugEcho, discoveryDetails: "
             "'descriptions: [x, y]'}\n");
  EXPECT_TRUE(node.wait_for_log("Configuration other/cams")) << node.log();
  EXPECT_TRUE(node.wait_for_log("resource name is taken by Configuration default/cams"))
      << node.log();
  EXPECT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << "the first keeps its resource";

  // Once the first goes, the one that waited takes the name (two devices).
  fs::remove(config_dir_ / "cams.yaml");
  EXPECT_TRUE(node.wait_allocatable("akri.sh/cams", 2)) << node.log();
}

// At a start the files are read in name order, not in the order they came:
// the Configuration that held the resource name before (its Instances, and
// the claims of its pods, are in the store) keeps it, though read last.
TEST_F(DaemonTest, ARestartKeepsTheResourceNameWithTheConfigurationThatHeldIt) {
  echo_configuration("cams", {"cam0"}, 1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  ASSERT_TRUE(node.kubelet->allocate("akri.sh/cams", pod_a, "c", 1).ok()) << node.log();
  write_file(config_dir_ / "a-other.yaml",  // read before cams.yaml
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: cams, namespace: "
             "other}\nspec:\n  discoveryHandler: {name: debugEcho, discoveryDetails: "
             "'descriptions: [x, y]'}\n");
  ASSERT_TRUE(node.wait_for_log("resource name is taken by Configuration default/cams"))
      << node.log();
  node.stop(SIGKILL);
  const std::string taken =
      "Configuration other/cams: its resource name is taken by Configuration default/cams";
  const size_t taken_before = occurrences(node.log(), taken);  // the log goes on across restarts

  node.start();
  EXPECT_TRUE(
      node.wait_for_log("Configuration other/cams: its resource name was held by Configuration "
                        "default/cams before this start (its Instances are in the store)"))
      << node.log();
  EXPECT_TRUE(node.wait_for_log(taken, 10s, taken_before + 1))
      << "told again once every Configuration is read" << node.log();
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 1))
      << "not the two devices of other/cams" << node.log();
  EXPECT_EQ(instances(1).size(), 1u);
  EXPECT_EQ(claims(instances()), 1u) << "pod-a's claim is kept";
  EXPECT_FALSE(node.kubelet->allocate("akri.sh/cams", pod_b, "c", 1).ok())
      << "default/cams (capacity 1, held by pod-a) serves akri.sh/cams, not other/cams";
}

// An IL plugin is named after its Instance: a Configuration of that name
// would take its resource name (and its plugin) away.
TEST_F(DaemonTest, AConfigurationCannotTakeTheResourceNameOfAnInstance) {
  echo_configuration("cams", {"cam0"}, 2);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  ASSERT_EQ(instances().size(), 1u);
  const std::string instance = instances().front().instance.name;
  write_file(config_dir_ / "clash.yaml",
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: " + instance +
                 "}\nspec:\n  discoveryHandler: {name: debugEcho, discoveryDetails: "
                 "'descriptions: [x]'}\n");
  EXPECT_TRUE(node.wait_for_log("Configuration default/" + instance +
                                ": its resource name is taken by the device plugin of Instance " +
                                instance + " (of Configuration default/cams)"))
      << node.log();
  // The Instance's own plugin keeps its two slots.
  auto result = node.kubelet->allocate("akri.sh/" + instance, pod_a, "c", 2);
  EXPECT_TRUE(result.ok()) << result.status.error_message() << node.log();
}

// A handler that exports more than its entry works, and is warned of as
// dowser-handler-check warns of it: its symbols can clash with the host's.
TEST_F(DaemonTest, AHandlerExportingMoreThanItsEntryIsLoadedWithAWarning) {
  fixture_configuration(FIXTURE_EXPORTS_EXTRA_SO, "fixtureExportsExtra", "extra");
  auto& node = add_node("node-a");
  EXPECT_TRUE(node.wait_for_log("[warning] handler fixtureExportsExtra (" +
                                (handler_dir_ / "libfixture-exports-extra.so").string() +
                                "): exports 2 symbol(s) besides dowser_get_handler_api: "))
      << node.log();
  EXPECT_TRUE(node.wait_for_log("Configuration default/extra added")) << "loaded all the same";
  EXPECT_EQ(node.log().find("handler debugEcho ("), std::string::npos)
      << "a handler built with the SDK exports only its entry: " << node.log();
}

TEST_F(DaemonTest, AConfigurationWaitsForItsHandlerToAppear) {
  fs::remove(handler_dir_ / "libfixture-test-devices.so");
  write_file(config_dir_ / "late.yaml",
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: late}\n"
             "spec:\n  discoveryHandler:\n    name: testDevices\n"
             "    discoveryDetails: 'devices: [{id: d1}]'\n");
  auto& node = add_node("node-a", {"--handler-rescan-ms=100"});
  ASSERT_TRUE(node.wait_for_log("no discovery handler named 'testDevices' is loaded"))
      << node.log();
  fs::copy_file(TEST_DEVICES_SO, handler_dir_ / "libfixture-test-devices.so");
  EXPECT_TRUE(node.wait_allocatable("akri.sh/late", 1)) << node.log();
}

// A Configuration the handler would have refused had it been loaded (bad
// details) was retried for ever once it came, with a CL plugin of no
// devices: it is now refused as it would have been, and runs once fixed.
TEST_F(DaemonTest, ABadConfigurationWhoseHandlerCameLaterIsRefusedLikeAnyOther) {
  fs::remove(handler_dir_ / "libfixture-test-devices.so");
  const std::string manifest =
      "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: late}\n"
      "spec:\n  discoveryHandler:\n    name: testDevices\n    discoveryDetails: ";
  write_file(config_dir_ / "late.yaml", manifest + "'devices: 5'\n");
  auto& node = add_node("node-a", {"--handler-rescan-ms=100"});
  ASSERT_TRUE(node.wait_for_log("no discovery handler named 'testDevices' is loaded"))
      << node.log();
  // Its CL plugin registered first: one withdrawn before it registered is
  // never known to the kubelet, so its stop could not be seen.
  ASSERT_TRUE(node.wait_allocatable("akri.sh/late", 0)) << node.log();
  fs::copy_file(TEST_DEVICES_SO, handler_dir_ / "libfixture-test-devices.so");
  EXPECT_TRUE(node.wait_for_log("Configuration default/late: refused by handler testDevices"))
      << node.log();
  EXPECT_TRUE(node.wait_stopped("akri.sh/late")) << "its CL plugin stays: " << node.log();
  EXPECT_EQ(node.log().find("(retrying in 1000 ms)", node.log().find("refused by handler")),
            std::string::npos)
      << "not retried: " << node.log();

  write_file(config_dir_ / "late.yaml", manifest + "'devices: [{id: d1}]'\n");
  EXPECT_TRUE(node.wait_allocatable("akri.sh/late", 1)) << node.log();
}

// A change its handler refused only as discovery started (it has no
// validate_request, or validating timed out) withdrew the Configuration: its
// Instances and the claims of running pods went. Refused like a change
// validate_request refuses, it now leaves the version the handler accepted
// before running. (fixtureRefusesLater refuses any details while its state
// file says "refuse", and retries a refusal of details it accepted before.)
TEST_F(DaemonTest, AChangeRefusedAsDiscoveryStartsLeavesThePreviousVersionRunning) {
  fs::copy_file(FIXTURE_REFUSES_LATER_SO, handler_dir_ / "libfixture-refuses-later.so");
  const fs::path state = root_ / "refuses-later-state";
  const auto manifest = [&](const std::string& details, int capacity) {
    return "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: later}\nspec:\n"
           "  capacity: " +
           std::to_string(capacity) +
           "\n  discoveryHandler:\n    name: fixtureRefusesLater\n    discoveryDetails: '" +
           details + "'\n    discoveryProperties:\n      - {name: FIXTURE_STATE_FILE, value: " +
           state.string() + "}\n      - {name: FIXTURE_REPORT_DEVICE, value: dev1}\n";
  };
  const auto capacity_stored = [&] {
    const auto stored = instances();
    return stored.size() == 1 ? stored[0].instance.capacity : 0;
  };
  write_file(config_dir_ / "later.yaml", manifest("first", 1));
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_for_log("Configuration default/later added")) << node.log();
  ASSERT_TRUE(test::eventually([&] { return capacity_stored() == 1; })) << node.log();
  // Taken by the running session without a restart: the accepted version now.
  write_file(config_dir_ / "later.yaml", manifest("first", 2));
  ASSERT_TRUE(test::eventually([&] { return capacity_stored() == 2; })) << node.log();

  write_file(state, "refuse");
  write_file(config_dir_ / "later.yaml", manifest("second", 2));
  ASSERT_TRUE(
      node.wait_for_log("Configuration default/later: refused by handler "
                        "fixtureRefusesLater: "))
      << node.log();
  EXPECT_TRUE(node.wait_for_log("the version its handler accepted before runs on")) << node.log();
  // Logged once the revert's Instances were written (on the same thread, after them): the
  // accepted version's start, refused too while the state file says so, is retried.
  ASSERT_TRUE(node.wait_for_log("fixture: refuses these details now (retrying in")) << node.log();
  EXPECT_EQ(node.log().find("withdrawn: its handler refused it"), std::string::npos) << node.log();
  ASSERT_EQ(instances().size(), 1u) << "its device's Instance stays";
  EXPECT_EQ(instances().at(0).instance.nodes, std::set<std::string>{"node-a"});
  EXPECT_EQ(capacity_stored(), 2u) << "the version accepted last runs on, not the first one";
}

// A kubelet reinstall (or kubeadm reset) deletes the kubelet directory and
// makes it again. dowserd's lock file kept the deleted directory in use, so
// the kernel never said it was deleted: the lock was never taken again in
// the new directory.
TEST_F(DaemonTest, AKubeletDirectoryMadeAnewIsLockedAndServedAgain) {
  echo_configuration("cams", {"cam0"}, 1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  const auto config = node.kubelet->config();

  node.kubelet.reset();
  // dowserd serves a fresh socket for each one deleted until it sees the
  // directory go, so the removal may find it not empty: tried again.
  std::error_code not_empty;
  for (int attempt = 0; attempt < 100 && fs::exists(node.plugin_dir()); ++attempt)
    fs::remove_all(node.plugin_dir(), not_empty);
  ASSERT_FALSE(fs::exists(node.plugin_dir())) << not_empty.message();
  node.kubelet = std::make_unique<testkit::KubeletSimulator>(config);

  EXPECT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  const int lock_file = ::open((node.plugin_dir() / "dowserd.lock").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(lock_file, 0) << "no lock file in the new directory: " << node.log();
  const bool taken = ::flock(lock_file, LOCK_EX | LOCK_NB) == 0;
  const int error = errno;
  ::close(lock_file);
  EXPECT_FALSE(taken) << "the lock file in the new directory is not locked";
  EXPECT_EQ(error, EWOULDBLOCK) << std::strerror(error);
}

// A Configuration refused after a restart, before its first snapshot, had
// its Instances from before the restart kept for ever: withdrawing it only
// withdrew the devices its handler had reported since.
TEST_F(DaemonTest, AConfigurationRefusedAfterARestartLeavesNoInstanceBehind) {
  const std::string manifest =
      "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: late}\n"
      "spec:\n  discoveryHandler:\n    name: testDevices\n    discoveryDetails: ";
  write_file(config_dir_ / "late.yaml", manifest + "'devices: [{id: d1}]'\n");
  auto& node = add_node("node-a", {"--handler-rescan-ms=100"});
  ASSERT_TRUE(node.wait_allocatable("akri.sh/late", 1)) << node.log();
  ASSERT_EQ(instances(1).size(), 1u) << node.log();
  node.stop(SIGKILL);

  fs::remove(handler_dir_ / "libfixture-test-devices.so");
  write_file(config_dir_ / "late.yaml", manifest + "'devices: 5'\n");
  node.start();
  ASSERT_TRUE(node.wait_for_log("no discovery handler named 'testDevices' is loaded"))
      << node.log();
  EXPECT_EQ(instances().size(), 1u) << "kept while the handler may still accept it";
  fs::copy_file(TEST_DEVICES_SO, handler_dir_ / "libfixture-test-devices.so");
  ASSERT_TRUE(node.wait_for_log("Configuration default/late: refused by handler testDevices"))
      << node.log();
  EXPECT_EQ(instances(0).size(), 0u) << node.log();
}

// One refused at once after a restart (its handler is loaded) is withdrawn
// with the stored Instances of Configurations not found, and the log says
// it is refused, not gone.
TEST_F(DaemonTest, AConfigurationRefusedAtARestartIsWithdrawnAsRefused) {
  echo_configuration("cams", {"cam0"}, 1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  ASSERT_EQ(instances(1).size(), 1u) << node.log();
  node.stop(SIGKILL);

  write_file(config_dir_ / "cams.yaml",
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: cams}\n"
             "spec:\n  discoveryHandler: {name: debugEcho, discoveryDetails: '{{{'}\n");
  node.start();
  EXPECT_TRUE(node.wait_for_log(
      "its Configuration default/cams is not served (refused by handler debugEcho: discovery "
      "details are not valid YAML"))
      << node.log();
  EXPECT_EQ(node.log().find("is gone"), std::string::npos) << node.log();
  EXPECT_EQ(instances(0).size(), 0u) << node.log();
}

// Claims name their node (C:<vdev>:<node>): a ':' in it made claims nobody
// could read back, so they were never freed.
TEST_F(DaemonTest, ANodeNameKubernetesWouldRefuseIsRefusedAtStart) {
  auto& node = add_node("x:y");
  auto status = node.wait_exit();
  ASSERT_TRUE(status.has_value()) << "still running: " << node.log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2) << node.log();
  EXPECT_NE(node.log().find("--node-name 'x:y': a node name must be a DNS subdomain"),
            std::string::npos)
      << node.log();
}

// Every mistake on the command line exits 2, a choice named as it is
// documented (it was "0" in --help and accepted); a repeated option takes its
// last value (it was fatal), so one from DOWSERD_OPTS can be overridden.
TEST_F(DaemonTest, CommandLineMistakesExitTwoAndARepeatedOptionTakesItsLastValue) {
  auto& numbered = add_node("node-a", {"--store=0"});
  auto status = numbered.wait_exit();
  ASSERT_TRUE(status.has_value()) << "still running: " << numbered.log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2) << numbered.log();
  EXPECT_NE(numbered.log().find("--store: 0 not in {file,kubernetes}"), std::string::npos)
      << numbered.log();

  echo_configuration("cams", {"cam0"}, 1);
  auto& quiet = add_node("node-b", {"--log-level=warn"});  // after the harness's debug
  ASSERT_TRUE(quiet.wait_allocatable("akri.sh/cams", 1)) << quiet.log();
  EXPECT_EQ(quiet.log().find("[debug]"), std::string::npos) << quiet.log();
}

// gRPC's own lines (here: why a socket path cannot be bound) come through
// dowserd's log, in its format, not as raw lines of gRPC's on stderr.
TEST_F(DaemonTest, GrpcsOwnLinesComeThroughTheDaemonsLog) {
  echo_configuration("cams", {"cam0"}, 1);
  const auto too_long = root_ / std::string(110, 'k');  // sockets in it exceed sun_path
  fs::create_directories(too_long);
  auto& node = add_node("node-a", {"--kubelet-dir=" + too_long.string()});
  ASSERT_TRUE(node.wait_for_log("the path is too long for a unix socket")) << node.log();
  EXPECT_NE(node.log().find("[warning] gRPC: "), std::string::npos) << node.log();
  std::istringstream lines(node.log());
  for (std::string line; std::getline(lines, line);)
    EXPECT_EQ(line.rfind("[20", 0), 0u) << "not in dowserd's format: " << line;
}

// A second dowserd on one kubelet directory (a manual run beside the
// service) re-registered every plugin over the first one's; once stopped it
// left the kubelet with no plugin while the first still said it was ready.
TEST_F(DaemonTest, ASecondDaemonOnTheSameKubeletDirectoryRefusesToStart) {
  echo_configuration("cams", {"cam0"}, 1);
  auto& first = add_node("node-a");
  ASSERT_TRUE(first.wait_allocatable("akri.sh/cams", 1)) << first.log();
  const size_t registrations = first.kubelet->status().resource("akri.sh/cams")->registrations;
  auto& second = add_node("node-a-again", {"--kubelet-dir=" + first.plugin_dir().string(),
                                           "--kubelet-lock-wait-ms=200"});
  auto status = second.wait_exit();
  ASSERT_TRUE(status.has_value()) << "still running: " << second.log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << second.log();
  EXPECT_NE(second.log().find("another dowserd (pid "), std::string::npos) << second.log();
  EXPECT_EQ(first.kubelet->status().resource("akri.sh/cams")->registrations, registrations)
      << "nothing re-registered";
  EXPECT_TRUE(first.running());
}

// A rolling update: the new dowserd waits for the old one to stop, then serves.
TEST_F(DaemonTest, ADaemonWaitsForTheOneStoppingOnItsKubeletDirectory) {
  echo_configuration("cams", {"cam0"}, 1);
  auto& old_one = add_node("node-a");
  ASSERT_TRUE(old_one.wait_allocatable("akri.sh/cams", 1)) << old_one.log();
  const size_t registrations = old_one.kubelet->status().resource("akri.sh/cams")->registrations;
  auto& new_one = add_node("node-a-new", {"--kubelet-dir=" + old_one.plugin_dir().string()});
  ASSERT_TRUE(new_one.wait_for_log("waiting up to 10000 ms for it to stop")) << new_one.log();
  old_one.stop(SIGTERM);
  EXPECT_TRUE(old_one.wait([&](const testkit::SimulatorStatus& s) {
    const auto* cams = s.resource("akri.sh/cams");
    return cams != nullptr && cams->registrations > registrations && cams->streaming &&
           cams->allocatable() == 1;
  })) << new_one.log();
  EXPECT_TRUE(new_one.running());
}

// A second dowserd for the same node on the same file store, with its own
// kubelet directory (a debug run beside the service), freed every claim of
// the first within seconds: its reclaimer asked its own kubelet, which lists
// none of the first one's pods.
TEST_F(DaemonTest, ASecondDaemonForTheSameNodeAndStateDirectoryRefusesToStart) {
  echo_configuration("cams", {"cam0"}, 1);
  auto& first = add_node("node-a");
  ASSERT_TRUE(first.wait_allocatable("akri.sh/cams", 1)) << first.log();
  ASSERT_TRUE(first.kubelet->allocate("akri.sh/cams", pod_a, "c", 1).ok());
  ASSERT_EQ(claims(instances()), 1u);
  // Its own kubelet directory; the later --node-name wins. Reclaiming at
  // once, it would free the first one's claim on its first pass.
  auto& second = add_node("debug", {"--node-name=node-a", "--kubelet-lock-wait-ms=200",
                                    "--reclaim-interval-ms=10", "--reclaim-grace-ms=0"});
  auto status = second.wait_exit();
  ASSERT_TRUE(status.has_value()) << "still running: " << second.log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << second.log();
  EXPECT_NE(second.log().find("another dowserd (pid " + std::to_string(first.pid()) +
                              ") serves node node-a with the state directory " +
                              state_dir_.string() + "; stop it first"),
            std::string::npos)
      << second.log();
  EXPECT_EQ(claims(instances()), 1u) << "the first one's claim is intact";
  EXPECT_TRUE(first.running());
  EXPECT_TRUE(first.wait_free("akri.sh/cams", 0)) << "its slot is still taken\n" << first.log();
}

// A rolling update whose new dowserd has its own kubelet directory: it
// waits for the old one to stop, then serves the node.
TEST_F(DaemonTest, ADaemonWaitsForTheOneStoppingThatServesItsNode) {
  echo_configuration("cams", {"cam0"}, 1);
  auto& old_one = add_node("node-a");
  ASSERT_TRUE(old_one.wait_allocatable("akri.sh/cams", 1)) << old_one.log();
  auto& new_one = add_node("new", {"--node-name=node-a"});
  ASSERT_TRUE(new_one.wait_for_log("serves node node-a with the state directory " +
                                   state_dir_.string() + "; waiting up to 10000 ms for it to stop"))
      << new_one.log();
  EXPECT_EQ(new_one.kubelet->status().resource("akri.sh/cams"), nullptr) << "nothing served yet";
  // Not yet able to log it, it ignores SIGHUP all the same (it used to end it).
  ASSERT_TRUE(new_one.send_signal(SIGHUP));
  old_one.stop(SIGTERM);
  EXPECT_TRUE(new_one.wait_allocatable("akri.sh/cams", 1)) << new_one.log();
  EXPECT_TRUE(new_one.running());
}

// Several nodes may share one file store: the lock is per node name.
TEST_F(DaemonTest, DaemonsOfDifferentNodesShareOneStateDirectory) {
  echo_configuration("cams", {"cam0"}, 1, true);
  auto& a = add_node("node-a");
  auto& b = add_node("node-b");
  EXPECT_TRUE(a.wait_allocatable("akri.sh/cams", 1)) << a.log();
  EXPECT_TRUE(b.wait_allocatable("akri.sh/cams", 1)) << b.log();
  EXPECT_TRUE(a.running() && b.running());
  EXPECT_TRUE(fs::is_regular_file(state_dir_ / "node-node-a.lock"));
  EXPECT_TRUE(fs::is_regular_file(state_dir_ / "node-node-b.lock"));
}

// A torn Instance file (a crash mid-write, before the journal existed, or a
// bad hand edit) made its device's write fail once, and nothing tried again:
// the device stayed away until a restart, though deleting the file is the
// documented remedy.
TEST_F(DaemonTest, AnInstanceThatCouldNotBeWrittenIsWrittenOnceTheCauseIsGone) {
  echo_configuration("cams", {"cam0"}, 1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  auto stored = instances(1);
  ASSERT_EQ(stored.size(), 1u);
  const fs::path file = state_dir_ / "instances" / "default" / (stored[0].instance.name + ".json");
  node.stop(SIGTERM);
  write_file(file, R"({"apiVersion": "akri.sh/v0", "kind": "Inst)");
  node.start();
  ASSERT_TRUE(node.wait_for_log("cannot write Instance " + stored[0].instance.name)) << node.log();
  fs::remove(file);
  EXPECT_TRUE(node.wait_allocatable("akri.sh/cams", 1, 20s)) << node.log();
  EXPECT_EQ(instances(1).size(), 1u);
}

// A withdrawal the store refused (here a torn Instance file; with the
// Kubernetes store, an API server out of reach) left this node in the
// Instance, with its claims, until dowserd restarted. It is tried again.
TEST_F(DaemonTest, AWithdrawalTheStoreRefusedIsTriedAgain) {
  echo_configuration("cams", {"cam0"}, 1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  const auto stored = instances(1).at(0);
  const fs::path file = state_dir_ / "instances" / "default" / (stored.instance.name + ".json");
  const std::string good = read_text(file);
  write_file(file, R"({"apiVersion": "akri.sh/v0", "kind": "Inst)");
  fs::remove(config_dir_ / "cams.yaml");
  ASSERT_TRUE(node.wait_for_log(stored.instance.name + ": could not withdraw this node"))
      << node.log();
  ASSERT_TRUE(fs::exists(file));

  write_file(file, good);
  EXPECT_TRUE(test::eventually([&] { return !fs::exists(file); }))
      << "the last node out deletes it\n"
      << node.log();
}

// One device of capacity 2, and pod_a holding one slot of it through its IL
// plugin (il_): what a store edit from outside may take away.
class SlotTakenFromOutsideTest : public DaemonTest {
 protected:
  Node& hold_one_slot(std::vector<std::string> extra_args = {}) {
    echo_configuration("cams", {"cam0"}, 2);
    Node& node = add_node("node-a", std::move(extra_args));
    EXPECT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
    il_ = il_resources(instances(1), "cams").at(0);
    EXPECT_TRUE(node.wait_allocatable(il_, 2)) << node.log();
    EXPECT_TRUE(node.kubelet->allocate(il_, pod_a, "c", 1).ok());
    EXPECT_EQ(claims(instances()), 1u);
    return node;
  }

  std::string il_;
};

// Deleted from outside (an Instance file removed, kubectl delete akrii) while
// its device is still discovered: its plugin stopped, and nothing brought it
// back until the handler reported a change (debugEcho reports none); once
// back, its slots were all free though pods here still used one. Now it is
// written again with this node's claims, and its plugin serves again.
TEST_F(SlotTakenFromOutsideTest, AnInstanceDeletedFromOutsideIsWrittenAgainWithItsClaims) {
  Node& node = hold_one_slot();
  const auto before = instances(1).at(0);
  store::FileInstanceStore(state_dir_ / "instances")
      .remove("default", before.instance.name, before.revision);
  ASSERT_TRUE(node.wait_for_log("Instance " + before.instance.name + " was deleted from outside"))
      << node.log();
  ASSERT_TRUE(node.wait_for_log("Instance " + before.instance.name + ": restored the claim"))
      << node.log();
  const auto after = instances(1).at(0);
  EXPECT_GT(after.revision, before.revision);
  EXPECT_EQ(after.instance, before.instance) << "written again, with the pod's claim";
  // The slot the pod holds is not given again; the other one is.
  EXPECT_TRUE(node.wait_free(il_, 1)) << node.log();
  EXPECT_TRUE(node.kubelet->allocate(il_, pod_b, "c", 1).ok()) << "its plugin serves";
  EXPECT_FALSE(node.kubelet->allocate(il_, {"default", "pod-c"}, "c", 1).ok())
      << "capacity 2: both slots are held";
}

// The same for an edit that takes this node out of the Instance, its claim
// with it (a hand edit; with the Kubernetes store, another node's dead-node
// cleanup of this one while it still runs).
TEST_F(SlotTakenFromOutsideTest, AnInstanceEditedToLeaveThisNodeOutIsJoinedAgainWithItsClaims) {
  Node& node = hold_one_slot();
  const auto before = instances(1).at(0);
  auto edited = before.instance;
  edited.nodes.clear();
  edited.device_usage.clear();
  store::FileInstanceStore(state_dir_ / "instances").update(edited, before.revision);
  ASSERT_TRUE(node.wait_for_log("Instance " + before.instance.name +
                                " was edited from outside to leave this node out"))
      << node.log();
  ASSERT_TRUE(node.wait_for_log("Instance " + before.instance.name + ": restored the claim"))
      << node.log();
  EXPECT_EQ(instances(1).at(0).instance, before.instance) << "joined again, with the pod's claim";
}

// A claim taken out of the store by hand (or with its Configuration deleted
// and made again) while its pod runs: the reclaimer's list shows the pod
// still uses the slot. An IL slot, free, is claimed again for it.
TEST_F(SlotTakenFromOutsideTest, AnILSlotInUseThatLostItsClaimIsClaimedAgain) {
  Node& node = hold_one_slot({"--reclaim-interval-ms=50", "--reclaim-grace-ms=200"});
  auto stored = instances(1).at(0);
  const auto [slot, usage] = *stored.instance.device_usage.begin();
  EXPECT_FALSE(node.log().find("claimed slot") != std::string::npos)
      << "nothing to do while the claim is there";

  stored.instance.device_usage.clear();
  store::FileInstanceStore(state_dir_ / "instances").update(stored.instance, stored.revision);
  EXPECT_TRUE(node.wait_for_log("Instance " + stored.instance.name + ": claimed slot " +
                                slot.substr(slot.rfind('-') + 1) + " again"))
      << node.log();
  EXPECT_EQ(instances(1).at(0).instance.device_usage,
            (std::map<std::string, std::string>{{slot, usage}}));
  EXPECT_FALSE(node.log().find("but no claim of this node's is on it") != std::string::npos);
}

// A CL device names no slot: one that lost its claim cannot be claimed
// again for sure, and is warned of, since its slot may go to another pod.
TEST_F(SlotTakenFromOutsideTest, ACLDeviceInUseThatLostItsClaimIsWarnedOf) {
  echo_configuration("cams", {"cam0"}, 2);
  Node& node = add_node("node-a", {"--reclaim-interval-ms=50", "--reclaim-grace-ms=200"});
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  auto granted = node.kubelet->allocate("akri.sh/cams", pod_a, "c", 1);
  ASSERT_TRUE(granted.ok());
  auto stored = instances(1).at(0);
  ASSERT_EQ(stored.instance.device_usage.size(), 1u);
  stored.instance.device_usage.clear();
  store::FileInstanceStore(state_dir_ / "instances").update(stored.instance, stored.revision);
  EXPECT_TRUE(node.wait_for_log("of akri.sh/cams in use, but no claim of this node's is on it"))
      << node.log();
  EXPECT_TRUE(instances(1).at(0).instance.device_usage.empty());
}

// Nor is its id offered as free while the pod holds it: with one slot per
// device, the freed slot's placeholder would take the smallest unused id,
// the very one the kubelet counts as the pod's.
TEST_F(SlotTakenFromOutsideTest, ACLDeviceInUseThatLostItsClaimIsNotOfferedAsFree) {
  echo_configuration("cams", {"cam0", "cam1"}, 1);
  Node& node = add_node("node-a", {"--reclaim-interval-ms=50", "--reclaim-grace-ms=200"});
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 2)) << node.log();
  auto granted = node.kubelet->allocate("akri.sh/cams", pod_a, "c", 1);
  ASSERT_TRUE(granted.ok());
  const std::string held = granted.device_ids.at(0);
  for (auto stored : instances(2)) {
    if (stored.instance.device_usage.empty()) continue;
    stored.instance.device_usage.clear();
    store::FileInstanceStore(state_dir_ / "instances").update(stored.instance, stored.revision);
  }
  ASSERT_TRUE(node.wait_for_log("device " + held + " of akri.sh/cams in use, but no claim"))
      << node.log();
  // Both devices free, under ids the pod does not hold.
  EXPECT_TRUE(node.wait([&](const testkit::SimulatorStatus& status) {
    const auto* cams = status.resource("akri.sh/cams");
    if (!cams) return false;
    auto ids = cams->healthy_ids();
    return ids.size() == 2 && std::find(ids.begin(), ids.end(), held) == ids.end();
  })) << node.log();
  EXPECT_TRUE(node.kubelet->allocate("akri.sh/cams", pod_b, "c", 2).ok()) << node.log();
}

// A kubelet restarted while the API server is unreachable lists none of its
// pods until its pod sources sync, though their containers keep running with
// their devices: the reclaimer frees their claims after the grace. Once the
// pods are listed again, both claims are taken back on their slots: the IL
// one by the slot its id names, the CL one by the slot it had when freed.
TEST_F(SlotTakenFromOutsideTest, ClaimsFreedWhileTheKubeletListedNoPodsAreTakenBack) {
  Node& node = hold_one_slot({"--reclaim-interval-ms=50", "--reclaim-grace-ms=200"});
  auto granted = node.kubelet->allocate("akri.sh/cams", pod_b, "c", 1);
  ASSERT_TRUE(granted.ok()) << node.log();
  const std::string vdev = granted.device_ids.at(0);
  const auto held = instances(1).at(0).instance.device_usage;
  ASSERT_EQ(held.size(), 2u) << "pod_a's IL slot and pod_b's CL slot";

  node.kubelet->restart();
  node.kubelet->set_pods_listed(false);
  ASSERT_TRUE(node.wait_for_log("freeing device " + vdev + " of resource akri.sh/cams"))
      << node.log();
  ASSERT_TRUE(node.wait_for_log("of resource " + il_)) << node.log();
  ASSERT_TRUE(test::eventually([&] { return instances(1).at(0).instance.device_usage.empty(); }))
      << node.log();

  node.kubelet->set_pods_listed(true);
  EXPECT_TRUE(node.wait_for_log("the kubelet reports device " + vdev +
                                " of akri.sh/cams in use, and no claim was on it"))
      << node.log();
  EXPECT_TRUE(node.wait_for_log("of " + il_ + " in use, and no claim was on it")) << node.log();
  EXPECT_EQ(instances(1).at(0).instance.device_usage, held) << "both back on their slots";
  EXPECT_FALSE(node.log().find("but no claim of this node's is on it") != std::string::npos)
      << node.log();
}

// A value dowser cannot read (Akri's agents disagree on "C:node-a") holds
// its slot: said in the log, which is all an operator would look at.
TEST_F(SlotTakenFromOutsideTest, AnUnreadableSlotValueIsLoggedAndItsSlotHeld) {
  Node& node = hold_one_slot();
  auto stored = instances(1).at(0);
  const std::string other_slot = stored.instance.name + "-1";
  ASSERT_EQ(stored.instance.device_usage.count(other_slot), 0u) << "pod_a holds slot 0";
  stored.instance.device_usage[other_slot] = "C:node-a";
  store::FileInstanceStore(state_dir_ / "instances").update(stored.instance, stored.revision);
  EXPECT_TRUE(node.wait_for_log("Instance " + stored.instance.name +
                                ": deviceUsage has what dowser cannot read (" + other_slot +
                                ": slot usage 'C:node-a'"))
      << node.log();
  EXPECT_TRUE(node.wait_free(il_, 0)) << "the slot is not offered: " << node.log();
}

// A Configuration of the fixtureHangs handler, which hangs where its
// discoveryDetails say (validate-hangs, stop-hangs).
class StuckHandlerTest : public DaemonTest {
 protected:
  StuckHandlerTest() {
    fs::copy_file(HANGS_ON_REQUEST_SO, handler_dir_ / "libfixture-hangs-on-request.so");
  }
  void hangs_configuration(const std::string& name, const std::string& details) {
    write_file(config_dir_ / (name + ".yaml"),
               "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: " + name +
                   "\nspec:\n  discoveryHandler:\n    name: fixtureHangs\n    discoveryDetails: " +
                   details + "\n");
  }
};

// validate runs while the daemon's core thread waits: a handler stuck in it
// holds the core up once, briefly, and never again. Another handler's
// Configuration is served, and the stuck one's next is not waited for.
TEST_F(StuckHandlerTest, AHandlerStuckInValidateHoldsUpNothingElse) {
  hangs_configuration("stuck", "validate-hangs");
  echo_configuration("good", {"g0"}, 1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(
      node.wait_for_log("Configuration default/stuck: not validated: handler fixtureHangs: "
                        "validate did not return within 500 ms"))
      << node.log();
  ASSERT_TRUE(node.wait_allocatable("akri.sh/good", 1)) << node.log();
  hangs_configuration("stuck2", "validate-hangs");
  EXPECT_TRUE(
      node.wait_for_log("Configuration default/stuck2: not validated: handler "
                        "fixtureHangs: validate_request of default/stuck has not returned for"))
      << node.log();
  EXPECT_TRUE(node.kubelet->allocate("akri.sh/good", pod_a, "c", 1).ok()) << node.log();
}

// A stop_discovery that never returns (the session restarted for new
// details) does not keep dowserd from exiting on SIGTERM: the handler is
// given up on, and the log says so.
TEST_F(StuckHandlerTest, SigtermExitsWhileAHandlersStopHangs) {
  hangs_configuration("stuck", "stop-hangs");
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_for_log("Configuration default/stuck added")) << node.log();
  hangs_configuration("stuck", "restarted");
  ASSERT_TRUE(node.wait_for_log("Configuration default/stuck changed")) << node.log();
  ASSERT_TRUE(node.send_signal(SIGTERM));
  const auto status = node.wait_exit(30s);
  ASSERT_TRUE(status) << "still running 30 s after SIGTERM: " << node.log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << node.log();
  EXPECT_NE(node.log().find("handler fixtureHangs: a control call did not return within 10 s; "
                            "abandoning it"),
            std::string::npos)
      << node.log();
}

// A handler that calls exit() ends dowserd (it runs in the process); the
// last line of the log says it was not dowserd's choice, and whose thread.
TEST_F(StuckHandlerTest, AHandlerCallingExitIsNamedOnTheWayOut) {
  hangs_configuration("quitter", "exit-in-start");
  auto& node = add_node("node-a");
  const auto status = node.wait_exit(30s);
  ASSERT_TRUE(status) << node.log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 3) << node.log();
  EXPECT_NE(node.log().find("[dowserd] exit() called in thread h:fixtureHangs (a discovery "
                            "handler's thread)"),
            std::string::npos)
      << node.log();
}

// A handler that crashes takes dowserd with it (it runs in the process);
// the last line of the log names the thread, so the handler, it struck.
TEST_F(DaemonTest, ACrashInAHandlerSaysWhoseThreadItWas) {
  fs::copy_file(CRASHES_IN_START_SO, handler_dir_ / "libfixture-crashes-in-start.so");
  write_file(config_dir_ / "crashy.yaml",
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: crashy\nspec:\n"
             "  discoveryHandler:\n    name: fixtureCrashesInStart\n    discoveryDetails: ''\n");
  auto& node = add_node("node-a");
  const auto status = node.wait_exit(30s);
  ASSERT_TRUE(status) << node.log();
  EXPECT_FALSE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << node.log();
  EXPECT_NE(node.log().find("[dowserd] fatal signal SIGILL in thread h:fixtureCrashe (a "
                            "discovery handler's thread)"),
            std::string::npos)
      << node.log();
}

// A handler writing to a socket whose peer is gone (a camera that hung up)
// gets EPIPE; SIGPIPE does not end dowserd, started here as from a shell,
// with SIGPIPE at its default disposition.
TEST_F(DaemonTest, AHandlersWriteToAClosedSocketDoesNotEndDowserd) {
  fs::copy_file(FIXTURE_WRITES_TO_CLOSED_SOCKET_SO,
                handler_dir_ / "libfixture-writes-to-closed-socket.so");
  write_file(config_dir_ / "hung-up.yaml",
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: hung-up\nspec:\n"
             "  discoveryHandler:\n    name: fixtureWritesToClosedSocket\n"
             "    discoveryDetails: ''\n");
  const auto inherited = std::signal(SIGPIPE, SIG_DFL);  // dowserd inherits it
  auto& node = add_node("node-a");
  std::signal(SIGPIPE, inherited);
  EXPECT_TRUE(node.wait_allocatable("akri.sh/hung-up", 1)) << node.log();
  EXPECT_TRUE(node.running()) << node.log();
}

// Stops the node with SIGTERM and expects a clean exit: status 0, and no
// plugin socket left in its kubelet directory (only the kubelet's own).
void expect_sigterm_stops_cleanly(Node& node) {
  int status = node.stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << node.log();
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(node.plugin_dir()))
    if (entry.is_socket() && entry.path().filename() != "kubelet.sock")
      left.push_back(entry.path().filename());
  EXPECT_TRUE(left.empty()) << "sockets left behind: " << left.size();
}

TEST_F(DaemonTest, SigtermStopsCleanlyAndRemovesEverySocket) {
  echo_configuration("cams", {"cam0", "cam1"}, 1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 2)) << node.log();
  expect_sigterm_stops_cleanly(node);
  EXPECT_EQ(instances().size(), 2u) << "Instances stay for the next start";
  EXPECT_EQ(node.log().find("exit() called"), std::string::npos) << "dowserd's own end";
}

// SIGHUP killed dowserd with no log line and left its plugin sockets behind,
// and systemd counted that a clean exit. There is nothing to reload (the
// configuration and handler directories are followed live): it is logged and
// ignored.
TEST_F(DaemonTest, SighupIsLoggedAndIgnored) {
  echo_configuration("cams", {"cam0"}, 1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  ASSERT_TRUE(node.send_signal(SIGHUP));
  ASSERT_TRUE(
      node.wait_for_log("[info] SIGHUP received and ignored: dowserd has nothing to reload"))
      << node.log();
  EXPECT_TRUE(node.running());
  auto granted = node.kubelet->allocate("akri.sh/cams", pod_a, "c", 1);
  EXPECT_TRUE(granted.ok()) << "still serving: " << granted.status.error_message();
  expect_sigterm_stops_cleanly(node);
}

// So that an operator can tell, in top -H or a profile, which part of the
// daemon is busy: its own threads are named for what they do (gRPC names its own).
TEST_F(DaemonTest, ItsOwnThreadsAreNamedForWhatTheyDo) {
  echo_configuration("cams", {"cam0"}, 1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  const std::set<std::string> expected = {"dowserd",      // the main thread: the core executor
                                          "h:debugEcho",  // the handler's control calls
                                          "config-watch",  "store-watch",  "store-sync",
                                          "kubelet-watch", "dp-publisher", "dp-lifecycle",
                                          "reclaimer",     "status-http"};
  std::multiset<std::string> names;
  bool all_named = test::eventually([&] {
    names = node.thread_names();
    return std::all_of(expected.begin(), expected.end(),
                       [&](const auto& name) { return names.count(name) > 0; });
  });
  std::string listed;
  for (const auto& name : names) listed += name + " ";
  EXPECT_TRUE(all_named) << "threads: " << listed;
  EXPECT_EQ(names.count("dowserd"), 1u)
      << "only the main thread keeps the process's name: " << listed;
}

}  // namespace
}  // namespace dowser::it
