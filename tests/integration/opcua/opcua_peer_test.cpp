// The opcua handler module, loaded as dowserd loads it (FakeHost), against
// node-opcua 2.186.4: a Local Discovery Server with registered servers, and
// servers on their own. Runs inside run-in-netns.sh (see CMakeLists.txt).
#include "node_peer.hpp"
#include "ua_client.hpp"
#include "ua_test_peer.hpp"

#include <gtest/gtest.h>
#include <dowser/testkit.hpp>

#include <set>

namespace opcua::peers {
namespace {

using dowser::testkit::FakeHost;
using dowser::testkit::Snapshot;

// Ports, all inside the test's own network namespace.
constexpr int kLdsPort = 4840;
constexpr int kPumpPort = 4841;  // Pump 4841 and Valve 4842, registered with the LDS
constexpr int kDirectPort = 4850;
constexpr int kShortLivedLdsPort = 4860;
constexpr int kRenamedPort = 4870;                      // servers whose URLs name other hosts
const std::string kRemoteLookingAddress = "10.77.0.1";  // on lo: see run-in-netns.sh

const std::string kPumpUrl = url_at(kPumpPort);
const std::string kValveUrl = url_at(kPumpPort + 1);
const std::string kLdsUrl = url_at(kLdsPort);

std::string details(const std::vector<std::string>& urls, const std::string& extra = "") {
  std::string list;
  for (const auto& url : urls) list += (list.empty() ? "" : ", ") + url;
  return "opcuaDiscoveryMethod: {standard: {discoveryUrls: [" + list +
         "]}}\ndiscoveryIntervalSeconds: 0.2\n" + extra;
}

std::set<std::string> ids(const Snapshot& snapshot) {
  std::set<std::string> result;
  for (const auto& device : snapshot) result.insert(device.id);
  return result;
}

auto has_ids(std::set<std::string> expected) {
  return [expected](const Snapshot& snapshot) { return ids(snapshot) == expected; };
}

// One LDS with Pump and Valve registered, shared by every test.
class OpcuaPeers : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    place_.logs = fs::path(OPCUA_TEST_LOGS);
    fs::create_directories(place_.logs);
    lds_ = start_lds(place_, kLdsPort).release();
    servers_ = start_servers(place_, {"Pump", "Valve"}, kPumpPort, kLdsUrl).release();
  }
  static void TearDownTestSuite() {
    delete servers_;
    delete lds_;
  }

  // Starts discovery with these details.
  dowser::testkit::SessionId discover(const std::string& request_details) {
    return host_.start({request_details, {}});
  }

  bool wait(dowser::testkit::SessionId session, const FakeHost::SnapshotPredicate& predicate) {
    return host_.wait_for_snapshot(session, predicate, 60s);
  }

  std::string describe(dowser::testkit::SessionId session) {
    std::string text = "snapshots:";
    for (const auto& snapshot : host_.snapshots(session)) {
      text += "\n  [";
      for (const auto& id : ids(snapshot)) text += " " + id;
      text += " ]";
    }
    text += "\nhandler log:";
    for (const auto& line : host_.logs()) text += "\n  " + line.text;
    return text;
  }

  static PeerPlace place_;
  static NodePeer* lds_;
  static NodePeer* servers_;
  FakeHost host_{OPCUA_MODULE_PATH};
};

PeerPlace OpcuaPeers::place_;
NodePeer* OpcuaPeers::lds_ = nullptr;
NodePeer* OpcuaPeers::servers_ = nullptr;

TEST_F(OpcuaPeers, AnLdsWithTwoServersGivesBothWithTheirProperties) {
  auto session = discover(details({kLdsUrl}));
  ASSERT_TRUE(wait(session, has_ids({kPumpUrl, kValveUrl}))) << describe(session);
  auto pump = host_.latest_snapshot(session)->at(0);
  EXPECT_EQ(pump.sharing, dowser::Sharing::shared);
  EXPECT_EQ(pump.properties, (dowser::Properties{
                                 {"OPCUA_DISCOVERY_URL", kPumpUrl},
                                 {"OPCUA_APPLICATION_NAME", "Pump"},
                                 {"OPCUA_APPLICATION_URI", "urn:dowser:peers:Pump"},
                                 {"OPCUA_SECURITY_POLICIES",
                                  "None,Basic256Sha256,Aes128_Sha256_RsaOaep,Aes256_Sha256_RsaPss"},
                                 {"OPCUA_SECURITY_MODES", "None,Sign,SignAndEncrypt"},
                             }));
  EXPECT_EQ(host_.latest_snapshot(session)->at(1).properties.at("OPCUA_APPLICATION_NAME"), "Valve");
  EXPECT_TRUE(host_.violations().empty());
}

TEST_F(OpcuaPeers, IncludeKeepsOnlyTheNamedServers) {
  auto session =
      discover(details({kLdsUrl}, "applicationNames: {action: Include, items: [Valve]}"));
  ASSERT_TRUE(wait(session, has_ids({kValveUrl}))) << describe(session);
  for (const auto& snapshot : host_.snapshots(session))
    EXPECT_FALSE(ids(snapshot).contains(kPumpUrl)) << "Pump was never reported";
}

TEST_F(OpcuaPeers, ExcludeDropsTheNamedServers) {
  auto session =
      discover(details({kLdsUrl}, "applicationNames: {action: Exclude, items: [Valve]}"));
  ASSERT_TRUE(wait(session, has_ids({kPumpUrl}))) << describe(session);
  for (const auto& snapshot : host_.snapshots(session))
    EXPECT_FALSE(ids(snapshot).contains(kValveUrl)) << "Valve was never reported";
}

