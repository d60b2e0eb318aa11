// Three dowserd processes as three nodes (three kubelet simulators) against
// the test API server (tests/peers/kube-apiserver): Instances, Configurations,
// Secrets and Nodes all live there, as on a cluster.
#include "daemon_harness.hpp"
#include "kube_client.hpp"
#include "operability_harness.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace dowser::it {
namespace {

using nlohmann::json;

using kube::resources::kConfigurations;
using kube::resources::kEvents;
using kube::resources::kNamespaces;
using kube::resources::kNodes;
using kube::resources::kSecrets;

std::string base64(const std::string& text) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (unsigned char c : text) {
    bits = (bits << 8) | c;
    count += 8;
    while (count >= 6) out.push_back(kAlphabet[(bits >> (count -= 6)) & 0x3F]);
  }
  if (count > 0) out.push_back(kAlphabet[(bits << (6 - count)) & 0x3F]);
  while (out.size() % 4 != 0) out.push_back('=');
  return out;
}

json node_object(const std::string& name, bool ready) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}}},
          {"status",
           {{"conditions",
             json::array({{{"type", "Ready"},
                           {"status", ready ? "True" : "False"},
                           {"reason", ready ? "KubeletReady" : "NodeStatusUnknown"}}})}}}};
}

json secret_object(const std::string& name, const std::map<std::string, std::string>& data) {
  json encoded = json::object();
  for (const auto& [key, value] : data) encoded[key] = base64(value);
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", {{"name", name}, {"namespace", "default"}}},
          {"data", encoded}};
}

// A debugEcho Configuration with these discoveryProperties.
json echo_object(const std::string& name, int capacity, bool shared,
                 json properties = json::array()) {
  properties.push_back(
      {{"name", "DEBUG_ECHO_INSTANCES_SHARED"}, {"value", shared ? "true" : "false"}});
  return {{"apiVersion", "akri.sh/v0"},
          {"kind", "Configuration"},
          {"metadata", {{"name", name}, {"namespace", "default"}}},
          {"spec",
           {{"capacity", capacity},
            {"sharedOfflineGraceSeconds", 0},
            {"discoveryHandler",
             {{"name", "debugEcho"},
              {"discoveryDetails", "descriptions: [cam0]"},
              {"discoveryProperties", properties}}}}}};
}

json availability_file(const fs::path& path) {
  return {{"name", "DEBUG_ECHO_AVAILABILITY_FILE"}, {"value", path.string()}};
}

// A default/cams the API server takes and dowser refuses: a secretKeyRef
// without a key.
json invalid_cams() {
  return echo_object(
      "cams", 1, false,
      json::array({{{"name", "LOGIN"}, {"valueFrom", {{"secretKeyRef", {{"name", "s"}}}}}}}));
}

// A default/cams its handler refuses: debugEcho wants an absolute path.
json cams_its_handler_refuses() {
  return echo_object(
      "cams", 1, false,
      json::array({{{"name", "DEBUG_ECHO_AVAILABILITY_FILE"}, {"value", "not/absolute"}}}));
}

// What other/cams is told while default/cams holds the resource name.
constexpr const char* kTakenByDefaultCams =
    "Configuration other/cams: its resource name is taken by Configuration default/cams";

class KubeTest : public DaemonTest {
 protected:
  void SetUp() override {
    api_dir_ = root_ / "api";
    const std::string command = std::string(START_APISERVER) + " " + api_dir_.string() +
                                " --owner-pid " + std::to_string(::getpid()) +
                                " --bookmark-interval-ms 200" + server_options_;
    FILE* output = ::popen(command.c_str(), "r");
    ASSERT_NE(output, nullptr);
    std::array<char, 4096> line{};
    if (std::fgets(line.data(), line.size(), output) != nullptr) kubeconfig_ = line.data();
    ASSERT_EQ(::pclose(output), 0) << "start-apiserver.sh failed";
    kubeconfig_.erase(kubeconfig_.find_last_not_of('\n') + 1);
    client_ = std::make_shared<kube::KubeClient>(kube::load_kubeconfig(kubeconfig_));
    store_ = std::make_unique<store::KubeInstanceStore>(client_);
    watch_ = store_->watch([this](const store::WatchEvent&) {
      std::lock_guard lock(mutex_);
      changed_.notify_all();
    });
  }

  void TearDown() override {
    nodes_.clear();  // the daemons go before the server
    watch_.reset();
    store_.reset();
    if (pid_t pid = apiserver_pid(); pid > 0) ::kill(pid, SIGTERM);
  }

  pid_t apiserver_pid() const {
    std::ifstream pid_file(api_dir_ / "apiserver.pid");
    pid_t pid = 0;
    pid_file >> pid;
    return pid;
  }

