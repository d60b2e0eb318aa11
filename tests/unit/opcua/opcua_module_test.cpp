// The built handler module, loaded as dowserd loads it (FakeHost), against
// in-process UA-TCP peers on 127.0.0.1.
#include "ua_test_peer.hpp"

#include <gtest/gtest.h>
#include <dowser/testkit.hpp>

namespace opcua::test {
namespace {

using namespace std::chrono_literals;
using dowser::testkit::FakeHost;

std::string details_for(const std::vector<std::string>& urls, const std::string& extra = "") {
  std::string list;
  for (const auto& url : urls) list += (list.empty() ? "" : ", ") + url;
  return "opcuaDiscoveryMethod: {standard: {discoveryUrls: [" + list +
         "]}}\ndiscoveryIntervalSeconds: 0.1\n" + extra;
}

TEST(OpcuaModule, IsASharedDeviceHandlerNamedOpcua) {
  FakeHost host(OPCUA_MODULE_PATH);
  EXPECT_EQ(host.handler().name(), "opcua");
  EXPECT_TRUE(host.handler().shares_devices());
  EXPECT_TRUE(host.handler().has_validate());
}

TEST(OpcuaModule, RefusesBadDetailsInValidateAndStart) {
  FakeHost host(OPCUA_MODULE_PATH);
  dowser::DiscoverRequest bad{details_for({"http://not-opc-tcp:80"}), {}};
  EXPECT_THROW(host.validate(bad), dowser::host::HandlerCallError);
  EXPECT_THROW(host.start(bad), dowser::host::HandlerCallError);
}

TEST(OpcuaModule, ReportsTheServerAnLdsNamesWithItsProperties) {
  FakeServerConfig server_config;
  server_config.endpoints =
      endpoints_for({{ua::MessageSecurityMode::none, "None"},
                     {ua::MessageSecurityMode::sign_and_encrypt, "Basic256Sha256"}});
  FakeUaServer press(server_config);
  FakeServerConfig lds_config;
  lds_config.servers = {application("LDS", ua::ApplicationType::discovery_server, {}),
                        application("Press", ua::ApplicationType::server, {press.url()})};
  FakeUaServer lds(lds_config);

  FakeHost host(OPCUA_MODULE_PATH);
  auto session = host.start({details_for({lds.url()}), {}});
  ASSERT_TRUE(host.wait_for_snapshot(
      session, [](const auto& snapshot) { return snapshot.size() == 1; }, 10s));
  auto device = host.latest_snapshot(session)->at(0);
  EXPECT_EQ(device.id, press.url());
  EXPECT_EQ(device.properties.at("OPCUA_DISCOVERY_URL"), press.url());
  EXPECT_EQ(device.properties.at("OPCUA_APPLICATION_NAME"), "Press");
  EXPECT_EQ(device.properties.at("OPCUA_APPLICATION_URI"), "urn:test:Press");
  EXPECT_EQ(device.properties.at("OPCUA_SECURITY_POLICIES"), "None,Basic256Sha256");
  EXPECT_EQ(device.properties.at("OPCUA_SECURITY_MODES"), "None,SignAndEncrypt");
  host.stop(session);
  EXPECT_TRUE(host.violations().empty());
}

TEST(OpcuaModule, APeerTalkingNonsenseIsLoggedOnceAndDelaysNothing) {
  TcpTestPeer nonsense([](PeerConnection& c) {
    std::string reply = "220 smtp.example ESMTP ready\r\n";
    c.write(ua::ByteView(reinterpret_cast<const uint8_t*>(reply.data()), reply.size()));
  });
  FakeServerConfig server_config;
  FakeUaServer press(server_config);
  FakeServerConfig lds_config;
  lds_config.servers = {application("Press", ua::ApplicationType::server, {press.url()})};
  FakeUaServer lds(lds_config);

  FakeHost host(OPCUA_MODULE_PATH);
  auto session = host.start({details_for({nonsense.url(), lds.url()}), {}});
  ASSERT_TRUE(host.wait_for_snapshot(
      session, [](const auto& snapshot) { return snapshot.size() == 1; }, 10s));
  ASSERT_TRUE(nonsense.wait_accepted(4, 10s)) << "scanned again and again";
  host.stop(session);
  size_t lines = 0;
  for (const auto& line : host.logs())
    if (line.text.find(nonsense.url()) != std::string::npos) ++lines;
  EXPECT_EQ(lines, 1u) << "one line for one state, however many scans";
  auto snapshots = host.snapshots(session);
  for (size_t i = 1; i < snapshots.size(); ++i)
    EXPECT_NE(snapshots[i], snapshots[i - 1]) << "a snapshot is reported only when it changes";
}

TEST(OpcuaModule, StopInterruptsARequestThatWouldWaitForAnHour) {
  TcpTestPeer silent([](PeerConnection& c) { c.wait_for_client_close(); });
  FakeHost host(OPCUA_MODULE_PATH);
  auto session = host.start({details_for({silent.url()}, "requestTimeoutSeconds: 600\n"), {}});
  ASSERT_TRUE(silent.wait_accepted(1, 10s));
  host.stop(session);  // returns only once the session's threads are joined
  EXPECT_TRUE(silent.wait_closed(1, 10s)) << "the connection was closed by the stop";
  EXPECT_TRUE(host.violations().empty());
}

}  // namespace
}  // namespace opcua::test
