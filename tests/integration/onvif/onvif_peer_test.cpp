// The onvif handler module, loaded as dowserd loads it (FakeHost), against
// the gSOAP camera simulator over real sockets on 127.0.0.1: cameras found
// by unicast Probe (the simulator's WS-Discovery port is ephemeral), every
// filter, credentials right and wrong, and cameras that go away.
#include "camera_sim_process.hpp"
#include "eventually.hpp"
#include "snapshot_queries.hpp"

#include <gtest/gtest.h>
#include <dowser/testkit.hpp>

#include <algorithm>
#include <set>

namespace onvif::peers {
namespace {

using dowser::testkit::FakeHost;

constexpr auto kWait = 20s;
const std::string kFrontUuid = "aaaa0000-0000-4000-8000-000000000001";
const std::string kBackUuid = "bbbb0000-0000-4000-8000-000000000002";

// Two cameras: "front" open, "back" with user admin/secret.
const std::string kTwoCameras = R"({"cameras": [
  {"name": "front", "uuid": "AAAA0000-0000-4000-8000-000000000001", "ip": "192.168.1.10",
   "mac": "00:11:22:33:44:55", "manufacturer": "Acme", "model": "Eye 1", "serial": "F-1",
   "scopes": ["onvif://www.onvif.org/location/front", "onvif://www.onvif.org/name/front"],
   "profiles": [{"token": "main", "uri": "rtsp://192.168.1.10/main"},
                {"token": "sub", "uri": "rtsp://192.168.1.10/sub"}]},
  {"name": "back", "uuid": "bbbb0000-0000-4000-8000-000000000002", "ip": "192.168.1.11",
   "mac": "00:11:22:33:44:66", "username": "admin", "password": "secret",
   "scopes": ["onvif://www.onvif.org/location/back"]}]})";

class OnvifPeers : public ::testing::Test {
 protected:
  // A request probing the simulator by unicast only, passes every 0.3 s.
  dowser::DiscoverRequest request(const std::string& filters = "",
                                  dowser::Properties properties = {}) {
    properties["ONVIF_MULTICAST_INTERFACES"] = "none";
    properties["ONVIF_UNICAST_PROBE_TARGETS"] = sim_.probe_target();
    return {"discoveryTimeoutSeconds: 0.3\ndiscoveryIntervalSeconds: 0.5\n" + filters, properties};
  }

  std::string logs() const {
    std::string text;
    for (const auto& line : host_.logs()) text += line.text + "\n";
    return text + "--- simulator:\n" + sim_.transcript();
  }

  CameraSimulator sim_{kTwoCameras};
  FakeHost host_{ONVIF_MODULE_PATH};
};

TEST_F(OnvifPeers, UnicastProbeFindsBothCamerasWithTheirProperties) {
  auto session =
      host_.start(request("", {{"username_default", "admin"}, {"password_default", "secret"}}));
  ASSERT_TRUE(host_.wait_for_snapshot(session, has_ids({kFrontUuid, kBackUuid}), kWait)) << logs();
  auto snapshot = *host_.latest_snapshot(session);
  const auto& front = *find(snapshot, kFrontUuid);
  EXPECT_EQ(property(front, "ONVIF_DEVICE_UUID"), kFrontUuid);
  EXPECT_EQ(property(front, "ONVIF_DEVICE_SERVICE_URL"),
            "http://127.0.0.1:" + std::to_string(sim_.http_port) + "/onvif/front/device_service");
  EXPECT_EQ(property(front, "ONVIF_DEVICE_IP_ADDRESS"), "192.168.1.10");
  EXPECT_EQ(property(front, "ONVIF_DEVICE_MAC_ADDRESS"), "00:11:22:33:44:55");
  EXPECT_EQ(property(front, "ONVIF_DEVICE_MANUFACTURER"), "Acme");
  EXPECT_EQ(property(front, "ONVIF_DEVICE_MODEL"), "Eye 1");
  EXPECT_EQ(property(front, "ONVIF_DEVICE_SERIAL_NUMBER"), "F-1");
  EXPECT_EQ(property(front, "ONVIF_DEVICE_STREAM_URI"), "rtsp://192.168.1.10/main");
  EXPECT_EQ(property(front, "ONVIF_DEVICE_STREAM_URIS"),
            "rtsp://192.168.1.10/main rtsp://192.168.1.10/sub");
  EXPECT_EQ(property(front, "ONVIF_DEVICE_PROFILE_TOKENS"), "main sub");
  EXPECT_EQ(front.sharing, dowser::Sharing::shared);
  const auto& back = *find(snapshot, kBackUuid);
  EXPECT_EQ(property(back, "ONVIF_DEVICE_IP_ADDRESS"), "192.168.1.11");
  EXPECT_EQ(sim_.count_lines("AUTH-FAILED"), 0u) << logs();
  host_.stop(session);
  EXPECT_TRUE(host_.violations().empty());
}