  std::vector<std::string> kube_args(std::vector<std::string> more = {}) const {
    std::vector<std::string> args = {"--store=kubernetes", "--config-source=kubernetes",
                                     "--kubeconfig=" + kubeconfig_, "--dead-node-grace-seconds=1"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  // Registers the node with the API server (Ready), then starts its dowserd.
  Node& add_kube_node(const std::string& name, std::vector<std::string> wrapper = {},
                      std::vector<std::string> more_args = {}) {
    client_->create(kNodes, "", node_object(name, true));
    nodes_.push_back(std::make_unique<Node>(root_, name, state_dir_, config_dir_, handler_dir_,
                                            kube_args(std::move(more_args)), std::move(wrapper)));
    return *nodes_.back();
  }

  // Waits, woken by the store's watch, until predicate holds for the stored Instances.
  bool wait_instances(
      const std::function<bool(const std::vector<store::StoredInstance>&)>& predicate,
      std::chrono::milliseconds timeout = 20s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock lock(mutex_);
    while (true) {
      lock.unlock();
      bool holds = predicate(store_->list());
      lock.lock();
      if (holds) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      // Bounded: a change between list() and this wait is seen on the next round.
      changed_.wait_for(lock, 200ms);
    }
  }

  // The one Instance of the Configuration, once there is exactly one with these nodes.
  std::optional<store::Instance> wait_instance_on(const std::set<std::string>& nodes) {
    std::optional<store::Instance> found;
    wait_instances([&](const auto& instances) {
      found.reset();
      if (instances.size() == 1 && instances[0].instance.nodes == nodes)
        found = instances[0].instance;
      return found.has_value();
    });
    return found;
  }

  // PUT of the Node's status subresource, as the node lifecycle controller
  // does; the C++ client has no subresources, so libcurl with the server's
  // CA and token (files start-apiserver.sh wrote).
  long put_node_status(const std::string& name, bool ready) {
    json current = client_->get(kNodes, "", name);
    current["status"] = node_object(name, ready)["status"];
    const std::string body = current.dump();
    std::ifstream token_file(api_dir_ / "token");
    std::string token;
    token_file >> token;
    std::ifstream port_file(api_dir_ / "ready");
    std::string port;
    port_file >> port;
    const std::string url = "https://127.0.0.1:" + port + "/api/v1/nodes/" + name + "/status";
    CURL* curl = curl_easy_init();
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
    const std::string ca = (api_dir_ / "ca.crt").string();
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_CAINFO, ca.c_str());
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(
        curl, CURLOPT_WRITEFUNCTION,
        +[](char*, size_t size, size_t count, void*) { return size * count; });
    long status = 0;
    if (curl_easy_perform(curl) == CURLE_OK)
      curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return status;
  }

  // A Configuration whose availability file's path is key k of Secret secret.
  void create_needing_secret(const std::string& name, const std::string& secret) {
    client_->create(
        kConfigurations, "default",
        echo_object(
            name, 1, false,
            json::array({{{"name", "DEBUG_ECHO_AVAILABILITY_FILE"},
                          {"valueFrom", {{"secretKeyRef", {{"name", secret}, {"key", "k"}}}}}}})));
  }

  // An Instance of configuration held by node-a, written before its
  // Configuration, so without an ownerReference to it: the API server's
  // garbage collector does not delete it, dowserd must. Returns its revision.
  // Held by node-a unless said otherwise.
  uint64_t store_instance_of(const std::string& configuration, const std::string& node = "node-a",
                             const std::string& namespace_name = "default") {
    store::Instance held;
    held.namespace_name = namespace_name;
    held.name = configuration + "-abc123";
    held.configuration_name = configuration;
    held.nodes = {node};
    held.device_usage = {{held.name + "-0", node}};
    return store_->create(held);
  }

  // "namespace/name" of every Configuration that has Instances in the store.
  std::set<std::string> configurations_with_instances() {
    std::set<std::string> names;
    for (const auto& stored : store_->list())
      names.insert(stored.instance.namespace_name + "/" + stored.instance.configuration_name);
    return names;
  }

  // Waits until the store holds no Instance of that Configuration.
  bool instances_gone(const std::string& namespace_name, const std::string& configuration) {
    return wait_instances([&](const auto& instances) {
      return std::none_of(instances.begin(), instances.end(), [&](const auto& stored) {
        return stored.instance.namespace_name == namespace_name &&
               stored.instance.configuration_name == configuration;
      });
    });
  }

  // Configuration other/cams, served like "good" (the same availability file).
  void create_other_cams() {
    json other = echo_object("cams", 1, false, json::array({availability_file(root_ / "online")}));
    other["metadata"]["namespace"] = "other";
    client_->create(kNamespaces, "", {{"metadata", {{"name", "other"}}}});
    client_->create(kConfigurations, "other", other);
  }

  // node-a, once it serves a Configuration "good" created beside the ones
  // a test made (which the daemon has read by then).
  Node& node_serving_good() {
    client_->create(
        kConfigurations, "default",
        echo_object("good", 1, false, json::array({availability_file(root_ / "online")})));
    Node& node = add_kube_node("node-a");
    EXPECT_TRUE(node.wait_allocatable("akri.sh/good", 1)) << node.log();
    // A local device reaches the kubelet before its Instance is written:
    // tests that read the store once count good's Instance in it.
    EXPECT_TRUE(wait_instances([](const auto& instances) {
      return std::any_of(instances.begin(), instances.end(), [](const auto& stored) {
        return stored.instance.configuration_name == "good";
      });
    })) << node.log();
    return node;
  }

  // node-a started after a restart, with default/cams invalid (its Instance,
  // its pod's claim, in the store) and other/cams told the name is taken.
  Node& node_with_invalid_cams_holding_the_name() {
    store_instance_of("cams");
    client_->create(kConfigurations, "default", invalid_cams());
    create_other_cams();
    Node& node = node_serving_good();
    EXPECT_TRUE(node.wait_for_log("invalid Configuration: default/cams: spec.discoveryHandler"))
        << node.log();
    EXPECT_TRUE(node.wait_for_log(kTakenByDefaultCams)) << node.log();
    return node;
  }

  // default/cams edited into this one.
  void replace_cams(json cams) {
    cams["metadata"] = client_->get(kConfigurations, "default", "cams")["metadata"];
    client_->replace(kConfigurations, "default", cams);
  }

  // Warning Events the API server holds for a Configuration, by reason.
  std::vector<json> events_for(const std::string& configuration, const std::string& reason) {
    std::vector<json> found;
    const json events = client_->list(kEvents, "default");
    for (const auto& event : events["items"]) {
      if (event["involvedObject"].value("name", "") == configuration &&
          event["involvedObject"].value("kind", "") == "Configuration" &&
          event.value("reason", "") == reason && event.value("type", "") == "Warning")
        found.push_back(event);
    }
    return found;
  }

  // Deletes them, as the API server does once their --event-ttl has passed.
  void drop_events(const std::string& configuration, const std::string& reason) {
    for (const auto& event : events_for(configuration, reason))
      client_->remove(kEvents, "default", event["metadata"].value("name", ""));
  }

  // Drops the Event, then waits until it is posted again, twice over: the
  // second post comes from a refresh round begun after the first drop. A
  // round posts the daemon's problems in the order of their Configurations'
  // names: every one that sorts before this one and stood then has been
  // posted again since.
  bool refreshed_twice(const std::string& configuration, const std::string& reason) {
    for (int round = 0; round < 2; ++round) {
      drop_events(configuration, reason);
      if (!test::eventually([&] { return !events_for(configuration, reason).empty(); }))
        return false;
    }
    return true;
  }

  fs::path api_dir_;
  std::string server_options_;  // more for apiserver.mjs, each with a space before
  std::string kubeconfig_;
  std::shared_ptr<kube::KubeClient> client_;
  std::unique_ptr<store::KubeInstanceStore> store_;
  std::unique_ptr<store::WatchSubscription> watch_;
  std::mutex mutex_;
  std::condition_variable changed_;
};

size_t claims_of(const store::Instance& instance, const std::string& node) {
  size_t count = 0;
  for (const auto& [slot, usage] : instance.device_usage)
    count += usage == node || usage.ends_with(":" + node) ? 1 : 0;
  return count;
}

// All three nodes race for the two slots of one shared device through both
// plugin kinds: exactly two grants, each one slot held for its node.
TEST_F(KubeTest, ConcurrentAllocationsFromThreeNodesNeverExceedCapacity) {
  write_file(root_ / "online", "ONLINE\n");
  client_->create(kConfigurations, "default",
                  echo_object("cams", 2, true, json::array({availability_file(root_ / "online")})));
  std::vector<Node*> nodes;
  for (const char* name : {"node-a", "node-b", "node-c"}) nodes.push_back(&add_kube_node(name));
  auto instance = wait_instance_on({"node-a", "node-b", "node-c"});
  ASSERT_TRUE(instance) << nodes[0]->log();
  const std::string il = "akri.sh/" + instance->name;
  for (Node* node : nodes) {
    ASSERT_TRUE(node->wait_allocatable(il, 2)) << node->name() << "\n" << node->log();
    ASSERT_TRUE(node->wait_allocatable("akri.sh/cams", 1)) << node->name();
  }

  std::atomic<int> granted{0};
  std::vector<std::thread> racers;
  for (size_t n = 0; n < nodes.size(); ++n) {
    racers.emplace_back([&, n] {
      Node& node = *nodes[n];
      auto anything_free = [&](const testkit::SimulatorStatus& status) {
        return Node::free_count(status, il) > 0 || Node::free_count(status, "akri.sh/cams") > 0;
      };
      // Until this node's kubelet sees nothing left (bounded): a stale view
      // loses the race in the store, and the next list tells the truth.
      for (int i = 0; i < 40 && node.wait(anything_free, 2s); ++i) {
        const std::string resource = (i + n) % 2 == 0 ? il : "akri.sh/cams";
        testkit::PodRef pod{"default", node.name() + "-" + std::to_string(i)};
        if (node.kubelet->allocate(resource, pod, "c", 1).ok()) {
          ++granted;
        } else {
          node.wait([&](const auto& status) { return !anything_free(status); }, 200ms);
        }
      }
    });
  }
  for (auto& racer : racers) racer.join();
  EXPECT_EQ(granted.load(), 2) << "capacity 2: two grants, whoever wins";

  auto stored = store_->get("default", instance->name);
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->instance.device_usage.size(), 2u);
  size_t held = 0;
  for (Node* node : nodes) {
    size_t devices = 0;
    for (const auto& allocation : node->kubelet->status().allocations)
      devices += allocation.device_ids.size();
    EXPECT_EQ(claims_of(stored->instance, node->name()), devices) << node->name();
    held += devices;
  }
  EXPECT_EQ(held, 2u);
}

