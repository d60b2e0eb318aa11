// Discovery details and properties: defaults, permissions in any order, and
// errors that name the field, the rule, its index and the column.
#include "udev_details.hpp"

#include <gtest/gtest.h>

#include <string>

namespace udev_handler {
namespace {

dowser::DiscoverRequest request(const std::string& details, dowser::Properties properties = {}) {
  return {details, std::move(properties)};
}

// The message of the InvalidArgument that parse_request throws, or "".
std::string refusal(const dowser::DiscoverRequest& req) {
  try {
    parse_request(req);
  } catch (const dowser::InvalidArgument& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Rules carried over from Akri, where some fields were regular expressions:
// valid globs, but worth a warning; plain globs and alternatives are not.
TEST(UdevDetails, RegexLookingValuesAreFoundWithTheirRuleAndToken) {
  auto rules =
      parse_rules({R"(SUBSYSTEM=="video4linux", ATTRS{idVendor}=="05a9|046d")",
                   R"(KERNEL!="video[0-9]+", DRIVERS=="uvc.*")",
                   R"x(KERNEL=="video?*", ATTR{name}=="^cam", ENV{ID_PATH}=="pci-(0|1)")x"});
  auto found = regex_lookalikes(rules);
  ASSERT_EQ(found.size(), 4u);
  EXPECT_EQ(found[0].rfind(R"(udevRules[1]: KERNEL!="video[0-9]+": "]+" reads like a regular)", 0),
            0u)
      << found[0];
  EXPECT_EQ(found[1].rfind(R"(udevRules[1]: DRIVERS=="uvc.*": ".*")", 0), 0u) << found[1];
  EXPECT_EQ(found[2].rfind(R"(udevRules[2]: ATTR{name}=="^cam": "^")", 0), 0u) << found[2];
  EXPECT_EQ(found[3].rfind(R"x(udevRules[2]: ENV{ID_PATH}=="pci-(0|1)": "(")x", 0), 0u) << found[3];
  EXPECT_TRUE(regex_lookalikes(parse_rules({R"(KERNEL=="video*|vbi*", ATTR{x}=="1.2")"})).empty());
}

TEST(UdevDetails, DefaultsAsAkri) {
  auto settings = parse_request(request("udevRules: []"));
  EXPECT_TRUE(settings.rules.empty());
  EXPECT_FALSE(settings.report.group_recursive);
  EXPECT_EQ(settings.report.permissions, "rwm");
  EXPECT_FALSE(settings.report.resource_name);
  EXPECT_FALSE(settings.report.vfio_passthrough);
  EXPECT_EQ(settings.rescan_interval, kDefaultRescanInterval);
  // Akri's default serialisation is valid JSON details.
  auto json =
      parse_request(request(R"({"udevRules":[],"groupRecursive":false,"permissions":"rwm"})"));
  EXPECT_EQ(json.report.permissions, "rwm");
}

TEST(UdevDetails, RulesGroupingAndPermissions) {
  auto settings =
      parse_request(request("udevRules:\n  - SUBSYSTEM==\"video4linux\"\n  - 'KERNEL==\"ttyUSB*\", "
                            "ATTRS{idVendor}==\"0403\"'\ngroupRecursive: true\npermissions: wr\n"));
  ASSERT_EQ(settings.rules.size(), 2u);
  EXPECT_EQ(settings.rules[0].text, R"(SUBSYSTEM=="video4linux")");
  EXPECT_EQ(settings.rules[1].filters.size(), 2u);
  EXPECT_TRUE(settings.report.group_recursive);
  EXPECT_EQ(settings.report.permissions, "rw");
}

TEST(UdevDetails, PermissionsInAnyLetterOrder) {
  const std::pair<const char*, const char*> accepted[] = {
      {"r", "r"},   {"w", "w"},   {"m", "m"},     {"rw", "rw"},   {"wr", "rw"},
      {"mr", "rm"}, {"wm", "wm"}, {"rwm", "rwm"}, {"mwr", "rwm"}, {"wmr", "rwm"}};
  for (auto [given, normalized] : accepted) EXPECT_EQ(parse_permissions(given), normalized);
  for (const char* refused : {"", "x", "rwx", "rr", "rwmr", "RW", " rw"}) {
    EXPECT_THROW(parse_permissions(refused), dowser::InvalidArgument) << refused;
  }
  EXPECT_TRUE(contains(refusal(request("udevRules: []\npermissions: xyz")),
                       "permissions 'xyz' is not valid"));
}

TEST(UdevDetails, BadRulesNameIndexTextAndColumn) {
  std::string message = refusal(
      request("udevRules:\n  - 'KERNEL==\"video0\"'\n  - 'KERNEL==\"x\" SUBSYSTEM==\"usb\"'\n"));
  EXPECT_TRUE(contains(message, R"(udevRules[1] 'KERNEL=="x" SUBSYSTEM=="usb"': column 13: )"))
      << message;
  EXPECT_TRUE(contains(refusal(request("udevRules: ['ACTION==\"add\"']")),
                       "udevRules[0] 'ACTION==\"add\"': column 1: 'ACTION' is not supported"));
  EXPECT_TRUE(contains(refusal(request("udevRules: ['  ']")),
                       "udevRules[0] '  ' has no filter: it would match every device"));
}

TEST(UdevDetails, MalformedDetailsAreRefusedWithTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "discovery details are empty"},
      {"{{{", "not valid YAML: line 1"},
      {"[1, 2]", "expected a mapping with 'udevRules'"},
      {"groupRecursive: true", "'udevRules' is missing"},
      {"udevRules: KERNEL==\"x\"", "'udevRules' is not a sequence"},
      {"udevRules: [~]", "udevRules[0] is not a string"},
      {"udevRules: [[a]]", "udevRules[0] is not a string"},
      {"udevRules: []\ngroupRecursive: maybe", "'groupRecursive' must be true or false"},
      {"udevRules: []\npermissions: [r]", "'permissions' must be a string"},
      {"udevRules: []\ngroupRecursve: true", "unknown key 'groupRecursve'"},
  };
  for (auto [details, part] : cases) {
    std::string message = refusal(request(details));
    EXPECT_TRUE(contains(message, part)) << details << " -> " << message;
  }
}

TEST(UdevDetails, DiscoveryProperties) {
  auto settings = parse_request(request("udevRules: []", {{kResourceNameProperty, " akri.sh/cam "},
                                                          {kVfioPassthroughProperty, " TRUE "},
                                                          {kRescanIntervalProperty, "5"}}));
  EXPECT_EQ(settings.report.resource_name, "akri.sh/cam");
  EXPECT_TRUE(settings.report.vfio_passthrough);
  EXPECT_EQ(settings.rescan_interval, std::chrono::seconds(5));
  // Absent values take the defaults; a blank resource name is no resource name.
  auto blank = parse_request(request(
      "udevRules: []", {{kResourceNameProperty, "  "}, {kVfioPassthroughProperty, std::nullopt}}));
  EXPECT_FALSE(blank.report.resource_name);
  EXPECT_FALSE(blank.report.vfio_passthrough);
  // The name becomes part of property keys: what no key may hold is refused
  // here, not by dowserd for every device reported.
  for (const std::string& bad :
       std::vector<std::string>{"akri.sh/cam:1", "cam era", "cam=1", std::string(201, 'c')}) {
    EXPECT_TRUE(contains(refusal(request("udevRules: []", {{kResourceNameProperty, bad}})),
                         "devicePluginResourceName '" + bad + "' is not a resource name"))
        << bad;
  }
  EXPECT_EQ(parse_request(request("udevRules: []", {{kResourceNameProperty,
                                                     "vendor.io/dev_1-" + std::string(184, 'x')}}))
                .report.resource_name->size(),
            200u);
  EXPECT_TRUE(contains(refusal(request("udevRules: []", {{kVfioPassthroughProperty, "yes"}})),
                       "vfioPassthrough must be 'true' or 'false', got 'yes'"));
  for (const char* bad : {"0", "-1", "x", "86401", "1.5"}) {
    EXPECT_TRUE(contains(refusal(request("udevRules: []", {{kRescanIntervalProperty, bad}})),
                         "rescanIntervalSeconds must be a whole number of seconds"))
        << bad;
  }
}

}  // namespace
}  // namespace udev_handler
