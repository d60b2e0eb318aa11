// evaluate_camera over a scripted CameraApi (Akri scenario 44 and what
// dowser adds): the calls are scripted because the test is about the order
// of filters and calls, not about the wire; the wire is tested against the
// camera simulator in tests/integration/onvif.
#include "camera_evaluation.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace onvif {
namespace {

class ScriptedCamera final : public CameraApi {
 public:
  bool reachable = true;
  bool interfaces_fail = false;
  bool information_throws = false;  // not a failed call: what a client out of memory does
  DeviceInformation information{"Acme", "Eye", "1.0", "S1", "hw"};
  NetworkIdentity identity{"mock.ip", "MocK:Mac"};
  std::optional<Credential> credential_seen;

  int dead_calls = 0;

  void get_system_date_and_time(const std::string& url) override {
    dead_calls += url == "http://dead" ? 1 : 0;
    if (!reachable || url == "http://dead") throw CallFailed("connection refused");
  }
  NetworkIdentity get_network_interfaces(const std::string&,
                                         const std::optional<Credential>& credential) override {
    credential_seen = credential;
    if (interfaces_fail) throw CallFailed("NotAuthorized");
    return identity;
  }
  DeviceInformation get_device_information(const std::string&,
                                           const std::optional<Credential>&) override {
    if (information_throws) throw std::runtime_error("no random bytes for a nonce");
    return information;
  }
  std::vector<MediaStream> get_streams(const std::string&,
                                       const std::optional<Credential>&) override {
    return {{"p1", "rtsp://a/1"}, {"p2", "rtsp://a/2"}};
  }
};

const Announcement kCamera{
    "urn:uuid:Device-UUID", {"dn:NetworkVideoTransmitter"}, {"s"}, {"http://dead", "device_uri"}};

TEST(OnvifEvaluation, ReportsOneDeviceKeyedByUuidAtTheFirstAddressThatAnswers) {
  ScriptedCamera api;
  auto result = evaluate_camera(kCamera, {}, {}, api);
  ASSERT_TRUE(result.device);
  EXPECT_TRUE(result.settled);
  EXPECT_EQ(result.device->id, "device-uuid");
  EXPECT_EQ(result.device->properties.at(kServiceUrlProperty), "device_uri");
  EXPECT_EQ(result.device->properties.at(kIpAddressProperty), "mock.ip");
  EXPECT_EQ(result.device->properties.at(kMacAddressProperty), "MocK:Mac");
  EXPECT_EQ(result.device->properties.at(kStreamUrisProperty), "rtsp://a/1 rtsp://a/2");
  EXPECT_EQ(result.device->properties.at(kManufacturerProperty), "Acme");
}

// What a camera says of itself may be in any encoding: the host would leave
// the whole camera out for one value that is not UTF-8 (rule D2).
TEST(OnvifEvaluation, DeviceInformationThatIsNotUtf8IsMadeValidNotDropped) {
  ScriptedCamera api;
  api.information.manufacturer = "Acm\xe9";
  api.information.model = std::string("Eye\0X", 5);
  auto result = evaluate_camera(kCamera, {}, {}, api);
  ASSERT_TRUE(result.device);
  EXPECT_EQ(result.device->properties.at(kManufacturerProperty), "Acm\xef\xbf\xbd");
  EXPECT_EQ(result.device->properties.at(kModelProperty), "EyeX");
}

// Each dead address costs a request timeout: a camera announcing thousands
// must not hold the check (and the session's stop) for hours.
TEST(OnvifEvaluation, OnlyTheFirstEightAddressesAreTried) {
  ScriptedCamera api;
  Announcement camera = kCamera;
  camera.xaddrs.assign(1000, "http://dead");
  camera.xaddrs.push_back("device_uri");
  auto result = evaluate_camera(camera, {}, {}, api);
  EXPECT_FALSE(result.device);
  EXPECT_EQ(api.dead_calls, 8);
}

TEST(OnvifEvaluation, FailedLookupKeepsTwoPropertiesAndAsksForARecheck) {
  ScriptedCamera api;
  api.interfaces_fail = true;
  auto result = evaluate_camera(kCamera, {}, {}, api);
  ASSERT_TRUE(result.device);
  EXPECT_FALSE(result.device->properties.contains(kIpAddressProperty));
  EXPECT_FALSE(result.settled) << "a failed call is checked again on the next pass";

  Settings ip_filter;
  ip_filter.ip_addresses = FilterList{FilterList::Action::include, {"mock.ip"}};
  auto filtered = evaluate_camera(kCamera, ip_filter, {}, api);
  EXPECT_FALSE(filtered.device) << "an IP filter with the lookup failing drops";
  EXPECT_FALSE(filtered.settled);
}

TEST(OnvifEvaluation, IpMatchesExactlyMacIgnoresCase) {
  ScriptedCamera api;
  Settings settings;
  settings.ip_addresses = FilterList{FilterList::Action::include, {"mock.i"}};
  EXPECT_FALSE(evaluate_camera(kCamera, settings, {}, api).device);
  settings.ip_addresses.reset();
  settings.mac_addresses = FilterList{FilterList::Action::include, {"MOCK:MAC"}};
  auto kept = evaluate_camera(kCamera, settings, {}, api);
  EXPECT_TRUE(kept.device);
  EXPECT_TRUE(kept.settled);
}

// Any other exception is this camera's problem too: on a checker thread it
// would end the whole daemon (std::terminate).
TEST(OnvifEvaluation, AnExceptionThatIsNotAFailedCallIsTheCamerasProblem) {
  ScriptedCamera api;
  api.information_throws = true;
  Evaluation evaluation;
  EXPECT_NO_THROW(evaluation = evaluate_camera(kCamera, {}, {}, api));
  EXPECT_FALSE(evaluation.device);
  EXPECT_FALSE(evaluation.settled) << "checked again next pass";
  EXPECT_EQ(evaluation.problem, "checking it failed: no random bytes for a nonce");
}

TEST(OnvifEvaluation, UnreachableCameraIsNotReportedAndRechecked) {
  ScriptedCamera api;
  api.reachable = false;
  auto result = evaluate_camera(kCamera, {}, {}, api);
  EXPECT_FALSE(result.device);
  EXPECT_FALSE(result.settled);
}

TEST(OnvifEvaluation, CredentialsAreLookedUpByNormalisedUuid) {
  ScriptedCamera api;
  auto store = CredentialStore::from_properties(
      {{"username_device_uuid", "admin"}, {"password_device_uuid", "pw"}});
  evaluate_camera(kCamera, {}, store, api);
  EXPECT_EQ(api.credential_seen, (Credential{"admin", "pw"}));
}

}  // namespace
}  // namespace onvif