// kill -9, then NotReady: after the (1 s) grace another agent scrubs the
// dead node's claim and `nodes` entry; the others' claims stay.
TEST_F(KubeTest, ADeadNodesClaimsAreScrubbedAfterItsGrace) {
  write_file(root_ / "online", "ONLINE\n");
  client_->create(kConfigurations, "default",
                  echo_object("cams", 2, true, json::array({availability_file(root_ / "online")})));
  auto& a = add_kube_node("node-a");
  add_kube_node("node-b");
  auto& c = add_kube_node("node-c");
  auto instance = wait_instance_on({"node-a", "node-b", "node-c"});
  ASSERT_TRUE(instance) << a.log();
  const std::string il = "akri.sh/" + instance->name;
  ASSERT_TRUE(a.wait_allocatable(il, 2)) << a.log();
  ASSERT_TRUE(c.wait_allocatable(il, 2)) << c.log();
  ASSERT_TRUE(a.kubelet->allocate(il, {"default", "pod-a"}, "c", 1).ok());
  ASSERT_TRUE(c.wait_allocatable(il, 1)) << "node-c's kubelet sees node-a's claim";
  ASSERT_TRUE(c.kubelet->allocate(il, {"default", "pod-c"}, "c", 1).ok());
  ASSERT_TRUE(wait_instances([](const auto& instances) {
    return instances.size() == 1 && instances[0].instance.device_usage.size() == 2;
  }));

  c.stop(SIGKILL);
  auto after_kill = store_->get("default", instance->name);
  ASSERT_TRUE(after_kill);
  EXPECT_EQ(claims_of(after_kill->instance, "node-c"), 1u) << "a Ready node is left alone";

  ASSERT_EQ(put_node_status("node-c", false), 200);
  EXPECT_TRUE(wait_instances([](const auto& instances) {
    return instances.size() == 1 && claims_of(instances[0].instance, "node-c") == 0 &&
           instances[0].instance.nodes == std::set<std::string>{"node-a", "node-b"};
  })) << a.log();
  auto scrubbed = store_->get("default", instance->name);
  ASSERT_TRUE(scrubbed);
  EXPECT_EQ(claims_of(scrubbed->instance, "node-a"), 1u) << "node-a keeps its claim";
  // The freed slot is offered again to the living nodes.
  EXPECT_TRUE(a.wait_allocatable(il, 2)) << a.log();
  EXPECT_TRUE(a.wait_for_log("dead node node-c") ||
              nodes_[1]->wait_for_log("dead node node-c", 1s));
}

// A node deleted while no agent ran is in no listing and no watch event,
// only in the Instances: the first agent to start scrubs it after the grace
// (1 s here) and leaves alone the nodes that exist.
TEST_F(KubeTest, ANodeDeletedWhileNoAgentRanIsScrubbedAfterItsGrace) {
  client_->create(kNodes, "", node_object("node-kept", true));
  store::Instance both;
  both.name = "cams-abc123";
  both.configuration_name = "cams";
  both.capacity = 2;
  both.shared = true;
  both.nodes = {"node-gone", "node-kept"};
  both.device_usage = {{"cams-abc123-0", "node-gone"}, {"cams-abc123-1", "C:cams-1:node-kept"}};
  store_->create(both);
  store::Instance gone_only = both;
  gone_only.name = "cams-def456";
  gone_only.nodes = {"node-gone"};
  gone_only.device_usage = {{"cams-def456-1", "C:cams-0:node-gone"}};
  store_->create(gone_only);

  auto& a = add_kube_node("node-a");
  EXPECT_TRUE(a.wait_for_log("node node-gone is named in Instances but has no Node object"))
      << a.log();
  EXPECT_TRUE(wait_instances([](const auto& instances) {
    return instances.size() == 1 &&
           instances[0].instance.nodes == std::set<std::string>{"node-kept"};
  })) << a.log();
  auto kept = store_->get("default", "cams-abc123");
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->instance.device_usage,
            (std::map<std::string, std::string>{{"cams-abc123-1", "C:cams-1:node-kept"}}));
  EXPECT_FALSE(a.wait_for_log("node node-kept is named", 0ms)) << a.log();
}

// An API server that does not answer when dowserd starts (a node booting
// while the control plane restarts; here the server is stopped, so every
// request waits for its timeout) is waited for: dowserd does not exit, and
// once the server answers, the Configuration runs, its Instance is written,
// and that of a Configuration deleted meanwhile is withdrawn.
TEST_F(KubeTest, AnApiServerThatDoesNotAnswerAtStartIsWaitedFor) {
  client_->create(kConfigurations, "default", echo_object("good", 1, false));
  client_->create(kNodes, "", node_object("node-a", true));
  store::Instance orphan;
  orphan.name = "gone-abc123";
  orphan.configuration_name = "gone";
  orphan.nodes = {"node-a"};
  store_->create(orphan);
  const pid_t server = apiserver_pid();
  ASSERT_EQ(::kill(server, SIGSTOP), 0);
  nodes_.push_back(
      std::make_unique<Node>(root_, "node-a", state_dir_, config_dir_, handler_dir_, kube_args()));
  auto& a = *nodes_.back();
  const bool waited =
      a.wait_for_log("cannot list Instances yet", 60s) && a.wait_for_log("status API listening on");
  const std::string unready = waited ? http(status_url(a), "/readyz").body : "";
  ::kill(server, SIGCONT);
  ASSERT_TRUE(waited) << a.log();
  EXPECT_NE(unready.find("[-]store: Instances not listed yet"), std::string::npos) << unready;
  EXPECT_TRUE(a.wait_allocatable("akri.sh/good", 1, 30s)) << a.log();
  EXPECT_TRUE(wait_instances([](const auto& instances) {
    return instances.size() == 1 && instances[0].instance.configuration_name == "good";
  })) << a.log();
  EXPECT_TRUE(test::eventually([&] {
    return http(status_url(a), "/readyz").body.find("[+]store") != std::string::npos;
  })) << http(status_url(a), "/readyz").body;
  EXPECT_TRUE(a.running()) << a.log();
}

