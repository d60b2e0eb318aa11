// dowserd as a process against the kubelet simulator: what the daemon issue
// asks of the plugins' sockets and registrations, of the Instances it writes,
// and of claims under contention and across a crash, checked claim by claim.
#include "daemon_harness.hpp"
#include "eventually.hpp"
#include "naming.hpp"

#include <sys/stat.h>

#include <csignal>
#include <fstream>
#include <memory>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

namespace dowser::it {
namespace {

const testkit::PodRef pod_a{"default", "pod-a"};

using dowser::test::eventually;

// The slots an Allocate response names in its akri.agent.slot-<slot> annotations.
std::set<std::string> granted_slots(const v1beta1::AllocateResponse& response) {
  const std::string prefix = "akri.agent.slot-";
  std::set<std::string> slots;
  for (const auto& container : response.container_responses())
    for (const auto& [key, value] : container.annotations())
      if (key.rfind(prefix, 0) == 0) slots.insert(key.substr(prefix.size()));
  return slots;
}

std::string endpoint_of(Node& node, const std::string& resource) {
  auto status = node.kubelet->status();
  const auto* r = status.resource(resource);
  return r ? r->endpoint : "";
}

class PluginSocketsTest : public DaemonTest {};

TEST_F(PluginSocketsTest, SocketsArePrivateAndEachRegistrationHasAFreshOne) {
  echo_configuration("cams", {"cam0"}, 1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  auto il = il_resources(instances(1), "cams").at(0);
  ASSERT_TRUE(node.wait_allocatable(il, 1)) << node.log();

  std::set<std::string> endpoints_seen;
  for (const auto& resource : {std::string("akri.sh/cams"), il}) {
    auto status = node.kubelet->status();
    const auto* r = status.resource(resource);
    ASSERT_NE(r, nullptr) << resource;
    EXPECT_TRUE(r->get_preferred_allocation_available) << resource;
    struct stat info {};
    ASSERT_EQ(::stat((node.plugin_dir() / r->endpoint).c_str(), &info), 0) << r->endpoint;
    EXPECT_TRUE(S_ISSOCK(info.st_mode)) << r->endpoint;
    EXPECT_EQ(info.st_mode & 0777, 0600u) << r->endpoint;
    endpoints_seen.insert(r->endpoint);
  }

  // The kubelet deletes one plugin's socket (kubelet.sock stays): that plugin
  // serves a new socket and registers again.
  std::string old_endpoint = endpoint_of(node, "akri.sh/cams");
  ASSERT_TRUE(fs::remove(node.plugin_dir() / old_endpoint)) << old_endpoint;
  ASSERT_TRUE(node.wait([&](const testkit::SimulatorStatus& status) {
    const auto* r = status.resource("akri.sh/cams");
    return r && r->registrations >= 2 && r->streaming && r->endpoint != old_endpoint &&
           r->allocatable() == 1;
  })) << node.log();
  std::string renewed = endpoint_of(node, "akri.sh/cams");
  EXPECT_TRUE(fs::exists(node.plugin_dir() / renewed));
  EXPECT_TRUE(endpoints_seen.insert(renewed).second) << "a fresh socket name";

  // A kubelet restart, clean or after a crash (its kubelet.sock left behind
  // while the plugin sockets go): every plugin registers again, each under a
  // new name.
  for (auto exit : {testkit::KubeletExit::clean, testkit::KubeletExit::crash}) {
    node.kubelet->restart(exit);
    for (const auto& resource : {std::string("akri.sh/cams"), il}) {
      ASSERT_TRUE(node.wait([&](const testkit::SimulatorStatus& status) {
        const auto* r = status.resource(resource);
        return r && !r->endpoint.empty() && r->streaming && r->allocatable() == 1;
      })) << resource
          << "\n"
          << node.log();
      EXPECT_TRUE(endpoints_seen.insert(endpoint_of(node, resource)).second)
          << resource << " re-registered under a socket name used before";
    }
  }
  auto allocated = node.kubelet->allocate("akri.sh/cams", pod_a, "c", 1);
  EXPECT_TRUE(allocated.ok()) << allocated.status.error_message();
}

// Whether every thread of the process is stopped (state T): SIGSTOP takes
// effect a moment after kill() returns, and a thread still running may read.
bool all_threads_stopped(pid_t pid) {
  const fs::path tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : fs::directory_iterator(tasks)) {
    std::ifstream stat(task.path() / "stat");
    const std::string text{std::istreambuf_iterator<char>(stat), std::istreambuf_iterator<char>()};
    const size_t after_name = text.rfind(") ");  // the name may hold spaces and parentheses
    if (after_name == std::string::npos || text.compare(after_name + 2, 1, "T") != 0) return false;
  }
  return true;
}

// More happens in the kubelet directory than the kernel queues for a reader
// that cannot read (here dowserd, stopped): the events are dropped, and an
// overflow is all dowserd hears. A plugin whose socket went meanwhile is
// found by looking, serves a new one and registers again.
TEST_F(PluginSocketsTest, ASocketDeletedWhileTheDirectorysEventsWereLostIsServedAgain) {
  echo_configuration("cams", {"cam0"}, 1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  const std::string old_endpoint = endpoint_of(node, "akri.sh/cams");
  size_t queue_size = 16384;
  std::ifstream("/proc/sys/fs/inotify/max_queued_events") >> queue_size;

  {
    ASSERT_EQ(::kill(node.pid(), SIGSTOP), 0);
    // Continued however this block ends: a stopped dowserd would hang the test's end.
    const std::unique_ptr<Node, void (*)(Node*)> continued(
        &node, [](Node* stopped) { ::kill(stopped->pid(), SIGCONT); });
    // It once read a few events before it stopped, and the queue had room left.
    ASSERT_TRUE(eventually([&] { return all_threads_stopped(node.pid()); }));
    for (size_t i = 0; i < queue_size / 2 + 256; ++i) {  // two events each
      const auto flood = node.plugin_dir() / ("flood-" + std::to_string(i));
      std::ofstream{flood};
      fs::remove(flood);
    }
    ASSERT_TRUE(fs::remove(node.plugin_dir() / old_endpoint)) << old_endpoint;  // not queued
  }

  EXPECT_TRUE(node.wait_for_log("were lost (inotify queue overflow)")) << node.log();
  EXPECT_TRUE(node.wait([&](const testkit::SimulatorStatus& status) {
    const auto* r = status.resource("akri.sh/cams");
    return r && r->registrations >= 2 && r->streaming && r->endpoint != old_endpoint &&
           r->allocatable() == 1;
  })) << node.log();
}

TEST_F(PluginSocketsTest, ARemovedConfigurationStopsItsPluginsAndTakesTheirSockets) {
  echo_configuration("cams", {"cam0", "cam1"}, 1);
  echo_configuration("mics", {"mic0"}, 1);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 2)) << node.log();
  ASSERT_TRUE(node.wait_allocatable("akri.sh/mics", 1)) << node.log();
  std::vector<std::string> going = il_resources(instances(3), "cams");
  ASSERT_EQ(going.size(), 2u);
  going.push_back("akri.sh/cams");
  std::map<std::string, std::string> endpoints;
  for (const auto& resource : going) {
    ASSERT_TRUE(node.wait_allocatable(resource, resource == "akri.sh/cams" ? 2 : 1)) << resource;
    endpoints[resource] = endpoint_of(node, resource);
  }

