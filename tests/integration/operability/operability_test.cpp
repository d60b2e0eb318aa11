// dowserd's HTTP endpoints against known state: Instances made by debugEcho,
// claims made through the kubelet simulator; metrics move when things happen.
#include "operability_harness.hpp"

#include "deviceplugin/v1beta1/api.grpc.pb.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>

namespace dowser::it {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kStatusApi = {"--http-listen=127.0.0.1:0"};

std::vector<std::string> with_status_api(std::vector<std::string> args) {
  args.insert(args.end(), kStatusApi.begin(), kStatusApi.end());
  return args;
}

std::set<std::string> store_names(const std::vector<store::StoredInstance>& instances) {
  std::set<std::string> names;
  for (const auto& stored : instances) names.insert(stored.instance.name);
  return names;
}

// An Allocate straight to a plugin's socket, as a kubelet would send it.
grpc::Status allocate_directly(const fs::path& socket, const std::string& device_id) {
  auto channel = grpc::CreateChannel("unix:" + socket.string(), grpc::InsecureChannelCredentials());
  auto stub = v1beta1::DevicePlugin::NewStub(channel);
  v1beta1::AllocateRequest request;
  request.add_container_requests()->add_devices_ids(device_id);
  v1beta1::AllocateResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return stub->Allocate(&context, request, &response);
}

std::string cams_series(const std::string& name) {
  return name + "{namespace=\"default\",configuration=\"cams\"}";
}

// The cams Configuration's slots in one state.
std::string slots_series(const std::string& state) {
  return "dowser_slots{namespace=\"default\",configuration=\"cams\",state=\"" + state + "\"}";
}

class OperabilityTest : public DaemonTest {
 protected:
  // A node serving two debugEcho cameras of capacity 2, with its status API.
  Node& cams_node(std::vector<std::string> extra = {}) {
    echo_configuration("cams", {"cam0", "cam1"}, 2);
    auto& node = add_node("node-a", with_status_api(std::move(extra)));
    EXPECT_TRUE(node.wait_allocatable("akri.sh/cams", 2)) << node.log();
    url_ = status_url(node);
    EXPECT_FALSE(url_.empty()) << node.log();
    return node;
  }

  bool ready() { return http(url_, "/readyz").status == 200; }

  std::string url_;
};

TEST_F(OperabilityTest, HealthAndReadinessFollowTheDaemon) {
  auto& node = cams_node();
  auto health = http(url_, "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  ASSERT_TRUE(eventually([&] { return ready(); })) << http(url_, "/readyz").body;
  auto readyz = http(url_, "/readyz").body;
  EXPECT_THAT(readyz, HasSubstr("[+]handlers: 2 loaded\n"));
  EXPECT_THAT(readyz, HasSubstr("[+]store\n"));
  EXPECT_THAT(readyz, HasSubstr("[+]kubelet: 3 of 3 plugins registered\n"));

  // A Configuration whose handler this node lacks waits for it, named; the
  // node serves the rest and stays ready (a DaemonSet's rollout needs that).
  write_file(config_dir_ / "ghost.yaml",
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: ghost}\n"
             "spec:\n  discoveryHandler: {name: nope, discoveryDetails: ''}\n");
  ASSERT_TRUE(node.wait_for_log("no discovery handler named 'nope'")) << node.log();
  // Ready once its CL plugin (served all the same) is registered.
  EXPECT_TRUE(eventually([&] { return ready(); })) << http(url_, "/readyz").body;
  EXPECT_THAT(http(url_, "/readyz").body,
              HasSubstr("[+]handlers: 2 loaded; Configurations wait for missing: nope\n"));
}

// Plugins registered with a kubelet that has gone stay registered in their
// stats: readiness asks kubelet.sock itself. A killed kubelet leaves its
// socket refusing connections (here: bound, not listening).
TEST_F(OperabilityTest, NotReadyWhileTheKubeletIsGone) {
  auto& node = cams_node();
  ASSERT_TRUE(eventually([&] { return ready(); })) << http(url_, "/readyz").body;
  const auto config = node.kubelet->config();
  const fs::path socket_path = node.kubelet->kubelet_socket();
  node.kubelet.reset();
  fs::remove(socket_path);
  ASSERT_TRUE(eventually([&] { return !ready(); })) << http(url_, "/readyz").body;
  EXPECT_THAT(http(url_, "/readyz").body,
              HasSubstr("[-]kubelet: " + socket_path.string() + " is missing"));

  const int refusing = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof address.sun_path - 1);
  ASSERT_EQ(::bind(refusing, reinterpret_cast<sockaddr*>(&address), sizeof address), 0)
      << std::strerror(errno);
  EXPECT_THAT(http(url_, "/readyz").body,
              HasSubstr("[-]kubelet: " + socket_path.string() + " refuses connections"));
  ::close(refusing);