// RBAC that does not let dowserd list Configurations: the API server
// answers, but nothing is served, and /readyz says so.
class KubeConfigurationsForbiddenTest : public KubeTest {
 protected:
  void SetUp() override {
    server_options_ = " --forbid configurations.akri.sh";
    KubeTest::SetUp();
  }
};

TEST_F(KubeConfigurationsForbiddenTest, ConfigurationsNeverListedAreNotReady) {
  auto& a = add_kube_node("node-a");
  ASSERT_TRUE(a.wait_for_log("status API listening on")) << a.log();
  EXPECT_TRUE(test::eventually([&] {
    return http(status_url(a), "/readyz")
               .body.find("[-]configurations: Configurations not listed") != std::string::npos;
  })) << http(status_url(a), "/readyz").body;
  EXPECT_NE(http(status_url(a), "/readyz").body.find("[+]store"), std::string::npos)
      << "the API server answers: only the Configurations are missing";
}

// RBAC that lets dowserd list Configurations but not Secrets, until the
// forbid file is removed: the one that needs a Secret waits (refused), the
// others run, and the node is ready.
class KubeSecretsForbiddenTest : public KubeTest {
 protected:
  void SetUp() override {
    forbid_file_ = root_ / "forbidden";
    write_file(forbid_file_, "secrets\n");
    server_options_ = " --forbid-file " + forbid_file_.string();
    KubeTest::SetUp();
  }

  // Waits until the Instance of Configuration gone (deleted while dowserd
  // was away) is withdrawn: dowserd has judged every orphan by then.
  bool orphan_withdrawn() { return instances_gone("default", "gone"); }

  // Access granted while dowserd runs: Configuration "has-secret" starts,
  // and "waiting", which needs Secret secret, is refused as logged says and
  // loses the Instance kept for it meanwhile. Secret "relative" holds a path
  // the handler refuses; "present" one it takes.
  void expect_refused_once_granted(const std::string& secret, const std::string& logged) {
    const fs::path online = root_ / "online-too";
    write_file(online, "ONLINE\n");
    fs::remove(forbid_file_);  // the test's client is refused too
    client_->create(kSecrets, "default", secret_object("present", {{"k", online.string()}}));
    client_->create(kSecrets, "default", secret_object("relative", {{"k", "not/absolute"}}));
    write_file(forbid_file_, "secrets\n");
    store_instance_of("waiting");
    store_instance_of("gone");
    create_needing_secret("waiting", secret);
    create_needing_secret("has-secret", "present");
    Node& a = node_serving_good();
    ASSERT_TRUE(orphan_withdrawn()) << a.log();
    ASSERT_EQ(configurations_with_instances(),
              (std::set<std::string>{"default/good", "default/waiting"}))
        << a.log();

    fs::remove(forbid_file_);  // the ClusterRole granted
    EXPECT_TRUE(a.wait_allocatable("akri.sh/has-secret", 1, 60s)) << a.log();
    EXPECT_TRUE(a.wait_for_log(logged, 60s)) << a.log();
    EXPECT_TRUE(wait_instances(
        [](const auto& instances) {
          return std::none_of(instances.begin(), instances.end(), [](const auto& stored) {
            return stored.instance.configuration_name == "waiting";
          });
        },
        60s))
        << a.log();
  }

  // default/cams waits for read access to its Secret and holds the resource
  // name with its Instance here (cams-abc123): other/cams waits for it.
  Node& node_with_cams_waiting_for_access_holding_the_name() {
    store_instance_of("cams");
    create_needing_secret("cams", "s");
    Node& node = node_serving_good();
    EXPECT_TRUE(node.wait_for_log("Configuration default/cams: spec.discoveryHandler"))
        << node.log();
    create_other_cams();
    EXPECT_TRUE(node.wait_for_log(kTakenByDefaultCams)) << node.log();
    return node;
  }

  fs::path forbid_file_;
};

TEST_F(KubeSecretsForbiddenTest, AConfigurationWaitingForASecretDoesNotMakeTheNodeUnready) {
  create_needing_secret("needs-secret", "s");
  Node& a = node_serving_good();
  EXPECT_TRUE(a.wait_for_log("dowserd cannot read secrets")) << a.log();
  EXPECT_TRUE(test::eventually([&] {
    return http(status_url(a), "/readyz").body.find("[+]configurations") != std::string::npos;
  })) << http(status_url(a), "/readyz").body;
}

// Waiting for access to its Secret, a Configuration keeps the Instances its
// pods use, but no longer those of the others: one deleted while dowserd was
// away is withdrawn meanwhile. Once deleted itself, its Instances go too.
TEST_F(KubeSecretsForbiddenTest, OnlyTheConfigurationsWaitingForAccessKeepTheirInstances) {
  store_instance_of("needs-secret");
  store_instance_of("gone");
  create_needing_secret("needs-secret", "s");
  Node& a = node_serving_good();
  ASSERT_TRUE(a.wait_for_log("dowserd cannot read secrets")) << a.log();
  ASSERT_TRUE(orphan_withdrawn()) << a.log();
  // Orphans are all logged before any is written away.
  EXPECT_EQ(a.log().find("its Configuration default/needs-secret"), std::string::npos) << a.log();
  EXPECT_EQ(configurations_with_instances(),
            (std::set<std::string>{"default/good", "default/needs-secret"}))
      << a.log();

  client_->remove(kConfigurations, "default", "needs-secret");
  EXPECT_TRUE(wait_instances([](const auto& instances) {
    return instances.size() == 1 && instances[0].instance.configuration_name == "good";
  })) << a.log();
}

// Waiting for access, it keeps its resource name with its Instances: a
// same-named Configuration of another namespace waits for the name (else
// it would take it, and the one waiting would lose its Instances when the
// access comes), and takes it once the first is deleted.
TEST_F(KubeSecretsForbiddenTest, OneWaitingForAccessKeepsItsResourceName) {
  Node& a = node_with_cams_waiting_for_access_holding_the_name();
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(configurations_with_instances(),
            (std::set<std::string>{"default/good", "default/cams"}))
      << a.log();

  client_->remove(kConfigurations, "default", "cams");
  EXPECT_TRUE(a.wait_for_log("Configuration other/cams added")) << a.log();
  EXPECT_TRUE(instances_gone("default", "cams")) << a.log();
}

