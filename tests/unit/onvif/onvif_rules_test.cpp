// The onvif handler's rules without a network: Akri's filter semantics and
// test scenarios 42-46 (akri-behaviour.md section 10), UUID normalisation,
// the three credential formats and the UsernameToken digest vector
// (section 7), and the discovery details.
#include "announcement.hpp"
#include "camera_evaluation.hpp"
#include "credentials.hpp"
#include "onvif_settings.hpp"
#include "username_token.hpp"

#include <gtest/gtest.h>

namespace onvif {
namespace {

bool exact(const std::string& a, const std::string& b) { return a == b; }

FilterList list(FilterList::Action action, std::vector<std::string> items) {
  return {action, std::move(items)};
}

constexpr auto kInclude = FilterList::Action::include;
constexpr auto kExclude = FilterList::Action::exclude;

TEST(OnvifFilter, AkriExecuteFilterScenarios) {
  EXPECT_FALSE(filter_drops(std::nullopt, {"foo"}, exact)) << "no list keeps";
  EXPECT_FALSE(filter_drops(list(kExclude, {}), {"foo"}, exact)) << "Exclude [] keeps";
  EXPECT_TRUE(filter_drops(list(kInclude, {"foo"}), {}, exact)) << "unknown value drops";
  EXPECT_TRUE(filter_drops(list(kExclude, {"foo"}), {}, exact)) << "unknown value drops";
  EXPECT_TRUE(filter_drops(list(kExclude, {"foo", "bar"}), {"foo"}, exact));
  EXPECT_FALSE(filter_drops(list(kExclude, {"foo", "bar"}), {"foobar"}, exact));
  EXPECT_FALSE(filter_drops(list(kInclude, {"foo", "bar"}), {"foo"}, exact));
  EXPECT_TRUE(filter_drops(list(kInclude, {"foo", "bar"}), {"foobar"}, exact));
  EXPECT_TRUE(filter_drops(list(kInclude, {}), {"foo"}, exact)) << "Include [] drops everything";
}

TEST(OnvifFilter, ScopesMatchExactlyAndCaseRulesDifferPerField) {
  Announcement camera{"urn:uuid:X", {}, {"onvif://www.onvif.org/name/NVT", "onvif://a/b"}, {"u"}};
  Settings settings;
  settings.scopes = list(kInclude, {"onvif://www.onvif.org/name/NVT"});
  EXPECT_FALSE(dropped_by_announcement(camera, settings));
  settings.scopes = list(kExclude, {"onvif://www.onvif.org/name/NVT"});
  EXPECT_TRUE(dropped_by_announcement(camera, settings));
  settings.scopes = list(kInclude, {"onvif://www.onvif.org/name/NVT123"});
  EXPECT_TRUE(dropped_by_announcement(camera, settings));
  settings.scopes = list(kInclude, {"onvif://www.onvif.org/name"});
  EXPECT_TRUE(dropped_by_announcement(camera, settings)) << "a prefix is not a match";
  settings.scopes = list(kInclude, {"onvif://www.onvif.org/NAME/NVT"});
  EXPECT_TRUE(dropped_by_announcement(camera, settings)) << "scopes are case-sensitive";
  settings.scopes.reset();
  settings.uuids = list(kInclude, {"X"});
  EXPECT_FALSE(dropped_by_announcement(camera, settings)) << "UUIDs are case-insensitive";
  EXPECT_TRUE(equals_ignoring_case("MocK:Mac", "MOCK:MAC"));
  EXPECT_FALSE(equals_ignoring_case("mock.i", "mock.ip"));
}

TEST(OnvifUuid, AkriNormalisation) {
  EXPECT_EQ(device_uuid("urn:uuid:D"), "d");
  EXPECT_EQ(device_uuid("uuid:urn:e"), "urn:e");
  EXPECT_EQ(device_uuid("urn:x:uuid:F"), "x:uuid:f");
  EXPECT_EQ(device_uuid("urn:uuid:AAAA0000-0000-4000-8000-000000000001"),
            "aaaa0000-0000-4000-8000-000000000001");
}

TEST(OnvifAnnouncement, ListsAndTypes) {
  EXPECT_EQ(split_list("  a\tb \n c "), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(split_list("").empty());
  EXPECT_TRUE(is_video_transmitter({"tds:Device", "dn:NetworkVideoTransmitter"}));
  EXPECT_TRUE(is_video_transmitter(
      {"\"http://www.onvif.org/ver10/network/wsdl\":NetworkVideoTransmitter"}));
  EXPECT_FALSE(is_video_transmitter({"wsdp:Device", "print:PrinterServiceType"}));
}

TEST(OnvifUsernameToken, AkriDigestVector) {
  auto token = make_username_token("user", "1234567", "nonce", "2000-01-01T12:34:56:789Z");
  EXPECT_EQ(token.nonce, "bm9uY2U=");
  EXPECT_EQ(token.password_digest, "AGsoQQ+qNJu6Ha7h/QAPoQvYcV0=");
  EXPECT_EQ(token.created, "2000-01-01T12:34:56:789Z");
}

TEST(OnvifUsernameToken, Base64AndTimestamps) {
  EXPECT_EQ(base64_decode("bm9uY2U="), "nonce");
  EXPECT_EQ(base64_decode("YWI="), "ab");
  EXPECT_EQ(base64_decode("YWJj"), "abc");
  EXPECT_FALSE(base64_decode("not base64!"));
  EXPECT_EQ(created_timestamp(
                std::chrono::system_clock::time_point(std::chrono::milliseconds(946730096789))),
            "2000-01-01T12:34:56.789Z");
  auto a = fresh_username_token("u", "p", std::chrono::system_clock::now());
  auto b = fresh_username_token("u", "p", std::chrono::system_clock::now());
  EXPECT_NE(a.nonce, b.nonce);
  EXPECT_EQ(base64_decode(a.nonce)->size(), 16u);
}

TEST(OnvifCredentials, PrecedenceListThenRefsThenUsernameEntriesAndDefault) {
  dowser::Properties properties = {
      {"device_credential_list", R"(["list_a"])"},
      {"list_a", R"({"cam-1": {"username": "from-list", "password": "cDE=", "base64encoded": true},
                     "cam-2": {"username": "only-list", "password": "plain"}})"},
      {"device_credential_ref_list", R"(["refs"])"},
      {"refs", R"({"cam-1": {"username_ref": "user_ref", "password_ref": "pass_ref"},
                   "cam-3": {"username_ref": "missing"}})"},
      {"user_ref", "from-refs"},
      {"pass_ref", "ref-password"},
      {"username_cam_4", "entry-user"},
      {"password_cam_4", "entry-password"},
      {"username_cam_5", "no-password"},
      {"username_default", "fallback"},
      {"password_default", "fallback-password"}};
  auto store = CredentialStore::from_properties(properties);
  EXPECT_EQ(store.lookup("cam-1"), (Credential{"from-refs", "ref-password"}));
  EXPECT_EQ(store.lookup("cam-2"), (Credential{"only-list", "plain"}));
  EXPECT_EQ(store.lookup("cam-4"), (Credential{"entry-user", "entry-password"}));
  EXPECT_EQ(store.lookup("cam-5"), (Credential{"no-password", std::nullopt}));
  EXPECT_EQ(store.lookup("cam-3"), (Credential{"fallback", "fallback-password"}))
      << "a ref to a missing username is skipped";
  EXPECT_EQ(store.lookup("unknown"), (Credential{"fallback", "fallback-password"}));