  node.kubelet = std::make_unique<testkit::KubeletSimulator>(config);
  EXPECT_TRUE(eventually([&] { return ready(); })) << http(url_, "/readyz").body;
}

TEST_F(OperabilityTest, StatusApiDescribesHandlersConfigurationsInstancesAndPlugins) {
  auto& node = cams_node();
  ASSERT_TRUE(eventually([&] { return ready(); }));

  auto summary = api(url_, "/api/v1/status").get<status_api::Summary>();
  EXPECT_EQ(summary.node, "node-a");
  EXPECT_FALSE(summary.version.empty());
  EXPECT_TRUE(summary.readiness.ready);
  EXPECT_EQ(summary.configurations, 1u);
  EXPECT_EQ(summary.instances, 2u);
  EXPECT_EQ(summary.plugins, 3u);

  auto handlers =
      api(url_, "/api/v1/handlers")["items"].get<std::vector<status_api::HandlerStatus>>();
  std::map<std::string, status_api::HandlerStatus> by_name;
  for (const auto& handler : handlers) by_name[handler.name] = handler;
  ASSERT_TRUE(by_name.count("debugEcho"));
  EXPECT_EQ(by_name["debugEcho"].state, "loaded");
  EXPECT_EQ(by_name["debugEcho"].version, summary.version);
  EXPECT_TRUE(by_name.count("testDevices"));

  auto configurations = api(url_, "/api/v1/configurations")["items"]
                            .get<std::vector<status_api::ConfigurationStatus>>();
  ASSERT_EQ(configurations.size(), 1u);
  const auto& cams = configurations[0];
  EXPECT_EQ(cams.name, "cams");
  EXPECT_EQ(cams.handler, "debugEcho");
  EXPECT_EQ(cams.resource, "akri.sh/cams");
  EXPECT_EQ(cams.state, "discovering");
  EXPECT_EQ(cams.devices, 2u);
  EXPECT_EQ(cams.instances, 2u);
  EXPECT_EQ(cams.capacity, 2u);
  EXPECT_GE(cams.snapshots, 1u);
  EXPECT_FALSE(cams.last_snapshot.empty());

  auto listed = api(url_, "/api/v1/instances?configuration=cams")["items"]
                    .get<std::vector<status_api::InstanceStatus>>();
  std::set<std::string> names;
  for (const auto& instance : listed) {
    names.insert(instance.name);
    EXPECT_EQ(instance.nodes, std::vector<std::string>{"node-a"});
    EXPECT_TRUE(instance.here);
    EXPECT_FALSE(instance.shared);
    EXPECT_EQ(instance.slots.size(), 2u);
    for (const auto& slot : instance.slots) EXPECT_EQ(slot.usage, "") << slot.name;
  }
  EXPECT_EQ(names, store_names(instances()));
  auto unknown = http(url_, "/api/v1/instances?configuration=other");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(nlohmann::json::parse(unknown.body)["error"], "no Configuration named other");

  // Each plugin's last list is what the kubelet was sent.
  auto sim = node.kubelet->status();
  auto plugins = api(url_, "/api/v1/plugins")["items"].get<std::vector<status_api::PluginStatus>>();
  ASSERT_EQ(plugins.size(), 3u);
  for (const auto& plugin : plugins) {
    EXPECT_TRUE(plugin.registered) << plugin.resource;
    EXPECT_FALSE(plugin.socket.empty());
    EXPECT_EQ(plugin.kind, plugin.resource == "akri.sh/cams" ? "configuration" : "instance");
    const auto* seen = sim.resource(plugin.resource);
    ASSERT_NE(seen, nullptr) << plugin.resource;
    std::vector<std::string> ids;
    for (const auto& device : plugin.devices) ids.push_back(device.id);
    std::vector<std::string> seen_ids;
    for (const auto& device : seen->devices) seen_ids.push_back(device.id);
    EXPECT_EQ(ids, seen_ids) << plugin.resource;
  }
}

