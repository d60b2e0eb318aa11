// dowserd end to end with the opcua handler: node-opcua servers behind an
// LDS become shared Instances and a Configuration-level resource, and a pod
// that asks for two gets both servers. The kubelet is the test kit's
// simulator; the whole binary runs inside run-in-netns.sh.
#include "daemon_harness.hpp"
#include "node_peer.hpp"

#include <set>

namespace dowser::it {
namespace {

using opcua::peers::NodePeer;
using opcua::peers::url_at;

constexpr int kLdsPort = 4840;
constexpr int kFirstServerPort = 4841;

class OpcuaDaemonTest : public DaemonTest {
 protected:
  static void SetUpTestSuite() {
    place_.logs = fs::path(OPCUA_TEST_LOGS);
    fs::create_directories(place_.logs);
    lds_ = opcua::peers::start_lds(place_, kLdsPort).release();
    servers_ =
        opcua::peers::start_servers(place_, {"Pump", "Valve"}, kFirstServerPort, url_at(kLdsPort))
            .release();
  }
  static void TearDownTestSuite() {
    delete servers_;
    delete lds_;
  }

  OpcuaDaemonTest() {
    fs::copy_file(OPCUA_MODULE_PATH, handler_dir_ / "libdowser-handler-opcua.so");
  }

  void opcua_configuration(const std::string& name, int capacity) {
    write_file(config_dir_ / (name + ".yaml"),
               "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: " + name +
                   "\nspec:\n  capacity: " + std::to_string(capacity) +
                   "\n  discoveryHandler:\n    name: opcua\n    discoveryDetails: |\n"
                   "      opcuaDiscoveryMethod:\n        standard:\n          discoveryUrls: [" +
                   url_at(kLdsPort) + "]\n      discoveryIntervalSeconds: 1\n");
  }

  static opcua::peers::PeerPlace place_;
  static NodePeer* lds_;
  static NodePeer* servers_;
};

opcua::peers::PeerPlace OpcuaDaemonTest::place_;
NodePeer* OpcuaDaemonTest::lds_ = nullptr;
NodePeer* OpcuaDaemonTest::servers_ = nullptr;

TEST_F(OpcuaDaemonTest, ServersBecomeInstancesAndAPodAskingForTwoGetsBoth) {
  opcua_configuration("plant", 2);
  auto& node = add_node("node-a");
  // One placeholder per server with a free slot on the Configuration resource.
  ASSERT_TRUE(node.wait_allocatable("akri.sh/plant", 2, 60s)) << node.log();

  auto stored = instances();
  ASSERT_EQ(stored.size(), 2u);
  for (const auto& entry : stored) {
    EXPECT_EQ(entry.instance.configuration_name, "plant");
    EXPECT_TRUE(entry.instance.shared) << "OPC UA servers are network devices";
    EXPECT_EQ(entry.instance.capacity, 2u);
    EXPECT_TRUE(node.wait_allocatable("akri.sh/" + entry.instance.name, 2)) << entry.instance.name;
  }

  auto both = node.kubelet->allocate("akri.sh/plant", {"default", "opcua-client"}, "c", 2);
  ASSERT_TRUE(both.ok()) << both.status.error_message();
  ASSERT_EQ(both.response.container_responses_size(), 1);
  std::set<std::string> urls, names;
  for (const auto& [key, value] : both.response.container_responses(0).envs()) {
    if (key.rfind("OPCUA_DISCOVERY_URL_", 0) == 0) urls.insert(value);
    if (key.rfind("OPCUA_APPLICATION_NAME_", 0) == 0) names.insert(value);
  }
  EXPECT_EQ(urls, (std::set<std::string>{url_at(kFirstServerPort), url_at(kFirstServerPort + 1)}));
  EXPECT_EQ(names, (std::set<std::string>{"Pump", "Valve"}));
}

}  // namespace
}  // namespace dowser::it
