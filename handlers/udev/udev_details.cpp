#include "udev_details.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>

namespace udev_handler {
namespace {

constexpr std::array<std::string_view, 3> kDetailKeys = {"udevRules", "groupRecursive",
                                                         "permissions"};

[[noreturn]] void refuse(const std::string& message) { throw dowser::InvalidArgument(message); }

using dowser::lowercase;
using dowser::trimmed;

YAML::Node load_details(const std::string& details) {
  YAML::Node root;
  try {
    root = YAML::Load(details);
  } catch (const YAML::Exception& e) {
    // yaml-cpp counts lines and columns from 0; people count from 1.
    refuse("discovery details are not valid YAML: line " + std::to_string(e.mark.line + 1) +
           ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  if (!root.IsDefined() || root.IsNull()) refuse("discovery details are empty");
  if (!root.IsMap()) refuse("discovery details: expected a mapping with 'udevRules'");
  for (const auto& entry : root) {
    std::string key = entry.first.Scalar();
    if (std::find(kDetailKeys.begin(), kDetailKeys.end(), key) == kDetailKeys.end())
      refuse("discovery details: unknown key '" + key +
             "' (expected udevRules, groupRecursive, permissions)");
  }
  return root;
}

std::vector<std::string> rule_texts(const YAML::Node& root) {
  YAML::Node rules = root["udevRules"];
  if (!rules.IsDefined()) refuse("discovery details: 'udevRules' is missing");
  if (!rules.IsSequence()) refuse("discovery details: 'udevRules' is not a sequence of strings");
  std::vector<std::string> texts;
  for (size_t i = 0; i < rules.size(); ++i) {
    // A plain `~` or empty item is null, not a string; quoted ones are strings.
    if (!rules[i].IsScalar())
      refuse("discovery details: udevRules[" + std::to_string(i) + "] is not a string");
    texts.push_back(rules[i].Scalar());
  }
  return texts;
}

bool group_recursive(const YAML::Node& root) {
  YAML::Node node = root["groupRecursive"];
  if (!node.IsDefined() || node.IsNull()) return false;
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value))
    refuse("discovery details: 'groupRecursive' must be true or false");
  return value;
}

std::string permissions(const YAML::Node& root) {
  YAML::Node node = root["permissions"];
  if (!node.IsDefined() || node.IsNull()) return "rwm";
  if (!node.IsScalar()) refuse("discovery details: 'permissions' must be a string such as rwm");
  return parse_permissions(node.Scalar());
}

Rule parse_one_rule(const std::string& text, size_t index) {
  std::string where = "discovery details: udevRules[" + std::to_string(index) + "] '" + text + "'";
  try {
    Rule rule{text, parse_rule(text)};
    if (rule.filters.empty()) refuse(where + " has no filter: it would match every device");
    return rule;
  } catch (const RuleError& e) {
    refuse(where + ": " + e.what());
  }
}

}  // namespace

std::vector<Rule> parse_rules(const std::vector<std::string>& rules) {
  std::vector<Rule> parsed;
  parsed.reserve(rules.size());
  for (size_t i = 0; i < rules.size(); ++i) parsed.push_back(parse_one_rule(rules[i], i));
  return parsed;
}

std::string parse_permissions(const std::string& permissions) {
  std::string normalized;
  for (char letter : {'r', 'w', 'm'}) {
    if (std::count(permissions.begin(), permissions.end(), letter) == 1) normalized += letter;
  }
  if (permissions.empty() || normalized.size() != permissions.size())
    refuse("discovery details: permissions '" + permissions +
           "' is not valid: use r, w and m, each at most once, in any order (r, w, m, rw, rm, "
           "wm, rwm)");
  return normalized;
}

bool parse_vfio_passthrough(const std::string& value) {
  std::string text = lowercase(trimmed(value));
  if (text == "true") return true;
  if (text == "false") return false;
  refuse(std::string(kVfioPassthroughProperty) + " must be 'true' or 'false', got '" + value + "'");
}

std::optional<std::string> parse_resource_name(const std::string& value) {
  std::string name = trimmed(value);
  if (name.empty()) return std::nullopt;
  // It becomes part of property keys, USB_RESOURCE_<NAME>_<i> (rule D2):
  // refused now rather than every device refused at discovery.
  auto allowed = [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_' || c == '/';
  };
  if (!std::all_of(name.begin(), name.end(), allowed) || name.size() > kMaxResourceNameLength)
    refuse(std::string(kResourceNameProperty) + " '" + value + "' is not a resource name: use " +
           "letters, digits, '-', '.', '_' and '/', at most " +
           std::to_string(kMaxResourceNameLength) + " characters");
  return name;
}

std::chrono::seconds parse_rescan_interval(const std::string& value) {
  std::string text = trimmed(value);
  long long seconds = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  bool whole = error == std::errc() && end == text.data() + text.size() && !text.empty();
  if (!whole || seconds < 1 || seconds > kMaxRescanInterval.count())
    refuse(std::string(kRescanIntervalProperty) + " must be a whole number of seconds from 1 to " +
           std::to_string(kMaxRescanInterval.count()) + ", got '" + value + "'");
  return std::chrono::seconds(seconds);
}

namespace {

// What in a glob value is typical of a regular expression, if anything.
std::optional<std::string> regex_token(std::string_view value) {
  for (const char* token : {".*", ".+", "\\d", "\\w", "\\s", "]+", ")+", "(", ")"})
    if (value.find(token) != std::string_view::npos) return std::string(token);
  if (!value.empty() && value.front() == '^') return "^";
  if (!value.empty() && value.back() == '$') return "$";
  return std::nullopt;
}

}  // namespace

std::vector<std::string> regex_lookalikes(const std::vector<Rule>& rules) {
  std::vector<std::string> found;
  for (size_t i = 0; i < rules.size(); ++i) {
    for (const auto& filter : rules[i].filters) {
      auto token = regex_token(filter.value);
      if (!token) continue;
      found.push_back("udevRules[" + std::to_string(i) + "]: " + to_text(filter) + ": \"" + *token +
                      "\" reads like a regular expression, but every value is a udev glob here "
                      "(\"*\" is any text, \"?\" one character, \"|\" separates "
                      "alternatives); Akri matched some fields by regular expression, so this "
                      "rule may match other devices than it did there");
    }
  }
  return found;
}

Settings parse_request(const dowser::DiscoverRequest& request) {
  YAML::Node root = load_details(request.discovery_details);
  Settings settings;
  settings.rules = parse_rules(rule_texts(root));
  settings.report.group_recursive = group_recursive(root);
  settings.report.permissions = permissions(root);
  settings.report.resource_name =
      parse_resource_name(request.property_or(kResourceNameProperty, ""));
  settings.report.vfio_passthrough =
      parse_vfio_passthrough(request.property_or(kVfioPassthroughProperty, "false"));
  settings.rescan_interval = parse_rescan_interval(
      request.property_or(kRescanIntervalProperty, std::to_string(kDefaultRescanInterval.count())));
  return settings;
}

}  // namespace udev_handler