TEST_F(OperabilityTest, AllocationsShowAsSlotUsageAndInTheMetrics) {
  auto& node = cams_node({"--reclaim-interval-ms=50", "--reclaim-grace-ms=100"});
  ASSERT_TRUE(eventually([&] { return ready(); }));
  EXPECT_EQ(
      metric(url_,
             "dowser_instances{namespace=\"default\",configuration=\"cams\",shared=\"false\"}"),
      2);
  EXPECT_EQ(metric(url_, cams_series("dowser_discovered_devices")), 2);
  EXPECT_EQ(metric(url_, slots_series("free")), 4);
  EXPECT_EQ(metric(url_, slots_series("configuration_level")), 0);
  EXPECT_GE(metric(url_, "dowser_discovery_snapshots_total{handler=\"debugEcho\"}"), 1);
  EXPECT_GE(metric(url_, "dowser_discovery_to_kubelet_seconds_count"), 1);
  EXPECT_EQ(metric(url_, "dowser_plugins{kind=\"instance\",registered=\"true\"}"), 2);
  EXPECT_EQ(metric(url_, "dowser_plugins{kind=\"configuration\",registered=\"true\"}"), 1);
  EXPECT_EQ(metric(url_, "dowser_handlers_loaded"), 2);
  EXPECT_EQ(metric(url_, "dowser_configurations{state=\"discovering\"}"), 1);
  EXPECT_GT(metric(url_, "process_resident_memory_bytes"), 0);
  EXPECT_GT(metric(url_, "process_open_fds"), 0);
  EXPECT_GT(metric(url_, "process_threads"), 1);
  EXPECT_EQ(metric(url_, "dowser_allocate_total{kind=\"configuration\",result=\"ok\"}"), 0)
      << "no Allocate yet";

  auto cl = node.kubelet->allocate("akri.sh/cams", {"default", "pod-a"}, "c", 1);
  ASSERT_TRUE(cl.ok()) << cl.status.error_message();
  EXPECT_EQ(metric(url_, "dowser_allocate_total{kind=\"configuration\",result=\"ok\"}"), 1);
  EXPECT_EQ(metric(url_, "dowser_allocate_duration_seconds_count{kind=\"configuration\"}"), 1);
  EXPECT_EQ(metric(url_, "dowser_slot_claims_total{kind=\"configuration\"}"), 1);
  EXPECT_EQ(metric(url_, slots_series("configuration_level")), 1);
  EXPECT_EQ(metric(url_, slots_series("free")), 3);

  // The claimed slot, as the status API shows it.
  std::string held_by = "C:" + cl.device_ids.at(0) + ":node-a";
  std::string claimed_instance;
  for (const auto& instance :
       api(url_, "/api/v1/instances")["items"].get<std::vector<status_api::InstanceStatus>>())
    for (const auto& slot : instance.slots)
      if (slot.usage == held_by) claimed_instance = instance.name;
  ASSERT_FALSE(claimed_instance.empty()) << "no slot shows " << held_by;
  auto one = api(url_, "/api/v1/instances/" + claimed_instance).get<status_api::InstanceStatus>();
  EXPECT_EQ(one.name, claimed_instance);
  EXPECT_EQ(http(url_, "/api/v1/instances/nope").status, 404);

  // The simulator, like the kubelet, only sends ids it was offered; a
  // refusal needs a call of our own, on the plugin's socket.
  std::string socket;
  for (const auto& plugin :
       api(url_, "/api/v1/plugins")["items"].get<std::vector<status_api::PluginStatus>>())
    if (plugin.resource == "akri.sh/cams") socket = plugin.socket;
  auto refused = allocate_directly(root_ / "node-a" / "dp" / socket, "no-such-device");
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(metric(url_, "dowser_allocate_total{kind=\"configuration\",result=\"refused\"}"), 1);
  EXPECT_EQ(metric(url_, "dowser_allocate_duration_seconds_count{kind=\"configuration\"}"), 2);

  auto il = "akri.sh/" + claimed_instance;
  auto il_claim = node.kubelet->allocate(il, {"default", "pod-c"}, "c", 1);
  ASSERT_TRUE(il_claim.ok()) << il_claim.status.error_message();
  EXPECT_EQ(metric(url_, "dowser_allocate_total{kind=\"instance\",result=\"ok\"}"), 1);
  EXPECT_EQ(metric(url_, "dowser_slot_claims_total{kind=\"instance\"}"), 1);
  EXPECT_EQ(metric(url_, slots_series("instance_level")), 1);
  auto cams = api(url_, "/api/v1/configurations")["items"]
                  .get<std::vector<status_api::ConfigurationStatus>>()
                  .at(0);
  EXPECT_EQ(cams.slots, (std::map<std::string, uint64_t>{{"free", 2},
                                                         {"offline", 0},
                                                         {"instance_level", 1},
                                                         {"configuration_level", 1},
                                                         {"other_nodes", 0},
                                                         {"unreadable", 0}}));

  // Pods gone: the reclaimer frees both claims (each a grace after it was
  // last granted or seen in use, so not necessarily in one pass).
  node.kubelet->delete_pod({"default", "pod-a"});
  node.kubelet->delete_pod({"default", "pod-c"});
  ASSERT_TRUE(node.wait_allocatable(il, 2)) << node.log();
  EXPECT_TRUE(eventually([&] { return metric(url_, "dowser_slot_reclaims_total") == 2; }))
      << http(url_, "/metrics").body;
  EXPECT_GE(metric(url_, "dowser_slot_releases_total{kind=\"instance\"}"), 1);
  EXPECT_TRUE(eventually([&] { return metric(url_, slots_series("free")) == 4; }))
      << http(url_, "/metrics").body;
  EXPECT_GE(metric(url_, "dowser_podresources_lists_total"), 1);

  // A kubelet restart: every plugin registers again.
  node.kubelet->restart();
  EXPECT_TRUE(eventually([&] { return metric(url_, "dowser_kubelet_reregistrations_total") >= 3; }))
      << http(url_, "/metrics").body;
}