// Its name is held by its Instances: once they are deleted from outside
// (an operator cleaning up), the one waiting for the name takes it.
TEST_F(KubeSecretsForbiddenTest, OneWaitingForAccessWhoseInstancesAreDeletedLetsTheNameGo) {
  Node& a = node_with_cams_waiting_for_access_holding_the_name();
  ASSERT_FALSE(HasFailure());
  const auto held = store_->get("default", "cams-abc123");
  ASSERT_TRUE(held) << a.log();
  store_->remove("default", "cams-abc123", held->revision);
  EXPECT_TRUE(a.wait_for_log("Configuration other/cams added")) << a.log();
}

// Edited to leave this node out (another node took the device over), its
// Instance no longer holds the name here either.
TEST_F(KubeSecretsForbiddenTest, OneWaitingForAccessWhoseInstancesLeaveThisNodeLetsTheNameGo) {
  Node& a = node_with_cams_waiting_for_access_holding_the_name();
  ASSERT_FALSE(HasFailure());
  auto moved = store_->get("default", "cams-abc123");
  ASSERT_TRUE(moved) << a.log();
  moved->instance.nodes = {"node-b"};
  moved->instance.device_usage = {{"cams-abc123-0", "node-b"}};
  store_->update(moved->instance, moved->revision);
  EXPECT_TRUE(a.wait_for_log("Configuration other/cams added")) << a.log();
  EXPECT_TRUE(store_->get("default", "cams-abc123").has_value()) << "node-b's, kept";
}

// What other/cams is told while default/cams's Instances hold the name at a start.
constexpr const char* kWaitsForTheListing =
    "Configuration other/cams: its resource name was held by Configuration default/cams before "
    "this start";

// Instances listed late (RBAC let dowserd list them only later): other/cams
// waited for default/cams, read first, though other/cams's Instance (its
// pod's claim) shows that it held the name. It takes the name back before
// its Instance could be withdrawn as an orphan.
TEST_F(KubeSecretsForbiddenTest, InstancesListedLateGiveTheNameBackToTheConfigurationThatHeldIt) {
  fs::remove(forbid_file_);  // the test's client is refused too
  create_other_cams();
  store_instance_of("cams", "node-a", "other");
  client_->create(kConfigurations, "default", echo_object("cams", 1, false));
  write_file(forbid_file_, "instances.akri.sh\n");
  Node& a = add_kube_node("node-a");
  ASSERT_TRUE(a.wait_for_log("cannot list Instances yet", 60s)) << a.log();
  ASSERT_TRUE(a.wait_for_log(kTakenByDefaultCams)) << a.log();

  fs::remove(forbid_file_);  // the ClusterRole granted
  EXPECT_TRUE(
      a.wait_for_log("Configuration default/cams gives its resource name back to "
                     "Configuration other/cams",
                     30s))
      << a.log();
  EXPECT_TRUE(a.wait_for_log("Configuration other/cams added")) << a.log();
  EXPECT_TRUE(store_->get("other", "cams-abc123").has_value()) << a.log();
  EXPECT_EQ(a.log().find("cams-abc123: its Configuration other/cams is not served"),
            std::string::npos)
      << a.log();
}

// Secrets listed late: Configurations that reference none are read first.
class KubeSecretsListedLateTest : public KubeTest {
 protected:
  void SetUp() override {
    hold_ = root_ / "hold-secrets";
    write_file(hold_, "");
    server_options_ = " --hold-lists-while " + hold_.string() + " --hold-lists-of secrets";
    KubeTest::SetUp();
  }

  fs::path hold_;
};

// At a start, default/cams (whose Instance is in the store, so it held the
// resource name before) waits for the Secrets list while other/cams is
// read. other/cams must not take the name meanwhile: default/cams would
// then wait for it and lose the Instance its pod uses.
TEST_F(KubeSecretsListedLateTest, AtAStartTheNameStaysWithTheConfigurationWhoseInstancesAreStored) {
  client_->create(kSecrets, "default", secret_object("s", {{"k", (root_ / "online").string()}}));
  store_instance_of("cams");
  create_needing_secret("cams", "s");
  create_other_cams();
  Node& a = node_serving_good();
  EXPECT_TRUE(a.wait_for_log(kWaitsForTheListing)) << a.log();

  fs::remove(hold_);
  EXPECT_TRUE(a.wait_for_log("Configuration default/cams added")) << a.log();
  EXPECT_TRUE(a.wait_for_log(kTakenByDefaultCams)) << a.log();
  EXPECT_TRUE(wait_instances([](const auto& instances) {
    return std::any_of(instances.begin(), instances.end(), [](const auto& stored) {
      return stored.instance.namespace_name == "default" &&
             stored.instance.configuration_name == "cams" &&
             stored.instance.device_usage.count(stored.instance.name + "-0") > 0;
    });
  })) << a.log();
  EXPECT_EQ(a.log().find("Configuration other/cams added"), std::string::npos) << a.log();
}

// Names are decided per node: default/cams's Instance on node-b says
// nothing of the name on node-a, where other/cams runs at once.
TEST_F(KubeSecretsListedLateTest, AnotherNodesInstancesHoldNoNameHere) {
  client_->create(kSecrets, "default", secret_object("s", {{"k", (root_ / "online").string()}}));
  store_instance_of("cams", "node-b");
  create_needing_secret("cams", "s");
  create_other_cams();
  Node& a = node_serving_good();
  EXPECT_TRUE(a.wait_for_log("Configuration other/cams added")) << a.log();
  EXPECT_EQ(a.log().find("other/cams: its resource name"), std::string::npos) << a.log();
}

// One whose Instances are in the store but which was deleted while dowserd
// was away never comes: once every Configuration is read, its Instances are
// withdrawn and the same-named one of another namespace takes the name.
TEST_F(KubeTest, AtAStartANameHeldByAConfigurationDeletedMeanwhileIsFreeOnceAllAreRead) {
  store_instance_of("cams");
  create_other_cams();
  Node& a = node_serving_good();
  EXPECT_TRUE(a.wait_for_log(kWaitsForTheListing)) << a.log();
  EXPECT_TRUE(a.wait_allocatable("akri.sh/cams", 1)) << a.log();
  EXPECT_TRUE(a.wait_for_log("Configuration other/cams added")) << a.log();
  EXPECT_TRUE(instances_gone("default", "cams")) << a.log();
}