  fs::remove(config_dir_ / "cams.yaml");
  EXPECT_TRUE(node.wait([&](const testkit::SimulatorStatus& status) {
    for (const auto& resource : going) {
      const auto* r = status.resource(resource);
      if (!r || r->streaming) return false;
    }
    return true;
  })) << node.log();
  for (const auto& [resource, endpoint] : endpoints)
    EXPECT_TRUE(eventually([&] { return !fs::exists(node.plugin_dir() / endpoint); }))
        << resource << ": socket " << endpoint << " left behind";
  EXPECT_TRUE(eventually([&] { return il_resources(instances(), "cams").empty(); }))
      << "the only node withdrew: its Instances are gone";
  EXPECT_TRUE(node.wait_allocatable("akri.sh/mics", 1)) << "the other Configuration keeps running";
  auto status = node.kubelet->status();
  ASSERT_NE(status.resource("akri.sh/mics"), nullptr);
  EXPECT_EQ(status.resource("akri.sh/mics")->registrations, 1u);
}

TEST_F(PluginSocketsTest, ResourcesTakeTheConfiguredDomain) {
  echo_configuration("cams", {"cam0"}, 1);
  auto& node = add_node("node-a", {"--resource-domain=devices.example.com"});
  ASSERT_TRUE(node.wait_allocatable("devices.example.com/cams", 1)) << node.log();
  auto instance = instances(1).at(0).instance;
  EXPECT_TRUE(node.wait_allocatable("devices.example.com/" + instance.name, 1)) << node.log();
  EXPECT_EQ(instance.cdi_name.rfind("devices.example.com/cams=", 0), 0u) << instance.cdi_name;
  EXPECT_EQ(node.kubelet->status().resources.count("akri.sh/cams"), 0u);
}

class InstanceFieldsTest : public DaemonTest {};

TEST_F(InstanceFieldsTest, InstancesCarryAkrisFields) {
  write_file(config_dir_ / "devs.yaml", R"(apiVersion: akri.sh/v0
kind: Configuration
metadata: {name: devs}
spec:
  capacity: 3
  brokerProperties: {RESOLUTION: "800", URL: overridden}
  discoveryHandler:
    name: testDevices
    discoveryDetails: |
      devices:
        - id: cam-1
          properties: {URL: "rtsp://cam-1", MODEL: x}
        - id: cam-2
          shared: true
          properties: {MODEL: y}
)");
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/devs", 2)) << node.log();
  std::map<std::string, store::Instance> by_name;
  for (const auto& stored : instances(2)) by_name[stored.instance.name] = stored.instance;
  ASSERT_EQ(by_name.size(), 2u);

  const std::string local_digest = naming::device_digest("cam-1", false, "node-a");
  const std::string shared_digest = naming::device_digest("cam-2", true, "node-a");
  ASSERT_TRUE(by_name.contains("devs-" + local_digest)) << "local: the node is in the hash";
  ASSERT_TRUE(by_name.contains("devs-" + shared_digest)) << "shared: the id alone";
  const auto& local = by_name.at("devs-" + local_digest);
  const auto& shared = by_name.at("devs-" + shared_digest);

  EXPECT_EQ(local.configuration_name, "devs");
  EXPECT_EQ(local.cdi_name, "akri.sh/devs=" + local_digest);
  EXPECT_EQ(local.capacity, 3u);
  EXPECT_FALSE(local.shared);
  EXPECT_EQ(local.nodes, std::set<std::string>{"node-a"});
  EXPECT_TRUE(local.device_usage.empty());
  EXPECT_EQ(local.broker_properties,
            (std::map<std::string, std::string>{
                {"MODEL", "x"}, {"RESOLUTION", "800"}, {"URL", "overridden"}}))
      << "device properties with the Configuration's laid over";

  EXPECT_EQ(shared.cdi_name, "akri.sh/devs=" + shared_digest);
  EXPECT_TRUE(shared.shared);
  EXPECT_EQ(shared.nodes, std::set<std::string>{"node-a"});
  EXPECT_EQ(shared.broker_properties,
            (std::map<std::string, std::string>{
                {"MODEL", "y"}, {"RESOLUTION", "800"}, {"URL", "overridden"}}));
}

// Who holds which slot, as the kubelets of all nodes see it: every grant is
// checked against every container still running when it is made.
class SlotLedger {
 public:
  // Records a grant; returns the slots some other running container holds.
  std::vector<std::string> grant(const std::string& holder, const std::set<std::string>& slots) {
    std::lock_guard lock(mutex_);
    std::vector<std::string> doubly_held;
    for (const auto& slot : slots) {
      auto [it, inserted] = holders_.emplace(slot, holder);
      if (!inserted && it->second != holder) doubly_held.push_back(slot + " (" + it->second + ")");
    }
    return doubly_held;
  }
  // The container is gone (its pod deleted).
  void end(const std::string& holder) {
    std::lock_guard lock(mutex_);
    std::erase_if(holders_, [&](const auto& entry) { return entry.second == holder; });
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::string> holders_;  // slot -> node/pod
};

class ContentionTest : public DaemonTest {};

// Two daemons share one store as two nodes, both plugin kinds allocate
// concurrently on both, hundreds of times; pods come and go and the reclaimer
// frees their slots. No grant ever names a slot a running container holds.
TEST_F(ContentionTest, HundredsOfAllocationsOnTwoNodesNeverGiveASlotTwice) {
  echo_configuration("cams", {"cam0", "cam1"}, 3, true);
  // The grace must outlast an Allocate round trip (the claim is in the store
  // before the kubelet records it), generously: sanitizer builds are slow.
  std::vector<std::string> fast_reclaim = {"--reclaim-interval-ms=20", "--reclaim-grace-ms=1000"};
  auto& a = add_node("node-a", fast_reclaim);
  auto& b = add_node("node-b", fast_reclaim);
  ASSERT_TRUE(a.wait_allocatable("akri.sh/cams", 2)) << a.log();
  ASSERT_TRUE(b.wait_allocatable("akri.sh/cams", 2)) << b.log();
  auto il = il_resources(instances(), "cams");
  ASSERT_EQ(il.size(), 2u);
  for (const auto& resource : il) {
    ASSERT_TRUE(a.wait_allocatable(resource, 3));
    ASSERT_TRUE(b.wait_allocatable(resource, 3));
  }

  constexpr int kTriesPerNode = 120;
  SlotLedger ledger;
  std::atomic<int> granted{0}, refused{0};
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  auto hammer = [&](Node& node, int seed) {
    auto holder = [&](int i) { return node.name() + "/pod-" + std::to_string(i); };
    for (int i = 0; i < kTriesPerNode; ++i) {
      testkit::PodRef pod{"default", "pod-" + std::to_string(i)};
      const std::string& resource = (i + seed) % 3 == 0 ? "akri.sh/cams" : il[(i + seed) % 2];
      node.wait([&](const auto& status) { return Node::free_count(status, resource) > 0; }, 1s);
      auto result = node.kubelet->allocate(resource, pod, "c", 1);
      if (result.ok()) {
        ++granted;
        auto slots = granted_slots(result.response);
        auto doubly_held = ledger.grant(holder(i), slots);
        std::lock_guard lock(failures_mutex);
        if (slots.size() != 1) failures.push_back(holder(i) + ": not one slot annotated");
        for (const auto& slot : doubly_held)
          failures.push_back(holder(i) + " got " + slot + " which still holds it");
      } else {
        ++refused;
      }
      // Each pod lives for two rounds; the ledger forgets it before the
      // kubelet does, so a slot is never counted held when it may be freed.
      ledger.end(holder(i - 2));
      node.kubelet->delete_pod({"default", "pod-" + std::to_string(i - 2)});
    }
  };
  std::thread ta([&] { hammer(a, 0); });
  std::thread tb([&] { hammer(b, 1); });
  ta.join();
  tb.join();
  std::cout << "granted " << granted << ", refused " << refused << "\n";
  std::string listed;
  for (const auto& failure : failures) listed += "\n  " + failure;
  EXPECT_TRUE(failures.empty()) << failures.size() << " bad grants:" << listed;
  EXPECT_GT(granted.load(), 2 * kTriesPerNode / 4) << "slots must cycle for the test to mean much";
  EXPECT_GT(refused.load(), 0) << "the nodes must have raced for slots";
  for (const auto& stored : instances()) EXPECT_LE(stored.instance.device_usage.size(), 3u);
}

// kill -9 while a kubelet allocates, then a restart: every container the
// kubelet admitted is admitted again (as after a kubelet restart) on the
// very slots it was given, and no slot serves two of them.
TEST_F(ContentionTest, AfterKillNineEveryAdmittedContainerKeepsItsOwnSlots) {
  echo_configuration("cams", {"cam0", "cam1", "cam2", "cam3"}, 3);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 4)) << node.log();
  std::atomic<bool> done{false};
  std::atomic<int> granted{0};
  std::mutex slots_mutex;
  std::map<std::string, std::set<std::string>> slots_of;  // pod -> slots
  std::thread allocations([&] {
    for (int i = 0; !done && i < 200; ++i) {
      std::string pod = "pod-" + std::to_string(i);
      auto result = node.kubelet->allocate("akri.sh/cams", {"default", pod}, "c", 1 + i % 2);
      if (!result.ok()) continue;
      std::lock_guard lock(slots_mutex);
      slots_of[pod] = granted_slots(result.response);
      ++granted;
    }
  });
  ASSERT_TRUE(node.wait([&](const auto&) { return granted >= 3; }, 10s));
  node.stop(SIGKILL);
  done = true;
  allocations.join();

