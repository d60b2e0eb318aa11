#include "onvif_settings.hpp"

#include "discovery_details.hpp"

#include <yaml-cpp/yaml.h>

#include <set>

namespace onvif {
namespace {

using dowser::details::load_yaml;
using dowser::details::parse_seconds;
using dowser::details::refuse;
using dowser::details::scalar_at;
using dowser::details::SecondsField;

constexpr SecondsField kTimeoutField{"discoveryTimeoutSeconds", 0.05, 60};
constexpr SecondsField kIntervalField{"discoveryIntervalSeconds", 0.1, 86400};
constexpr SecondsField kRequestTimeoutField{"requestTimeoutSeconds", 0.05, 60};
constexpr const char* kFilterKeys[] = {"ipAddresses", "macAddresses", "scopes", "uuids"};

std::optional<FilterList> parse_filter(const YAML::Node& root, const std::string& key) {
  YAML::Node node = root[key];
  if (!node.IsDefined() || node.IsNull()) return std::nullopt;
  if (!node.IsMap()) refuse(key + " is not a mapping with action and items");
  FilterList filter;
  if (YAML::Node action = node["action"]; action && !action.IsNull()) {
    std::string text = scalar_at(action, key + ".action");
    if (text == "Include") {
      filter.action = FilterList::Action::include;
    } else if (text == "Exclude") {
      filter.action = FilterList::Action::exclude;
    } else {
      refuse(key + ".action must be Include or Exclude, got '" + text + "'");
    }
  }
  YAML::Node items = node["items"];
  if (!items.IsDefined()) refuse(key + ".items is missing");
  if (!items.IsSequence()) refuse(key + ".items is not a list");
  for (size_t i = 0; i < items.size(); ++i)
    filter.items.push_back(scalar_at(items[i], key + ".items[" + std::to_string(i) + "]"));
  return filter;
}

std::vector<std::string> unknown_key_warnings(const YAML::Node& root) {
  std::set<std::string> known(std::begin(kFilterKeys), std::end(kFilterKeys));
  known.insert({kTimeoutField.key, kIntervalField.key, kRequestTimeoutField.key});
  std::vector<std::string> warnings;
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) refuse("keys must be strings");
    std::string key = entry.first.as<std::string>();
    if (!known.contains(key))
      warnings.push_back("discovery details: unknown key '" + key + "' ignored");
  }
  return warnings;
}

// "a, b c" -> {a, b, c}
std::vector<std::string> property_list(const std::string& value) {
  std::vector<std::string> items;
  std::string item;
  std::istringstream in(value);
  while (in >> item) {
    std::istringstream parts(item);
    for (std::string part; std::getline(parts, part, ',');)
      if (!part.empty()) items.push_back(part);
  }
  return items;
}

ProbeTarget parse_target(const std::string& text) {
  auto where = [&] { return std::string(kUnicastTargetsProperty) + ": '" + text + "' "; };
  ProbeTarget target;
  auto colon = text.rfind(':');
  target.host = text.substr(0, colon);
  if (colon != std::string::npos) {
    std::string port = text.substr(colon + 1);
    size_t used = 0;
    int number = -1;
    try {
      number = std::stoi(port, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != port.size() || number < 1 || number > 65535)
      throw dowser::InvalidArgument(where() + "has no valid port (1 to 65535)");
    target.port = number;
  }
  if (target.host.empty() || target.host.find_first_of("[]/ ") != std::string::npos)
    throw dowser::InvalidArgument(where() + "must be host or host:port (IPv4 or a name)");
  return target;
}

void parse_probe_properties(const dowser::DiscoverRequest& request, Settings& settings) {
  if (auto it = request.properties.find(kMulticastInterfacesProperty);
      it != request.properties.end() && it->second) {
    auto names = property_list(*it->second);
    if (names.size() == 1 && names.front() == "none") names.clear();
    settings.multicast_interfaces = names;
  }
  if (auto it = request.properties.find(kUnicastTargetsProperty);
      it != request.properties.end() && it->second) {
    for (const auto& text : property_list(*it->second))
      settings.unicast_targets.push_back(parse_target(text));
  }
}

}  // namespace

bool equals_ignoring_case(const std::string& a, const std::string& b) {
  return dowser::lowercase(a) == dowser::lowercase(b);
}

Settings parse_settings(const dowser::DiscoverRequest& request) {
  Settings settings;
  parse_probe_properties(request, settings);
  YAML::Node root = load_yaml(request.discovery_details);
  if (!root.IsDefined() || root.IsNull()) return settings;
  if (!root.IsMap()) refuse("expected a mapping");
  settings.ip_addresses = parse_filter(root, "ipAddresses");
  settings.mac_addresses = parse_filter(root, "macAddresses");
  settings.scopes = parse_filter(root, "scopes");
  settings.uuids = parse_filter(root, "uuids");
  settings.discovery_timeout = parse_seconds(root, kTimeoutField, settings.discovery_timeout);
  settings.discovery_interval = parse_seconds(root, kIntervalField, settings.discovery_interval);
  settings.request_timeout = parse_seconds(root, kRequestTimeoutField, settings.request_timeout);
  settings.warnings = unknown_key_warnings(root);
  return settings;
}

}  // namespace onvif