// default/cams's pods hold a slot here and other/cams's do not, so
// default/cams would take the name back from the running other/cams; but
// its handler refuses it (a relative path), so other/cams keeps running:
// it is displaced only for one sure to run.
TEST_F(KubeTest, ANameIsGivenBackOnlyToAConfigurationThatRuns) {
  create_other_cams();
  Node& a = node_serving_good();
  ASSERT_TRUE(a.wait_for_log("Configuration other/cams added")) << a.log();
  store_instance_of("cams");
  ASSERT_TRUE(test::eventually([&] {
    return http(status_url(a), "/api/v1/instances").body.find("cams-abc123") != std::string::npos;
  })) << "dowserd never saw default/cams's Instance";

  client_->create(kConfigurations, "default", cams_its_handler_refuses());
  ASSERT_TRUE(a.wait_for_log("Configuration default/cams: refused by handler debugEcho"))
      << a.log();
  EXPECT_EQ(a.log().find("gives its resource name back"), std::string::npos) << a.log();
  EXPECT_TRUE(a.wait_allocatable("akri.sh/cams", 1)) << a.log();
}

// An object edited into one dowser refuses keeps its last good version
// running, and its name; after a restart no version of it is known, but
// its Instances here (its pods' claims) still hold the name: other/cams
// waits, default/cams runs once fixed, and other/cams takes the name only
// once default/cams is deleted.
TEST_F(KubeTest, AtAStartAnInvalidObjectsInstancesKeepItsResourceName) {
  Node& a = node_with_invalid_cams_holding_the_name();
  ASSERT_FALSE(HasFailure());

  replace_cams(echo_object("cams", 1, false));
  ASSERT_TRUE(a.wait_for_log("Configuration default/cams added")) << a.log();
  EXPECT_TRUE(store_->get("default", "cams-abc123").has_value()) << a.log();
  // Not taken meanwhile (every Configuration was read before the fix came):
  // the claims would have won it back, but other/cams's pods would have
  // started on a name that was not its own.
  EXPECT_EQ(a.log().find("Configuration other/cams added"), std::string::npos) << a.log();

  client_->remove(kConfigurations, "default", "cams");
  EXPECT_TRUE(a.wait_for_log("Configuration other/cams added")) << a.log();
  EXPECT_TRUE(instances_gone("default", "cams")) << a.log();
}

// Edited into an invalid object, then back to the version that kept
// running: that version is told again (the verdict after the fix), which
// is no change: the log said "changed" and its Instances were re-applied.
TEST_F(KubeTest, AnObjectFixedBackToTheVersionThatRunsIsUnchanged) {
  client_->create(kConfigurations, "default", echo_object("cams", 1, false));
  Node& a = add_kube_node("node-a");
  ASSERT_TRUE(a.wait_allocatable("akri.sh/cams", 1)) << a.log();
  replace_cams(invalid_cams());
  ASSERT_TRUE(a.wait_for_log("invalid Configuration: default/cams")) << a.log();
  replace_cams(echo_object("cams", 1, false));
  EXPECT_TRUE(a.wait_for_log("Configuration default/cams unchanged")) << a.log();
  EXPECT_EQ(a.log().find("Configuration default/cams changed"), std::string::npos) << a.log();
  EXPECT_TRUE(a.wait_allocatable("akri.sh/cams", 1)) << a.log();
}

// Fixed into a version its handler refuses: no longer kept for its error,
// and not running, its Instances go and the name is free.
TEST_F(KubeTest, AnInvalidObjectFixedIntoOneItsHandlerRefusesLetsItsInstancesAndNameGo) {
  Node& a = node_with_invalid_cams_holding_the_name();
  ASSERT_FALSE(HasFailure());

  replace_cams(cams_its_handler_refuses());
  EXPECT_TRUE(a.wait_for_log("Configuration default/cams: refused by handler debugEcho"))
      << a.log();
  EXPECT_TRUE(a.wait_for_log("Configuration other/cams added")) << a.log();
  EXPECT_TRUE(instances_gone("default", "cams")) << a.log();
}

// Deleted while invalid, never having run since the start: its Instances go
// and the name is free.
TEST_F(KubeTest, AnInvalidObjectDeletedLetsItsInstancesAndResourceNameGo) {
  Node& a = node_with_invalid_cams_holding_the_name();
  ASSERT_FALSE(HasFailure());

  client_->remove(kConfigurations, "default", "cams");
  EXPECT_TRUE(a.wait_for_log("Configuration other/cams added")) << a.log();
  EXPECT_TRUE(instances_gone("default", "cams")) << a.log();
}

TEST_F(KubeSecretsForbiddenTest, OnceAccessIsGrantedOneWhoseSecretIsMissingLosesItsInstances) {
  expect_refused_once_granted("absent",
                              "waiting-abc123: its Configuration default/waiting is not served "
                              "(spec.discoveryHandler.discoveryProperties[0]");
}

TEST_F(KubeSecretsForbiddenTest, OnceAccessIsGrantedOneItsHandlerRefusesLosesItsInstances) {
  expect_refused_once_granted("relative",
                              "refused by handler debugEcho: DEBUG_ECHO_AVAILABILITY_FILE must be");
}

// Without its own Node in the list, an agent cannot tell a deleted node from
// a list it may not see whole: it scrubs nothing from the Instances alone.
TEST_F(KubeTest, AnAgentWhoseNodeIsNotListedLeavesUnknownNodesAlone) {
  store::Instance gone_only;
  gone_only.name = "cams-def456";
  gone_only.configuration_name = "cams";
  gone_only.nodes = {"node-gone"};
  gone_only.device_usage = {{"cams-def456-0", "node-gone"}};
  const uint64_t revision = store_->create(gone_only);
  store::Instance on_x = gone_only;
  on_x.name = "cams-fed654";
  on_x.nodes = {"node-x"};
  on_x.device_usage = {{"cams-fed654-0", "node-x"}};
  store_->create(on_x);
  nodes_.push_back(
      std::make_unique<Node>(root_, "node-a", state_dir_, config_dir_, handler_dir_, kube_args()));
  auto& a = *nodes_.back();
  ASSERT_TRUE(a.wait_for_log("this node (node-a) is not among the 0 listed")) << a.log();
  // node-x turns up NotReady after that listing: due after its grace, so
  // after node-gone would have been had the agent trusted that list.
  client_->create(kNodes, "", node_object("node-x", false));
  ASSERT_TRUE(wait_instances([](const auto& instances) { return instances.size() == 1; }))
      << a.log();
  auto left = store_->get("default", "cams-def456");
  ASSERT_TRUE(left);
  EXPECT_EQ(left->revision, revision);

  client_->create(kNodes, "", node_object("node-a", true));
  EXPECT_TRUE(a.wait_for_log("node node-gone is named in Instances but has no Node object"))
      << "its own Node's arrival lets it check: " << a.log();
  EXPECT_TRUE(wait_instances([](const auto& instances) { return instances.empty(); })) << a.log();
}