// A handler call that does not return (here a stop_discovery, the session
// restarted for new details) holds up that handler's other Configurations:
// dowserd warns, naming the handler and the call, /readyz fails on it and
// the handler shows as stuck, while everything else is served.
TEST_F(OperabilityTest, AHandlerCallThatDoesNotReturnIsWarnedOfAndFailsReadiness) {
  fs::copy_file(HANGS_ON_REQUEST_SO, handler_dir_ / "libfixture-hangs-on-request.so");
  auto hangs = [&](const std::string& details) {
    write_file(config_dir_ / "stuck.yaml",
               "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: stuck\nspec:\n"
               "  discoveryHandler:\n    name: fixtureHangs\n    discoveryDetails: " +
                   details + "\n");
  };
  hangs("stop-hangs");
  auto& node = cams_node({"--handler-rescan-ms=200"});
  ASSERT_TRUE(node.wait_for_log("Configuration default/stuck added")) << node.log();
  ASSERT_TRUE(eventually([&] { return ready(); })) << http(url_, "/readyz").body;
  hangs("restarted");
  ASSERT_TRUE(node.wait_for_log("Configuration default/stuck changed")) << node.log();

  const std::string stuck = "stop_discovery of default/stuck has not returned for";
  EXPECT_TRUE(node.wait_for_log("handler fixtureHangs: " + stuck, 30s)) << node.log();
  const auto readiness = http(url_, "/readyz");
  EXPECT_EQ(readiness.status, 503);
  EXPECT_THAT(readiness.body, HasSubstr(stuck)) << readiness.body;
  bool shown = false;
  for (const auto& handler :
       api(url_, "/api/v1/handlers")["items"].get<std::vector<status_api::HandlerStatus>>())
    if (handler.name == "fixtureHangs")
      shown = handler.state == "stuck" && handler.error.find(stuck) != std::string::npos;
  EXPECT_TRUE(shown) << http(url_, "/api/v1/handlers").body;
  EXPECT_TRUE(node.kubelet->allocate("akri.sh/cams", {"default", "pod-a"}, "c", 1).ok())
      << "the other handler's Configuration is served";
}

