// Parsing of udev discovery requests: Akri's UdevDiscoveryDetails (YAML)
// plus the discovery properties. Kept apart from the module so that unit
// tests link it directly.
#ifndef DOWSER_HANDLERS_UDEV_DETAILS_HPP
#define DOWSER_HANDLERS_UDEV_DETAILS_HPP

#include <dowser/handler.hpp>

#include "udev_rule.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace udev_handler {

inline constexpr const char* kResourceNameProperty = "devicePluginResourceName";
inline constexpr const char* kVfioPassthroughProperty = "vfioPassthrough";
inline constexpr const char* kRescanIntervalProperty = "rescanIntervalSeconds";

inline constexpr std::chrono::seconds kDefaultRescanInterval{60};
inline constexpr std::chrono::seconds kMaxRescanInterval{24 * 60 * 60};

// One entry of udevRules, parsed.
struct Rule {
  std::string text;
  std::vector<Filter> filters;  // never empty
};

// What the reported devices look like, beyond which devices match.
struct ReportSettings {
  bool group_recursive = false;
  std::string permissions = "rwm";           // some of r, w, m, in that order
  std::optional<std::string> resource_name;  // devicePluginResourceName, trimmed
  bool vfio_passthrough = false;
};

// Everything one discovery session needs, validated.
struct Settings {
  std::vector<Rule> rules;  // OR-ed
  ReportSettings report;
  std::chrono::seconds rescan_interval = kDefaultRescanInterval;
};

// Each parser throws dowser::InvalidArgument with a message naming the
// field, and for a rule its index, text and column.
std::vector<Rule> parse_rules(const std::vector<std::string>& rules);
// Some of r, w and m, each at most once, in any order; returned as r, w, m.
std::string parse_permissions(const std::string& permissions);
// devicePluginResourceName, trimmed; none when blank. Longer names would
// make property keys past DOWSER_MAX_PROPERTY_KEY_LEN.
inline constexpr size_t kMaxResourceNameLength = 200;
std::optional<std::string> parse_resource_name(const std::string& value);
bool parse_vfio_passthrough(const std::string& value);
std::chrono::seconds parse_rescan_interval(const std::string& value);

// Details plus properties, with defaults for what is absent.
Settings parse_request(const dowser::DiscoverRequest& request);

// One line per filter whose value reads like a regular expression (".*",
// "[0-9]+", "\\d", anchors, groups): Akri matched some fields by regular
// expression, dowser matches globs everywhere, so a rule carried over from
// Akri may match something else. Warnings, not errors: each is a valid glob.
std::vector<std::string> regex_lookalikes(const std::vector<Rule>& rules);

}  // namespace udev_handler

#endif  // DOWSER_HANDLERS_UDEV_DETAILS_HPP