// node-c alone stops seeing the shared device (its own view of the
// availability file, through a private mount namespace): it withdraws from
// `nodes`; when the others stop seeing it too, the last one deletes it.
TEST_F(KubeTest, ANodeThatStopsSeeingTheDeviceWithdrawsAndTheLastOneDeletesIt) {
  if (std::system("unshare -m --propagation private true") != 0)
    GTEST_SKIP() << "needs mount namespaces (run as root)";
  fs::create_directories(root_ / "avail");
  fs::create_directories(root_ / "avail-c");
  write_file(root_ / "avail" / "state", "ONLINE\n");
  write_file(root_ / "avail-c" / "state", "ONLINE\n");
  client_->create(
      kConfigurations, "default",
      echo_object("cams", 2, true, json::array({availability_file(root_ / "avail" / "state")})));
  auto& a = add_kube_node("node-a");
  add_kube_node("node-b");
  // node-c sees avail-c where the others see avail.
  add_kube_node("node-c", {"unshare", "-m", "--propagation", "private", "sh", "-c",
                           "mount --bind \"$1\" \"$2\" && shift 2 && exec \"$@\"", "sh",
                           (root_ / "avail-c").string(), (root_ / "avail").string()});
  auto instance = wait_instance_on({"node-a", "node-b", "node-c"});
  ASSERT_TRUE(instance) << a.log() << nodes_[2]->log();

  write_file(root_ / "avail-c" / "state", "OFFLINE\n");
  EXPECT_TRUE(wait_instance_on({"node-a", "node-b"})) << nodes_[2]->log();

  write_file(root_ / "avail" / "state", "OFFLINE\n");
  EXPECT_TRUE(wait_instances([](const auto& instances) { return instances.empty(); })) << a.log();
}

// A Configuration deleted while a finalizer holds it (Akri's agent puts
// some on its objects) is gone for discovery at once: its Instances go too.
TEST_F(KubeTest, AConfigurationBeingDeletedStopsBeforeItsFinalizersAreCleared) {
  json held = echo_object("cams", 1, false);
  held["metadata"]["finalizers"] = json::array({"example.com/hold"});
  client_->create(kConfigurations, "default", held);
  auto& a = add_kube_node("node-a");
  ASSERT_TRUE(wait_instances([](const auto& instances) { return instances.size() == 1; }))
      << a.log();

  client_->remove(kConfigurations, "default", "cams");
  ASSERT_TRUE(
      client_->get(kConfigurations, "default", "cams")["metadata"].contains("deletionTimestamp"))
      << "the finalizer keeps the object, marked for deletion";
  EXPECT_TRUE(wait_instances([](const auto& instances) { return instances.empty(); })) << a.log();
  EXPECT_TRUE(a.wait_for_log("Configuration default/cams removed")) << a.log();
}

// An invalid object names its Configuration: it keeps that one's Instances
// (unknown is not gone), not those of every Configuration deleted meanwhile,
// as an unreadable file of a directory must.
TEST_F(KubeTest, AnInvalidObjectHoldsOnlyTheInstancesOfItsOwnConfiguration) {
  client_->create(kConfigurations, "default", echo_object("old", 1, false));
  auto& a = add_kube_node("node-a");
  ASSERT_TRUE(wait_instances([](const auto& instances) { return instances.size() == 1; }))
      << a.log();
  a.stop(SIGKILL);
  client_->remove(kConfigurations, "default", "old");
  // Valid for the CRD, refused by dowser: over 56 characters.
  client_->create(kConfigurations, "default", echo_object(std::string(60, 'x'), 1, false));
  a.start();
  ASSERT_TRUE(a.wait_for_log("must be at most 56 characters")) << a.log();
  EXPECT_TRUE(wait_instances([](const auto& instances) { return instances.empty(); })) << a.log();
  EXPECT_EQ(a.log().find("keeping the Instances of Configurations not found"), std::string::npos)
      << a.log();
}

// The availability file's path comes from a Secret: changing the Secret
// restarts discovery with the new value (the device goes, then comes back).
// The value never reaches the log.
TEST_F(KubeTest, AChangedSecretRestartsDiscoveryWithTheNewValue) {
  const fs::path online = root_ / "online-s3cr3t-canary";
  write_file(online, "ONLINE\n");
  write_file(root_ / "offline", "OFFLINE\n");
  client_->create(kSecrets, "default", secret_object("echo", {{"path", online.string()}}));
  json from_secret = {{"name", "DEBUG_ECHO_AVAILABILITY_FILE"},
                      {"valueFrom", {{"secretKeyRef", {{"name", "echo"}, {"key", "path"}}}}}};
  client_->create(kConfigurations, "default",
                  echo_object("cams", 1, false, json::array({from_secret})));
  auto& a = add_kube_node("node-a");
  ASSERT_TRUE(wait_instances([](const auto& instances) { return instances.size() == 1; }))
      << a.log();
  ASSERT_TRUE(a.wait_allocatable("akri.sh/cams", 1)) << a.log();

  auto secret = client_->get(kSecrets, "default", "echo");
  secret["data"]["path"] = base64((root_ / "offline").string());
  client_->replace(kSecrets, "default", secret);
  EXPECT_TRUE(wait_instances([](const auto& instances) { return instances.empty(); })) << a.log();

  secret = client_->get(kSecrets, "default", "echo");
  secret["data"]["path"] = base64(online.string());
  client_->replace(kSecrets, "default", secret);
  EXPECT_TRUE(wait_instances([](const auto& instances) { return instances.size() == 1; }))
      << a.log();
  EXPECT_EQ(a.log().find("s3cr3t-canary"), std::string::npos) << "a Secret value was logged";
}

// A required Secret that does not exist yet: reported in the log, the status
// API and an Event on the Configuration, and used once it is created. A
// missing optional ConfigMap leaves its property out. A bad object is
// reported (log and Event) while the others run.
TEST_F(KubeTest, AMissingSecretIsReportedAndRetriedWhenCreated) {
  write_file(root_ / "online", "ONLINE\n");
  json properties = json::array(
      {{{"name", "DEBUG_ECHO_AVAILABILITY_FILE"},
        {"valueFrom", {{"secretKeyRef", {{"name", "later"}, {"key", "path"}}}}}},
       {{"name", "DEBUG_ECHO_POLL_INTERVAL_MS"},
        {"valueFrom",
         {{"configMapKeyRef", {{"name", "absent"}, {"key", "ms"}, {"optional", true}}}}}}});
  client_->create(kConfigurations, "default", echo_object("cams", 1, false, properties));
  json bad = echo_object(
      "bad", 1, false,
      json::array({{{"name", "X"}, {"valueFrom", {{"secretKeyRef", {{"name", "s"}}}}}}}));
  client_->create(kConfigurations, "default", bad);
  auto& a = node_serving_good();
  EXPECT_TRUE(a.wait_for_log(
      "default/bad: spec.discoveryHandler.discoveryProperties[0].valueFrom.secretKeyRef.key: is "
      "required"))
      << a.log();
  EXPECT_TRUE(a.wait_for_log("needs key path of Secret default/later")) << a.log();
  const std::string url = status_url(a);
  auto refused = [&] {
    const json configurations = api(url, "/api/v1/configurations");
    for (const auto& entry : configurations["items"])
      if (entry["name"] == "cams")
        return entry["state"].get<std::string>() + ": " + entry["last_error"].get<std::string>();
    return std::string();
  };
  EXPECT_NE(refused().find("refused: "), std::string::npos) << refused();
  EXPECT_NE(refused().find("Secret default/later"), std::string::npos) << refused();
  EXPECT_FALSE(events_for("cams", "UnresolvedProperty").empty());
  EXPECT_FALSE(events_for("bad", "InvalidConfiguration").empty());
  EXPECT_EQ(a.kubelet->status().resource("akri.sh/cams"), nullptr);

  client_->create(kSecrets, "default",
                  secret_object("later", {{"path", (root_ / "online").string()}}));
  EXPECT_TRUE(a.wait_allocatable("akri.sh/cams", 1)) << a.log();
  EXPECT_EQ(a.kubelet->status().resource("akri.sh/bad"), nullptr);
}