// A claim written back into an Instance deleted from outside is a restore,
// not a new claim: the claims counter counts what pods asked for.
TEST_F(OperabilityTest, ARestoredClaimIsCountedAsARestoreNotAClaim) {
  auto& node = cams_node();
  const std::string name = instances(2).at(0).instance.name;
  ASSERT_TRUE(node.wait_allocatable("akri.sh/" + name, 2)) << node.log();
  ASSERT_TRUE(node.kubelet->allocate("akri.sh/" + name, {"default", "pod-a"}, "c", 1).ok());
  EXPECT_EQ(metric(url_, "dowser_slot_claims_total{kind=\"instance\"}"), 1);
  EXPECT_TRUE(std::isnan(metric(url_, "dowser_slot_restores_total{kind=\"instance\"}")))
      << "nothing restored yet";

  store::FileInstanceStore store(state_dir_ / "instances");
  const auto before = store.get("default", name);
  ASSERT_TRUE(before);
  store.remove("default", name, before->revision);
  ASSERT_TRUE(node.wait_for_log("Instance " + name + ": restored the claim")) << node.log();
  EXPECT_EQ(metric(url_, "dowser_slot_restores_total{kind=\"instance\"}"), 1);
  EXPECT_EQ(metric(url_, "dowser_slot_claims_total{kind=\"instance\"}"), 1);
}

// The new Instances of one discovery report are made durable together, with
// one fdatasync of the journal where a sync per create would take twelve.
TEST_F(OperabilityTest, NewInstancesOfOneReportShareOneJournalSync) {
  auto& node = add_node("node-a", kStatusApi);
  url_ = status_url(node);
  ASSERT_FALSE(url_.empty()) << node.log();
  const double before = metric(url_, "dowser_store_journal_syncs_total");
  ASSERT_FALSE(std::isnan(before)) << http(url_, "/metrics").body;

  std::vector<std::string> cams;
  for (int i = 0; i < 12; ++i) cams.push_back("cam" + std::to_string(i));
  echo_configuration("many", cams, 1);
  ASSERT_TRUE(node.wait_allocatable("akri.sh/many", 12)) << node.log();
  // The store's own thread syncs after the lists went out: wait for it.
  // debugEcho reports its twelve devices at once; one more sync is allowed
  // for a second report racing the first.
  const auto syncs = [&] { return metric(url_, "dowser_store_journal_syncs_total") - before; };
  EXPECT_TRUE(eventually([&] { return syncs() >= 1; })) << http(url_, "/metrics").body;
  EXPECT_LE(syncs(), 2) << http(url_, "/metrics").body;
}