TEST_F(OnvifPeers, EveryFilterKeepsOrDropsAsAkriDoes) {
  auto creds = dowser::Properties{{"username_default", "admin"}, {"password_default", "secret"}};
  struct Case {
    std::string filters;
    std::set<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"uuids: {action: Include, items: [AAAA0000-0000-4000-8000-000000000001]}", {kFrontUuid}},
      {"uuids: {action: Exclude, items: [" + kFrontUuid + "]}", {kBackUuid}},
      {"scopes: {action: Include, items: [onvif://www.onvif.org/location/back]}", {kBackUuid}},
      {"scopes: {action: Exclude, items: [onvif://www.onvif.org/location/back]}", {kFrontUuid}},
      {"ipAddresses: {action: Include, items: [192.168.1.11]}", {kBackUuid}},
      {"ipAddresses: {action: Exclude, items: [192.168.1.11]}", {kFrontUuid}},
      {"macAddresses: {action: Include, items: ['00:11:22:33:44:55']}", {kFrontUuid}},
      {"macAddresses: {action: Exclude, items: ['00:11:22:33:44:55']}", {kBackUuid}},
      {"macAddresses: {action: Include, items: []}", {}},
  };
  for (const auto& test : cases) {
    auto session = host_.start(request(test.filters, creds));
    // Both cameras answer before the first report: the first one is final.
    ASSERT_TRUE(host_.wait_for_snapshot(
        session, [](const auto&) { return true; }, kWait))
        << logs();
    EXPECT_EQ(ids(*host_.latest_snapshot(session)), test.expected) << test.filters << "\n"
                                                                   << logs();
    host_.stop(session);
  }
}

TEST_F(OnvifPeers, WrongCredentialsLeaveOutWhatNeedsThemAndNeverReachTheLog) {
  auto session = host_.start(
      request("", {{"username_" + std::string("bbbb0000_0000_4000_8000_000000000002"), "admin"},
                   {"password_bbbb0000_0000_4000_8000_000000000002", "hunter2"}}));
  ASSERT_TRUE(host_.wait_for_snapshot(session, has_ids({kFrontUuid, kBackUuid}), kWait)) << logs();
  auto back = *find(*host_.latest_snapshot(session), kBackUuid);
  EXPECT_EQ(property(back, "ONVIF_DEVICE_IP_ADDRESS"), "<absent>")
      << "GetNetworkInterfaces refused";
  EXPECT_EQ(property(back, "ONVIF_DEVICE_MANUFACTURER"), "<absent>");
  EXPECT_NE(property(back, "ONVIF_DEVICE_SERVICE_URL"), "<absent>");
  EXPECT_GE(sim_.count_lines("AUTH-FAILED back"), 1u) << "the simulator checked the digest";
  host_.stop(session);
  EXPECT_EQ(logs().find("hunter2"), std::string::npos);
  EXPECT_NE(logs().find("NotAuthorized"), std::string::npos) << logs();
}

TEST_F(OnvifPeers, ACameraDroppedBecauseACallFailedIsCheckedAgain) {
  ASSERT_TRUE(sim_.run("services-down front"));
  auto session = host_.start(request("ipAddresses: {action: Include, items: [192.168.1.10]}"));
  ASSERT_TRUE(host_.wait_for_snapshot(session, has_ids({}), kWait)) << logs();
  ASSERT_TRUE(sim_.run("services-up front"));
  EXPECT_TRUE(host_.wait_for_snapshot(session, has_ids({kFrontUuid}), kWait)) << logs();
  host_.stop(session);
}

TEST_F(OnvifPeers, ACameraThatFallsSilentGoesAndComesBack) {
  auto creds = dowser::Properties{{"username_default", "admin"}, {"password_default", "secret"}};
  auto session = host_.start(request("", creds));
  ASSERT_TRUE(host_.wait_for_snapshot(session, has_ids({kFrontUuid, kBackUuid}), kWait)) << logs();
  ASSERT_TRUE(sim_.run("silence back"));
  ASSERT_TRUE(host_.wait_for_snapshot(session, has_ids({kFrontUuid}), kWait)) << logs();
  ASSERT_TRUE(sim_.run("hello back"));
  ASSERT_TRUE(host_.wait_for_snapshot(session, has_ids({kFrontUuid, kBackUuid}), kWait)) << logs();
  // Reports only on change: one snapshot per state.
  EXPECT_EQ(host_.snapshots(session).size(), 3u);
  host_.stop(session);
}