// Every node reads the same bad object and posts its Warning: the API server
// keeps one Event (the same problem gets the same name on every node), not
// one per node, nor one more per restart.
TEST_F(KubeTest, AProblemEveryNodeSeesIsOneEvent) {
  client_->create(
      kConfigurations, "default",
      echo_object(
          "bad", 1, false,
          json::array({{{"name", "X"}, {"valueFrom", {{"secretKeyRef", {{"name", "s"}}}}}}})));
  auto posts = [&] {
    std::ifstream log(api_dir_ / "requests.log");
    size_t count = 0;
    for (std::string line; std::getline(log, line);)
      count += line.find(" POST /api/v1/namespaces/default/events ") != std::string::npos;
    return count;
  };
  const std::string problem = "default/bad: spec.discoveryHandler.discoveryProperties[0]";
  auto& a = add_kube_node("node-a");
  auto& b = add_kube_node("node-b");
  EXPECT_TRUE(a.wait_for_log(problem)) << a.log();
  EXPECT_TRUE(b.wait_for_log(problem)) << b.log();
  // Both posted before b stops: a stop cuts off a post still on its way.
  ASSERT_TRUE(test::eventually([&] { return posts() >= 2; })) << "each node posts";
  b.stop(SIGTERM);
  b.start();
  EXPECT_TRUE(test::eventually([&] { return posts() >= 3; })) << "each node posts; b twice";
  EXPECT_EQ(events_for("bad", "InvalidConfiguration").size(), 1u);
}

// What the daemon refuses (its handler refuses the details) or cannot check
// yet (no such handler) is told where kubectl describe looks, once per
// version, while the others run.
TEST_F(KubeTest, RefusalsByTheDaemonArePostedAsEventsOnTheConfiguration) {
  write_file(root_ / "online", "ONLINE\n");
  json refused = echo_object("refused", 1, false);
  refused["spec"]["discoveryHandler"]["discoveryDetails"] = "descriptions: [cam0";
  client_->create(kConfigurations, "default", refused);
  json misspelt = echo_object("misspelt", 1, false);
  misspelt["spec"]["discoveryHandler"]["name"] = "debugEcko";
  client_->create(kConfigurations, "default", misspelt);
  auto& a = node_serving_good();

  auto one_event = [&](const std::string& configuration, const std::string& reason) {
    std::vector<json> events;
    test::eventually([&] {
      events = events_for(configuration, reason);
      return !events.empty();
    });
    return events.size() == 1 ? events[0].value("message", "")
                              : "(" + std::to_string(events.size()) + " events)";
  };
  const std::string refusal = one_event("refused", "Refused");
  EXPECT_NE(refusal.find("refused by handler debugEcho: "), std::string::npos) << refusal << "\n"
                                                                               << a.log();
  const std::string unchecked = one_event("misspelt", "NotValidated");
  EXPECT_NE(unchecked.find("no discovery handler named 'debugEcko'"), std::string::npos)
      << unchecked << "\n"
      << a.log();

  // A new version refused for the same reason is told again.
  refused = client_->get(kConfigurations, "default", "refused");
  refused["spec"]["capacity"] = 2;
  client_->replace(kConfigurations, "default", refused);
  EXPECT_TRUE(test::eventually([&] { return events_for("refused", "Refused").size() == 2; }))
      << a.log();
  EXPECT_TRUE(events_for("good", "Refused").empty());
}

// The daemon's NotValidated Events stand while the handler is away, and are
// posted again if the API server drops them; once the handler comes, they
// no longer stand: a Configuration it takes runs, one it refuses gets a
// Refused Event instead. Refreshed every second here (--event-refresh-seconds).
TEST_F(KubeTest, TheDaemonsEventsArePostedAgainUntilTheHandlerJudges) {
  fs::remove(handler_dir_ / "libfixture-test-devices.so");
  const auto test_devices = [](const std::string& name, const std::string& details) {
    return json{
        {"apiVersion", "akri.sh/v0"},
        {"kind", "Configuration"},
        {"metadata", {{"name", name}, {"namespace", "default"}}},
        {"spec", {{"discoveryHandler", {{"name", "testDevices"}, {"discoveryDetails", details}}}}}};
  };
  client_->create(kConfigurations, "default", test_devices("late", "devices: [{id: d1}]"));
  client_->create(kConfigurations, "default", test_devices("late-bad", "devices: 5"));
  // Stands throughout, and sorts after the others (see refreshed_twice).
  json refused = echo_object("zz-refused", 1, false);
  refused["spec"]["discoveryHandler"]["discoveryDetails"] = "descriptions: [cam0";
  client_->create(kConfigurations, "default", refused);
  Node& a = add_kube_node("node-a", {}, {"--event-refresh-seconds=1", "--handler-rescan-ms=100"});
  ASSERT_TRUE(test::eventually([&] {
    return !events_for("late", "NotValidated").empty() &&
           !events_for("late-bad", "NotValidated").empty() &&
           !events_for("zz-refused", "Refused").empty();
  })) << a.log();
  EXPECT_TRUE(refreshed_twice("late", "NotValidated")) << a.log();

  const fs::path arriving = handler_dir_ / "arriving";  // not a .so: not loaded half-written
  fs::copy_file(TEST_DEVICES_SO, arriving);
  fs::rename(arriving, handler_dir_ / "libfixture-test-devices.so");
  ASSERT_TRUE(a.wait_allocatable("akri.sh/late", 1)) << a.log();
  ASSERT_TRUE(test::eventually([&] { return !events_for("late-bad", "Refused").empty(); }))
      << a.log();
  drop_events("late", "NotValidated");
  drop_events("late-bad", "NotValidated");
  ASSERT_TRUE(refreshed_twice("late-bad", "Refused")) << a.log();
  ASSERT_TRUE(refreshed_twice("zz-refused", "Refused")) << a.log();
  EXPECT_TRUE(events_for("late", "NotValidated").empty()) << "its handler took it";
  EXPECT_TRUE(events_for("late-bad", "NotValidated").empty()) << "its handler refused it";
}

}  // namespace
}  // namespace dowser::it