TEST_F(OpcuaPeers, AServerGivenByItsOwnUrlWithoutAnLds) {
  auto direct = start_servers(place_, {"Direct"}, kDirectPort, "");
  auto session = discover(details({url_at(kDirectPort)}));
  ASSERT_TRUE(wait(session, has_ids({url_at(kDirectPort)}))) << describe(session);
  EXPECT_EQ(host_.latest_snapshot(session)->at(0).properties.at("OPCUA_APPLICATION_NAME"),
            "Direct");
}

TEST_F(OpcuaPeers, AServerNamedByTheLdsAndByItsOwnUrlIsOneDevice) {
  // Pump's own URL first, the LDS (which names Pump too) second.
  auto session = discover(details({kPumpUrl, kLdsUrl}));
  ASSERT_TRUE(wait(session, has_ids({kPumpUrl, kValveUrl}))) << describe(session);
  EXPECT_EQ(host_.latest_snapshot(session)->size(), 2u);
}

TEST_F(OpcuaPeers, AServerThatGoesAwayIsReportedGone) {
  // Its own LDS, so the other tests' LDS keeps only Pump and Valve.
  auto lds = start_lds(place_, kShortLivedLdsPort);
  auto stays = start_servers(place_, {"Stays"}, kShortLivedLdsPort + 1, url_at(kShortLivedLdsPort));
  auto crashes =
      start_servers(place_, {"Crashes"}, kShortLivedLdsPort + 2, url_at(kShortLivedLdsPort));
  auto session = discover(details({url_at(kShortLivedLdsPort)}));
  std::string stays_url = url_at(kShortLivedLdsPort + 1);
  ASSERT_TRUE(wait(session, has_ids({stays_url, url_at(kShortLivedLdsPort + 2)})))
      << describe(session);

  // Killed, it cannot unregister: the LDS still names it, but it no longer answers.
  crashes->stop(SIGKILL);
  EXPECT_TRUE(wait(session, has_ids({stays_url}))) << describe(session);
  // Stopped cleanly, it unregisters from the LDS.
  stays->stop(SIGTERM);
  ASSERT_TRUE(lds->wait_for_line("UNREGISTERED urn:dowser:peers:Stays")) << lds->transcript();
  EXPECT_TRUE(wait(session, has_ids({}))) << describe(session);
}

// It holds the session's first report at most 10 s (kFirstReportWait).
TEST_F(OpcuaPeers, AUrlThatNeverAnswersHoldsTheOthersOnlySoLong) {
  // Accepts the connection, reads the Hello, never answers.
  test::TcpTestPeer silent([](test::PeerConnection& c) { c.wait_for_client_close(); });
  auto session = discover(details({silent.url(), kLdsUrl}, "requestTimeoutSeconds: 600"));
  ASSERT_TRUE(wait(session, has_ids({kPumpUrl, kValveUrl}))) << describe(session);
  ASSERT_TRUE(silent.wait_accepted(1, 10s));
  EXPECT_FALSE(silent.wait_closed(1, 0s)) << "the silent URL's request was still waiting";
  host_.stop(session);
  EXPECT_TRUE(silent.wait_closed(1, 10s)) << "stopping ended the wait";
}

TEST_F(OpcuaPeers, AdvertisedUrlsThisNodeCannotUseAreRewrittenToTheLdsHost) {
  // One server says "localhost", the other a name that does not resolve.
  auto local = start_servers(place_, {"SaysLocalhost"}, kRenamedPort, kLdsUrl, "localhost");
  auto unknown =
      start_servers(place_, {"SaysUnknown"}, kRenamedPort + 1, kLdsUrl, "opcua-box.invalid");
  std::string remote_lds = "opc.tcp://" + kRemoteLookingAddress + ":" + std::to_string(kLdsPort);
  auto at = [](const std::string& host, int port) {
    return "opc.tcp://" + host + ":" + std::to_string(port);
  };
  // Asked through an address that is not loopback, "localhost" means the LDS's machine.
  auto remote = discover(details({remote_lds}));
  // (Pump and Valve registered as 127.0.0.1: loopback too.)
  EXPECT_TRUE(wait(remote, has_ids({at(kRemoteLookingAddress, kPumpPort),
                                    at(kRemoteLookingAddress, kPumpPort + 1),
                                    at(kRemoteLookingAddress, kRenamedPort),
                                    at(kRemoteLookingAddress, kRenamedPort + 1)})))
      << describe(remote);
  // Through loopback, "localhost" stays; the unknown name still takes the LDS's host.
  auto local_view = discover(details({kLdsUrl}));
  EXPECT_TRUE(wait(local_view, has_ids({kPumpUrl, kValveUrl, at("localhost", kRenamedPort),
                                        at("127.0.0.1", kRenamedPort + 1)})))
      << describe(local_view);
}

TEST_F(OpcuaPeers, NodeOpcuaChunksItsAnswerToOurReceiveBuffer) {
  ClientOptions options;
  options.receive_buffer_size = 8192;
  Cancellation cancellation;
  UaChannel channel(kPumpUrl, options, cancellation);
  auto body = channel.call([](const ua::RequestHeader& header) {
    return ua::encode_get_endpoints_request(header, kPumpUrl);
  });
  EXPECT_GE(channel.last_response().chunks, 2u) << "7 endpoints with certificates exceed 8192";
  EXPECT_EQ(ua::decode_get_endpoints_response(body).endpoints.size(), 7u);
  EXPECT_LE(channel.server_limits().send_buffer_size, 8192u);
}

}  // namespace
}  // namespace opcua::peers