  properties["username_cam_1"] = "entry-wins";
  EXPECT_EQ(CredentialStore::from_properties(properties).lookup("cam-1")->username, "entry-wins");
  EXPECT_EQ(CredentialStore::from_properties({{"list", "{}"}}).lookup("x"), std::nullopt);
  auto decoded = CredentialStore::from_properties(
      {{"device_credential_list", R"(["l"])"},
       {"l", R"({"c": {"username": "u", "password": "cDE=", "base64encoded": true}})"}});
  EXPECT_EQ(decoded.lookup("c")->password, "p1");
}

TEST(OnvifCredentials, MalformedJsonNamesThePropertyNotItsValue) {
  try {
    CredentialStore::from_properties(
        {{"device_credential_list", R"(["secret_list"])"}, {"secret_list", "{hunter2"}});
    FAIL() << "malformed JSON accepted";
  } catch (const dowser::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("secret_list"), std::string::npos);
    EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos);
  }
}

TEST(OnvifSettings, DefaultsFiltersAndProbeProperties) {
  auto defaults = parse_settings({"", {}});
  EXPECT_EQ(defaults.discovery_timeout, std::chrono::milliseconds(1000));
  EXPECT_EQ(defaults.discovery_interval, std::chrono::milliseconds(10000));
  EXPECT_FALSE(defaults.multicast_interfaces) << "all interfaces by default";
  EXPECT_TRUE(defaults.unicast_targets.empty());

  auto settings =
      parse_settings({"uuids: {items: [A]}\nipAddresses: {action: Exclude, items: [10.0.0.1]}\n"
                      "discoveryTimeoutSeconds: 2\nsurprise: 1\n",
                      {{"ONVIF_MULTICAST_INTERFACES", "eth0, eth1"},
                       {"ONVIF_UNICAST_PROBE_TARGETS", "10.0.0.5 cam.local:3703"}}});
  ASSERT_TRUE(settings.uuids);
  EXPECT_EQ(settings.uuids->action, kInclude) << "Include is the default action";
  EXPECT_EQ(settings.ip_addresses->action, kExclude);
  EXPECT_EQ(settings.discovery_timeout, std::chrono::milliseconds(2000));
  EXPECT_EQ(*settings.multicast_interfaces, (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_EQ(settings.unicast_targets,
            (std::vector<ProbeTarget>{{"10.0.0.5", 3702}, {"cam.local", 3703}}));
  EXPECT_EQ(settings.warnings.size(), 1u);
  EXPECT_TRUE(
      parse_settings({"", {{"ONVIF_MULTICAST_INTERFACES", "none"}}}).multicast_interfaces->empty());
}

TEST(OnvifSettings, BadInputIsRefusedWithTheFieldNamed) {
  auto refusal = [](const dowser::DiscoverRequest& request) {
    try {
      parse_settings(request);
    } catch (const dowser::InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal({"scopes: {action: Maybe, items: []}", {}}).find("scopes.action"),
            std::string::npos);
  EXPECT_NE(refusal({"uuids: {action: Include}", {}}).find("uuids.items"), std::string::npos);
  EXPECT_NE(refusal({"discoveryTimeoutSeconds: 0", {}}).find("discoveryTimeoutSeconds"),
            std::string::npos);
  EXPECT_NE(refusal({"{{{", {}}).find("not valid YAML"), std::string::npos);
  EXPECT_NE(refusal({"", {{"ONVIF_UNICAST_PROBE_TARGETS", "host:99999"}}}).find("port"),
            std::string::npos);
}

}  // namespace
}  // namespace onvif