TEST_F(OperabilityTest, FailuresAreVisibleWithoutReadingLogs) {
  { std::ofstream(handler_dir_ / "libbroken.so") << "not a shared object"; }
  fs::permissions(handler_dir_ / "libbroken.so", fs::perms::owner_read | fs::perms::owner_write |
                                                     fs::perms::group_read |
                                                     fs::perms::others_read);
  write_file(config_dir_ / "refused.yaml",
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: refused}\n"
             "spec:\n  discoveryHandler: {name: debugEcho, discoveryDetails: '{{{'}\n");
  write_file(config_dir_ / "ghost.yaml",
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: ghost}\n"
             "spec:\n  discoveryHandler: {name: nope, discoveryDetails: ''}\n");
  auto& node = add_node("node-a", kStatusApi);
  url_ = status_url(node);
  ASSERT_FALSE(url_.empty()) << node.log();

  std::map<std::string, status_api::ConfigurationStatus> configurations;
  ASSERT_TRUE(eventually([&] {
    for (const auto& c : api(url_, "/api/v1/configurations")["items"]
                             .get<std::vector<status_api::ConfigurationStatus>>())
      configurations[c.name] = c;
    return configurations.count("ghost") && configurations["ghost"].state == "failing";
  })) << node.log();
  EXPECT_THAT(configurations["ghost"].last_error,
              HasSubstr("no discovery handler named 'nope' is loaded"));
  EXPECT_TRUE(configurations["ghost"].last_error_current);
  EXPECT_FALSE(configurations["ghost"].last_error_at.empty());
  EXPECT_GE(configurations["ghost"].errors, 1u);
  ASSERT_TRUE(configurations.count("refused"));
  EXPECT_EQ(configurations["refused"].state, "refused");
  EXPECT_THAT(configurations["refused"].last_error,
              HasSubstr("refused by handler debugEcho: discovery details are not valid YAML"));
  EXPECT_TRUE(configurations["refused"].last_error_current);

  bool broken_listed = false;
  for (const auto& handler :
       api(url_, "/api/v1/handlers")["items"].get<std::vector<status_api::HandlerStatus>>()) {
    if (handler.path.ends_with("libbroken.so")) {
      broken_listed = true;
      EXPECT_EQ(handler.state, "failed");
      EXPECT_THAT(handler.error, HasSubstr("open: "));
    }
  }
  EXPECT_TRUE(broken_listed);
  EXPECT_EQ(metric(url_, "dowser_handler_load_failures{stage=\"open\"}"), 1);
  EXPECT_GE(metric(url_, "dowser_discovery_errors_total{handler=\"nope\"}"), 1);
  EXPECT_EQ(metric(url_, "dowser_configurations{state=\"failing\"}"), 1);
  EXPECT_EQ(metric(url_, "dowser_configurations{state=\"refused\"}"), 1);
  // Shown, and not a reason to take the node out: it serves what it can
  // (once its plugins are registered).
  EXPECT_TRUE(eventually([&] { return http(url_, "/readyz").status == 200; }))
      << http(url_, "/readyz").body;
  EXPECT_THAT(http(url_, "/readyz").body, HasSubstr("Configurations wait for missing: nope"));
}

// An Allocate the store fails (here: the Instance file made unreadable from
// outside) is an error, not a refusal: the pool could have met it. /readyz
// says not ready, and why, until a store write succeeds again.
TEST_F(OperabilityTest, AStoreFailureIsAnErrorNotARefusalAndShowsInReadiness) {
  auto& node = cams_node();
  ASSERT_TRUE(eventually([&] { return ready(); })) << http(url_, "/readyz").body;
  const std::string name = instances(2).at(0).instance.name;
  const fs::path file = state_dir_ / "instances" / "default" / (name + ".json");
  const std::string stored = read_text(file);
  write_file(file, "{ not an Instance");

  EXPECT_FALSE(node.kubelet->allocate("akri.sh/" + name, {"default", "pod-a"}, "c", 1).ok());
  EXPECT_EQ(metric(url_, "dowser_allocate_total{kind=\"instance\",result=\"error\"}"), 1);
  EXPECT_EQ(metric(url_, "dowser_allocate_total{kind=\"instance\",result=\"refused\"}"), 0);
  EXPECT_TRUE(node.wait_for_log("akri.sh/" + name +
                                ": Allocate failed: the instance store failed: " + file.string()))
      << node.log();
  const auto readyz = http(url_, "/readyz");
  EXPECT_EQ(readyz.status, 503) << readyz.body;
  EXPECT_THAT(readyz.body, HasSubstr("[-]store: the last write failed: " + file.string()));

  write_file(file, stored);  // mended
  EXPECT_TRUE(node.kubelet->allocate("akri.sh/" + name, {"default", "pod-b"}, "c", 1).ok());
  EXPECT_TRUE(ready()) << http(url_, "/readyz").body;
}

// Fills a file system: writes to path until no byte more fits.
void fill_file_system(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  const std::string block(64 * 1024, 'x');
  while (::write(fd, block.data(), block.size()) > 0) {
  }
  const int error = errno;
  ::close(fd);
  ASSERT_EQ(error, ENOSPC) << path << ": " << std::strerror(error);
}

// Every Instance file in the directory holds an Instance (not empty, not
// torn), as readers of the store (another dowserd, a restart) need.
void expect_whole_instance_files(const fs::path& directory) {
  for (const auto& entry : fs::directory_iterator(directory)) {
    const std::string text = read_text(entry.path());
    EXPECT_FALSE(text.empty()) << entry.path() << " is empty";
    EXPECT_TRUE(nlohmann::json::accept(text)) << entry.path() << " is torn: " << text;
  }
}

