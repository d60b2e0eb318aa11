// Discovery details: Akri's format, this handler's additions, and clear
// refusals.
#include "opcua_settings.hpp"

#include <gtest/gtest.h>
#include <dowser/handler.hpp>

namespace opcua {
namespace {

using namespace std::chrono_literals;

std::string refusal(const std::string& details) {
  try {
    parse_settings(details);
  } catch (const dowser::InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(OpcuaSettings, EmptyDetailsTakeAkrisDefaults) {
  for (const char* details :
       {"", "{}", "opcuaDiscoveryMethod: {standard: {}}", "opcuaDiscoveryMethod:\n  standard:\n"}) {
    Settings settings = parse_settings(details);
    EXPECT_EQ(settings.discovery_urls, std::vector<std::string>{"opc.tcp://localhost:4840/"})
        << details;
    EXPECT_FALSE(settings.application_names);
    EXPECT_EQ(settings.discovery_interval, 10s);
    EXPECT_EQ(settings.client.connect_timeout, 3s);
    EXPECT_EQ(settings.client.request_timeout, 5s);
  }
}

TEST(OpcuaSettings, AkrisJsonSerializationParses) {
  Settings settings = parse_settings(
      R"({"opcuaDiscoveryMethod":{"standard":{"discoveryUrls":["opc.tcp://10.0.0.1:4840/","opc.tcp://10.0.0.2:4840/","opc.tcp://10.0.0.1:4840/"]}},)"
      R"("applicationNames":{"action":"Exclude","items":["Client"]}})");
  EXPECT_EQ(settings.discovery_urls,
            (std::vector<std::string>{"opc.tcp://10.0.0.1:4840/", "opc.tcp://10.0.0.2:4840/"}))
      << "duplicates dropped, order kept";
  ASSERT_TRUE(settings.application_names);
  EXPECT_EQ(settings.application_names->action, NameFilter::Action::exclude);
  EXPECT_EQ(settings.application_names->items, std::vector<std::string>{"Client"});
  EXPECT_TRUE(settings.warnings.empty());
}

TEST(OpcuaSettings, FilterActionDefaultsToInclude) {
  Settings settings = parse_settings("applicationNames: {items: [A, B]}");
  ASSERT_TRUE(settings.application_names);
  EXPECT_TRUE(settings.application_names->accepts("A"));
  EXPECT_FALSE(settings.application_names->accepts("C"));
  NameFilter exclude{NameFilter::Action::exclude, {"A"}};
  EXPECT_FALSE(exclude.accepts("A"));
  EXPECT_TRUE(exclude.accepts("a")) << "names match exactly";
}

TEST(OpcuaSettings, IntervalAndTimeoutsAreSeconds) {
  Settings settings = parse_settings(
      "discoveryIntervalSeconds: 0.5\nconnectTimeoutSeconds: 1\nrequestTimeoutSeconds: 2.25");
  EXPECT_EQ(settings.discovery_interval, 500ms);
  EXPECT_EQ(settings.client.connect_timeout, 1s);
  EXPECT_EQ(settings.client.request_timeout, 2250ms);
}

TEST(OpcuaSettings, UnknownKeysAreWarnedAbout) {
  Settings settings = parse_settings("discoveryIntervalSecond: 5");
  ASSERT_EQ(settings.warnings.size(), 1u);
  EXPECT_NE(settings.warnings[0].find("discoveryIntervalSecond"), std::string::npos);
}

TEST(OpcuaSettings, BadDetailsAreRefusedWithTheirField) {
  struct Case {
    const char* details;
    const char* says;
  };
  for (const auto& [details, says] : std::initializer_list<Case>{
           {"{{{", "not valid YAML"},
           {"[1, 2]", "expected a mapping"},
           {"opcuaDiscoveryMethod: {mdns: {}}", "standard"},
           {"opcuaDiscoveryMethod: {standard: {discoveryUrls: []}}", "is empty"},
           {"opcuaDiscoveryMethod: {standard: {discoveryUrls: [http://x:1]}}",
            "discoveryUrls[0] 'http://x:1'"},
           {"opcuaDiscoveryMethod: {standard: {discoveryUrls: [opc.tcp://h:99999]}}", "port"},
           {"opcuaDiscoveryMethod: {standard: {discoveryUrls: opc.tcp://h:1}}", "not a list"},
           {"applicationNames: {action: Ignore, items: []}", "Include or Exclude"},
           {"applicationNames: {action: Include}", "items is missing"},
           {"applicationNames: [a]", "applicationNames is not a mapping"},
           {"discoveryIntervalSeconds: 0",
            "discoveryIntervalSeconds must be a number of seconds from 0.05 to 86400"},
           {"? [a]\n: 1", "keys must be strings"},
           {"discoveryIntervalSeconds: ten", "discoveryIntervalSeconds"},
           {"connectTimeoutSeconds: -1", "connectTimeoutSeconds"},
           {"requestTimeoutSeconds: .nan", "requestTimeoutSeconds"},
       }) {
    std::string message = refusal(details);
    EXPECT_NE(message.find(says), std::string::npos) << details << " -> " << message;
  }
}

}  // namespace
}  // namespace opcua
