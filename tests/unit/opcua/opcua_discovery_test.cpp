// One discovery pass, over a table of answers instead of sockets.
#include "fake_network.hpp"

#include <gtest/gtest.h>

namespace opcua::test {
namespace {

using dowser::LogLevel;
using ua::ApplicationType;
using ua::MessageSecurityMode;

const std::string kLds = "opc.tcp://10.0.0.5:4840";

class OpcuaScan : public ::testing::Test {
 protected:
  OpcuaScan() : log_(recorder_.sink()) {
    settings_.discovery_urls = {kLds};
    network_.resolvable("10.0.0.7");
    network_.resolvable("localhost");
  }

  // A server the LDS lists that answers GetEndpoints.
  void add_server(const std::string& name, ApplicationType type, const std::string& url) {
    servers_.push_back(application(name, type, {url}));
    network_.set_find_servers(kLds, servers_);
    network_.set_endpoints(url, endpoints_for({{MessageSecurityMode::none, "None"}}));
  }

  std::vector<std::string> scanned_ids() {
    std::vector<std::string> ids;
    for (const auto& device : scan_url(kLds, settings_, services_, log_)) ids.push_back(device.id);
    return ids;
  }

  Settings settings_;
  FakeNetwork network_;
  Cancellation cancellation_;
  DiscoveryServices services_ = network_.services(cancellation_);  // one session's
  LogRecorder recorder_;
  StateLog log_;
  std::vector<ua::ApplicationDescription> servers_;
};

TEST_F(OpcuaScan, KeepsServersAndClientAndServersOnly) {
  add_server("S", ApplicationType::server, "opc.tcp://10.0.0.7:1");
  add_server("CS", ApplicationType::client_and_server, "opc.tcp://10.0.0.7:2");
  add_server("C", ApplicationType::client, "opc.tcp://10.0.0.7:3");
  add_server("LDS", ApplicationType::discovery_server, "opc.tcp://10.0.0.7:4");
  EXPECT_EQ(scanned_ids(),
            (std::vector<std::string>{"opc.tcp://10.0.0.7:1", "opc.tcp://10.0.0.7:2"}));
}

TEST_F(OpcuaScan, IncludeAndExcludeFilterByApplicationName) {
  add_server("Pump", ApplicationType::server, "opc.tcp://10.0.0.7:1");
  add_server("Valve", ApplicationType::server, "opc.tcp://10.0.0.7:2");
  settings_.application_names = NameFilter{NameFilter::Action::include, {"Valve"}};
  EXPECT_EQ(scanned_ids(), std::vector<std::string>{"opc.tcp://10.0.0.7:2"});
  settings_.application_names = NameFilter{NameFilter::Action::exclude, {"Valve"}};
  EXPECT_EQ(scanned_ids(), std::vector<std::string>{"opc.tcp://10.0.0.7:1"});
}

TEST_F(OpcuaScan, TheFirstOpcTcpDiscoveryUrlIsUsed) {
  servers_.push_back(
      application("S", ApplicationType::server,
                  {"https://10.0.0.7:443", "opc.tcp://10.0.0.7:1/a", "opc.tcp://10.0.0.7:2"}));
  network_.set_find_servers(kLds, servers_);
  network_.set_endpoints("opc.tcp://10.0.0.7:1/a", {});
  EXPECT_EQ(scanned_ids(), std::vector<std::string>{"opc.tcp://10.0.0.7:1/a"});
}

TEST_F(OpcuaScan, AServerWithoutAnOpcTcpUrlIsSkippedAndLoggedOnce) {
  servers_.push_back(application("Web", ApplicationType::server, {"https://10.0.0.7:443"}));
  network_.set_find_servers(kLds, servers_);
  EXPECT_TRUE(scanned_ids().empty());
  EXPECT_TRUE(scanned_ids().empty());
  EXPECT_EQ(recorder_.count(LogLevel::warn, "no opc.tcp discovery URL"), 1u);
}

TEST_F(OpcuaScan, UrlsThisNodeCannotUseAreRewrittenToTheLdsHost) {
  add_server("Remote", ApplicationType::server, "opc.tcp://localhost:4841/x");
  add_server("Unknown", ApplicationType::server, "opc.tcp://plc.invalid:4842");
  add_server("Fine", ApplicationType::server, "opc.tcp://10.0.0.7:4843");
  network_.set_endpoints("opc.tcp://10.0.0.5:4841/x", {});
  network_.set_endpoints("opc.tcp://10.0.0.5:4842", {});
  EXPECT_EQ(scanned_ids(),
            (std::vector<std::string>{"opc.tcp://10.0.0.5:4841/x", "opc.tcp://10.0.0.5:4842",
                                      "opc.tcp://10.0.0.7:4843"}));
}

// A DNS server that does not answer says nothing of whether a name resolves:
// a server keeps the URL of its last definite answer, not the LDS's host
// (which may well serve another server on that port). A name never answered
// is rewritten, as on a node with no DNS server to ask.
TEST_F(OpcuaScan, ANameTheResolverCannotLookUpNowKeepsItsLastAnswer) {
  network_.resolvable("plc1.factory");
  add_server("Plc", ApplicationType::server, "opc.tcp://plc1.factory:4841/");
  add_server("Box", ApplicationType::server, "opc.tcp://box.factory:4842");
  network_.set_endpoints("opc.tcp://10.0.0.5:4841/", {});  // something else on the LDS's host
  network_.set_endpoints("opc.tcp://10.0.0.5:4842", {});
  const std::vector<std::string> resolved{"opc.tcp://10.0.0.5:4842",
                                          "opc.tcp://plc1.factory:4841/"};
  EXPECT_EQ(scanned_ids(), resolved);

  network_.resolver_unavailable_for("plc1.factory", true);
  network_.resolver_unavailable_for("box.factory", true);
  EXPECT_EQ(scanned_ids(), resolved);
  network_.resolver_unavailable_for("plc1.factory", false);
  EXPECT_EQ(scanned_ids(), resolved);

  add_server("New", ApplicationType::server, "opc.tcp://new.factory:4843");
  network_.set_endpoints("opc.tcp://10.0.0.5:4843", {});
  network_.resolver_unavailable_for("new.factory", true);
  EXPECT_EQ(scanned_ids(),
            (std::vector<std::string>{"opc.tcp://10.0.0.5:4842", "opc.tcp://10.0.0.5:4843",
                                      "opc.tcp://plc1.factory:4841/"}));
}

TEST_F(OpcuaScan, DevicesCarryTheServersIdentityAndSecurity) {
  servers_.push_back(application("Pump", ApplicationType::server, {"opc.tcp://10.0.0.7:1"}));
  network_.set_find_servers(kLds, servers_);
  network_.set_endpoints(
      "opc.tcp://10.0.0.7:1",
      endpoints_for({{MessageSecurityMode::none, "None"},
                     {MessageSecurityMode::sign, "Basic256Sha256"},
                     {MessageSecurityMode::sign, "Aes128_Sha256_RsaOaep"},
                     {MessageSecurityMode::sign_and_encrypt, "Basic256Sha256"}}));
  auto devices = scan_url(kLds, settings_, services_, log_);
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].id, "opc.tcp://10.0.0.7:1");
  EXPECT_EQ(devices[0].sharing, dowser::Sharing::shared);
  EXPECT_EQ(devices[0].properties,
            (dowser::Properties{
                {"OPCUA_DISCOVERY_URL", "opc.tcp://10.0.0.7:1"},
                {"OPCUA_APPLICATION_NAME", "Pump"},
                {"OPCUA_APPLICATION_URI", "urn:test:Pump"},
                {"OPCUA_SECURITY_POLICIES", "None,Basic256Sha256,Aes128_Sha256_RsaOaep"},
                {"OPCUA_SECURITY_MODES", "None,Sign,SignAndEncrypt"},
            }));
}