// A full disk, for real: a 2 MiB tmpfs mounted over the state directory in
// dowserd's own mount namespace (so the test fills no disk of the machine's),
// filled once the journal holds its first Instance. The new Instance of a
// second device cannot be written: no Instance file is left empty or torn,
// /readyz says not ready and why, and once there is room the write the
// daemon retries makes it ready again.
TEST_F(OperabilityTest, AFullDiskLeavesNoTornInstanceFileAndShowsInReadiness) {
  if (std::system("unshare -m --propagation private true") != 0)
    GTEST_SKIP() << "needs mount namespaces (run as root)";
  echo_configuration("cams", {"cam0"}, 1);
  fs::create_directories(state_dir_);
  nodes_.push_back(std::make_unique<Node>(
      root_, "node-a", state_dir_, config_dir_, handler_dir_, kStatusApi,
      std::vector<std::string>{"unshare", "-m", "--propagation", "private", "sh", "-c",
                               "mount -t tmpfs -o size=2m tmpfs \"$1\" && shift && exec \"$@\"",
                               "sh", state_dir_.string()}));
  auto& node = *nodes_.back();
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  url_ = status_url(node);
  ASSERT_TRUE(eventually([&] { return ready(); })) << http(url_, "/readyz").body;
  // The state directory as dowserd sees it, through its mount namespace.
  const fs::path state =
      fs::path("/proc/" + std::to_string(node.pid()) + "/root") / state_dir_.relative_path();
  const fs::path instance_files = state / "instances" / "default";
  fill_file_system(state / "filler");

  echo_configuration("cams", {"cam0", "cam1"}, 1);
  EXPECT_TRUE(eventually([&] {
    return http(url_, "/readyz").body.find("[-]store: the last write failed") != std::string::npos;
  })) << http(url_, "/readyz").body
      << node.log();
  const auto readyz = http(url_, "/readyz");
  EXPECT_EQ(readyz.status, 503);
  EXPECT_THAT(readyz.body, HasSubstr("No space left on device"));
  expect_whole_instance_files(instance_files);
  const std::string accepted_requests = (state_dir_ / "accepted-requests").string();
  EXPECT_TRUE(node.wait_for_log("cannot record accepted discovery requests in " +
                                accepted_requests + ": write " + accepted_requests +
                                ".tmp: No space left on device; retrying"))
      << node.log();

  fs::remove(state / "filler");
  EXPECT_TRUE(eventually([&] { return ready(); }, 30s)) << http(url_, "/readyz").body;
  EXPECT_TRUE(node.wait_for_log(
      "recorded accepted discovery requests in " + accepted_requests + " again", 30s))
      << node.log();
  EXPECT_TRUE(node.wait_allocatable("akri.sh/cams", 2)) << node.log();
  expect_whole_instance_files(instance_files);
  EXPECT_EQ(std::distance(fs::directory_iterator(instance_files), fs::directory_iterator()), 2);
}

// A node name from NODE_NAME (no --node-name) that Kubernetes would refuse
// is blamed on the variable: the message named --node-name, which nobody gave.
TEST_F(OperabilityTest, ABadNodeNameFromTheEnvironmentIsNamedAsSuch) {
  auto result = run_command(
      root_, {"/usr/bin/env", "NODE_NAME=Bad_Name", DOWSERD, "--config-dir=" + config_dir_.string(),
              "--handler-dir=" + handler_dir_.string(), "--state-dir=" + state_dir_.string(),
              "--kubelet-dir=" + (root_ / "dp").string()});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_THAT(result.err,
              HasSubstr("'Bad_Name' from the NODE_NAME environment variable (no --node-name "
                        "given): a node name must start and end with a lowercase letter or "
                        "digit"));
}

TEST_F(OperabilityTest, ABusyPortDoesNotStopTheDaemon) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor taken(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  auto address = "127.0.0.1:" + std::to_string(taken.local_endpoint().port());
  echo_configuration("cams", {"cam0"}, 1);
  auto& node = add_node("node-a", {"--http-listen=" + address});
  EXPECT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
  EXPECT_TRUE(node.wait_for_log("status API: cannot listen on " + address)) << node.log();
  EXPECT_TRUE(node.running());
}

}  // namespace
}  // namespace dowser::it