// A camera's problem is forgotten with the camera (UUIDs come from the
// network: spoofed Hellos, cameras replaced, none kept for good), so one
// that comes back with the same problem is told again.
TEST_F(OnvifPeers, AProblemGoesWithItsCameraAndIsToldAgainWhenItIsBack) {
  ASSERT_TRUE(sim_.run("services-down front"));
  auto session = host_.start(request("ipAddresses: {action: Include, items: [192.168.1.10]}"));
  const std::string problem = "camera " + kFrontUuid +
                              ": GetNetworkInterfaces failed: GetNetworkInterfaces: service "
                              "unavailable";
  auto times_told = [&] {
    const auto lines = host_.logs();
    return std::count_if(lines.begin(), lines.end(),
                         [&](const auto& line) { return line.text == problem; });
  };
  ASSERT_TRUE(dowser::test::eventually([&] { return times_told() == 1; }, kWait)) << logs();
  ASSERT_TRUE(sim_.run("silence front"));
  // Two more Probes: at least one whole pass ran without the camera.
  const size_t probed = sim_.count_lines("PROBED ");
  ASSERT_TRUE(sim_.wait_for_line("PROBED " + std::to_string(probed + 2), kWait)) << logs();
  EXPECT_EQ(times_told(), 1) << "a camera gone is no new problem";
  ASSERT_TRUE(sim_.run("hello front"));
  EXPECT_TRUE(dowser::test::eventually([&] { return times_told() == 2; }, kWait)) << logs();
  host_.stop(session);
}

// A camera that never answers costs a stop the call in progress, not every
// call its evaluation has left (each waiting out requestTimeoutSeconds).
TEST_F(OnvifPeers, AStopWaitsForTheCallInProgressOnly) {
  ASSERT_TRUE(sim_.run("services-hang front"));
  auto session = host_.start(
      {"discoveryTimeoutSeconds: 0.3\ndiscoveryIntervalSeconds: 0.5\nrequestTimeoutSeconds: 10\n",
       {{"ONVIF_MULTICAST_INTERFACES", "none"},
        {"ONVIF_UNICAST_PROBE_TARGETS", sim_.probe_target()}}});
  ASSERT_TRUE(sim_.wait_for_line("HUNG front", kWait)) << logs();
  host_.stop(session);
  // GetNetworkInterfaces, GetDeviceInformation and GetProfiles would each
  // have waited 10 s; only the first was asked.
  EXPECT_EQ(sim_.count_lines("HUNG front"), 1u) << logs();
}

// An NVR's profiles can take more than a device may hold (rule D5): the
// camera is kept, its lists cut after the last whole profile that fits in
// one value's size (64 KiB) for both, the same profiles in both.
TEST(OnvifPeerLimits, ACameraWithMoreProfilesThanAValueHoldsIsKept) {
  std::string profiles;
  for (int i = 0; i < 800; ++i) {
    profiles += std::string(profiles.empty() ? "" : ",") + R"({"token": "p)" + std::to_string(i) +
                R"(", "uri": "rtsp://192.168.1.10/)" + std::string(90, 'x') + std::to_string(i) +
                R"("})";
  }
  CameraSimulator sim(R"({"cameras": [{"name": "nvr", "uuid": ")" + kFrontUuid +
                      R"(", "ip": "192.168.1.10", "profiles": [)" + profiles + "]}]}");
  FakeHost host(ONVIF_MODULE_PATH);
  auto session = host.start({"discoveryTimeoutSeconds: 0.3\ndiscoveryIntervalSeconds: 0.5\n",
                             {{"ONVIF_MULTICAST_INTERFACES", "none"},
                              {"ONVIF_UNICAST_PROBE_TARGETS", sim.probe_target()}}});
  ASSERT_TRUE(host.wait_for_snapshot(session, has_ids({kFrontUuid}), kWait)) << sim.transcript();
  const auto nvr = *find(*host.latest_snapshot(session), kFrontUuid);
  const std::string uris = property(nvr, "ONVIF_DEVICE_STREAM_URIS");
  const std::string tokens = property(nvr, "ONVIF_DEVICE_PROFILE_TOKENS");
  EXPECT_LE(uris.size() + tokens.size(), 65536u) << "both in one value's size";
  const auto count = std::count(uris.begin(), uris.end(), ' ') + 1;
  EXPECT_GT(count, 400);
  EXPECT_LT(count, 800);
  EXPECT_EQ(std::count(tokens.begin(), tokens.end(), ' ') + 1, count);
  EXPECT_EQ(uris.substr(uris.rfind(' ') + 1),
            "rtsp://192.168.1.10/" + std::string(90, 'x') + std::to_string(count - 1))
      << "a whole URI last";
  EXPECT_TRUE(host.violations().empty());
  host.stop(session);
}

}  // namespace
}  // namespace onvif::peers