TEST_F(OpcuaScan, AServerThatDoesNotAnswerIsLeftOutAndLoggedOncePerChange) {
  add_server("A", ApplicationType::server, "opc.tcp://10.0.0.7:1");
  add_server("B", ApplicationType::server, "opc.tcp://10.0.0.7:2");
  network_.remove_endpoints("opc.tcp://10.0.0.7:2");
  EXPECT_EQ(scanned_ids(), std::vector<std::string>{"opc.tcp://10.0.0.7:1"});
  EXPECT_EQ(scanned_ids(), std::vector<std::string>{"opc.tcp://10.0.0.7:1"});
  EXPECT_EQ(recorder_.count(LogLevel::warn, "opc.tcp://10.0.0.7:2: connect"), 1u);

  network_.set_endpoints("opc.tcp://10.0.0.7:2", {});
  EXPECT_EQ(scanned_ids().size(), 2u);
  EXPECT_EQ(recorder_.count(LogLevel::info, "opc.tcp://10.0.0.7:2: answers again"), 1u);
}

TEST_F(OpcuaScan, AnUnreachableUrlYieldsNothingAndIsLoggedOncePerChange) {
  EXPECT_TRUE(scanned_ids().empty());
  EXPECT_TRUE(scanned_ids().empty());
  EXPECT_EQ(recorder_.count(LogLevel::warn, kLds + ": connect"), 1u);
  add_server("A", ApplicationType::server, "opc.tcp://10.0.0.7:1");
  EXPECT_EQ(scanned_ids().size(), 1u);
  EXPECT_EQ(recorder_.count(LogLevel::info, kLds + ": answers again"), 1u);
}

// A server's name and policy URIs come as raw bytes: Latin-1 or a NUL must
// not make the host leave the server out (rule D2).
TEST(OpcuaDevice, NamesThatAreNotUtf8AreMadeValidNotDropped) {
  ServerCandidate server;
  server.discovery_url = "opc.tcp://10.0.0.7:1";
  server.application.application_name.text = std::string("K\xe4ltemaschine\0 1", 17);
  server.application.application_uri = "urn:k\xe4lte";
  ua::EndpointDescription endpoint;  // a policy URI is the server's bytes too
  endpoint.security_policy_uri = "http://opcfoundation.org/UA/SecurityPolicy#K\xe4lte";
  const dowser::Device device = make_device(server, {endpoint});
  EXPECT_EQ(device.properties.at("OPCUA_APPLICATION_NAME"), "K\xef\xbf\xbdltemaschine 1");
  EXPECT_EQ(device.properties.at("OPCUA_SECURITY_POLICIES"), "K\xef\xbf\xbdlte");
  EXPECT_EQ(device.properties.at("OPCUA_APPLICATION_URI"), "urn:k\xef\xbf\xbdlte");
  EXPECT_EQ(device.properties.at("OPCUA_DISCOVERY_URL"), "opc.tcp://10.0.0.7:1");
}

TEST(OpcuaMerge, DuplicatesAcrossListsAreOneDeviceAndTheFirstWins) {
  auto device = [](const std::string& id, const std::string& name) {
    dowser::Device d;
    d.id = id;
    d.properties["OPCUA_APPLICATION_NAME"] = name;
    return d;
  };
  auto merged = merge_unique({{device("b", "from-1"), device("a", "from-1")},
                              {device("c", "from-2")},
                              {device("a", "from-3"), device("b", "from-3")}});
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[0], device("a", "from-1"));
  EXPECT_EQ(merged[1], device("b", "from-1"));
  EXPECT_EQ(merged[2], device("c", "from-2"));
}

}  // namespace
}  // namespace opcua::test