  // Every slot granted is a claim of its vdev in the store, no slot twice.
  std::map<std::string, std::string> usage;
  for (const auto& stored : instances())
    for (const auto& [slot, value] : stored.instance.device_usage) usage[slot] = value;
  std::set<std::string> all_granted;
  for (const auto& [pod, slots] : slots_of) {
    for (const auto& slot : slots) {
      EXPECT_TRUE(all_granted.insert(slot).second) << slot << " granted twice";
      EXPECT_EQ(usage.count(slot), 1u) << pod << ": claim of " << slot << " lost";
    }
  }
  EXPECT_LE(usage.size(), all_granted.size() + 2) << "at most the call in flight may add claims";

  node.start();
  // Back: the CL plugin lists every vdev the kubelet holds, Healthy.
  ASSERT_TRUE(node.wait([](const testkit::SimulatorStatus& s) {
    const auto* r = s.resource("akri.sh/cams");
    if (!r || r->registrations < 2 || !r->streaming) return false;
    for (const auto& allocation : s.allocations)
      for (const auto& id : allocation.device_ids)
        if (const auto* device = r->device(id); !device || !device->healthy()) return false;
    return true;
  })) << node.log();
  // The kubelet admits its containers again with the ids it recorded.
  for (const auto& allocation : node.kubelet->status().allocations) {
    auto again = node.kubelet->allocate(allocation.resource, allocation.pod, allocation.container,
                                        allocation.device_ids.size());
    ASSERT_TRUE(again.ok()) << allocation.pod.pod_name << ": " << again.status.error_message();
    EXPECT_EQ(again.device_ids, allocation.device_ids);
    ASSERT_TRUE(slots_of.contains(allocation.pod.pod_name)) << allocation.pod.pod_name;
    EXPECT_EQ(granted_slots(again.response), slots_of.at(allocation.pod.pod_name))
        << allocation.pod.pod_name << " was moved to other slots";
  }
  size_t claims_after = 0;
  for (const auto& stored : instances()) claims_after += stored.instance.device_usage.size();
  EXPECT_EQ(claims_after, usage.size()) << "re-admission claimed nothing new";
}

}  // namespace
}  // namespace dowser::it
