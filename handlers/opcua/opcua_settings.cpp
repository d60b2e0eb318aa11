#include "opcua_settings.hpp"

#include "opcua_url.hpp"

#include "discovery_details.hpp"

#include <yaml-cpp/yaml.h>
#include <dowser/handler.hpp>

#include <algorithm>
#include <set>

namespace opcua {
namespace {

using dowser::details::load_yaml;
using dowser::details::parse_seconds;
using dowser::details::refuse;
using dowser::details::scalar_at;
using dowser::details::SecondsField;

constexpr SecondsField kIntervalField{"discoveryIntervalSeconds", 0.05, 86400};
constexpr SecondsField kConnectTimeoutField{"connectTimeoutSeconds", 0.05, 300};
constexpr SecondsField kRequestTimeoutField{"requestTimeoutSeconds", 0.05, 600};

const std::set<std::string> kKnownKeys = {"opcuaDiscoveryMethod", "applicationNames",
                                          kIntervalField.key, kConnectTimeoutField.key,
                                          kRequestTimeoutField.key};

std::vector<std::string> string_list(const YAML::Node& node, const std::string& where) {
  if (!node.IsSequence()) refuse(where + " is not a list");
  std::vector<std::string> items;
  for (size_t i = 0; i < node.size(); ++i)
    items.push_back(scalar_at(node[i], where + "[" + std::to_string(i) + "]"));
  return items;
}

std::string checked_discovery_url(const std::string& url, const std::string& where) {
  std::string why;
  if (!parse_opc_tcp_url(url, &why)) refuse(where + " '" + url + "' " + why);
  return url;
}

std::vector<std::string> parse_discovery_urls(const YAML::Node& method) {
  if (!method.IsDefined() || method.IsNull()) return {kDefaultDiscoveryUrl};
  if (!method.IsMap() || method.size() != 1 || !method["standard"])
    refuse("opcuaDiscoveryMethod must be {standard: {discoveryUrls: [...]}}");
  YAML::Node standard = method["standard"];
  if (standard.IsNull()) return {kDefaultDiscoveryUrl};
  if (!standard.IsMap()) refuse("opcuaDiscoveryMethod.standard is not a mapping");
  YAML::Node urls = standard["discoveryUrls"];
  if (!urls.IsDefined() || urls.IsNull()) return {kDefaultDiscoveryUrl};
  std::string where = "opcuaDiscoveryMethod.standard.discoveryUrls";
  std::vector<std::string> unique;
  auto listed = string_list(urls, where);
  for (size_t i = 0; i < listed.size(); ++i) {
    checked_discovery_url(listed[i], where + "[" + std::to_string(i) + "]");
    if (std::find(unique.begin(), unique.end(), listed[i]) == unique.end())
      unique.push_back(listed[i]);
  }
  if (unique.empty()) refuse(where + " is empty");
  return unique;
}

std::optional<NameFilter> parse_name_filter(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return std::nullopt;
  if (!node.IsMap()) refuse("applicationNames is not a mapping with action and items");
  NameFilter filter;
  if (YAML::Node action = node["action"]; action && !action.IsNull()) {
    std::string text = scalar_at(action, "applicationNames.action");
    if (text == "Include") {
      filter.action = NameFilter::Action::include;
    } else if (text == "Exclude") {
      filter.action = NameFilter::Action::exclude;
    } else {
      refuse("applicationNames.action must be Include or Exclude, got '" + text + "'");
    }
  }
  YAML::Node items = node["items"];
  if (!items.IsDefined()) refuse("applicationNames.items is missing");
  filter.items = string_list(items, "applicationNames.items");
  return filter;
}

std::vector<std::string> unknown_key_warnings(const YAML::Node& root) {
  std::vector<std::string> warnings;
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) refuse("keys must be strings");
    std::string key = entry.first.as<std::string>();
    if (!kKnownKeys.contains(key))
      warnings.push_back("discovery details: unknown key '" + key + "' ignored");
  }
  return warnings;
}

}  // namespace

bool NameFilter::accepts(const std::string& name) const {
  bool listed = std::find(items.begin(), items.end(), name) != items.end();
  return action == Action::include ? listed : !listed;
}

Settings parse_settings(const std::string& details) {
  YAML::Node root = load_yaml(details);
  Settings settings;
  if (!root.IsDefined() || root.IsNull()) {
    settings.discovery_urls = {kDefaultDiscoveryUrl};
    return settings;
  }
  if (!root.IsMap()) refuse("expected a mapping");
  settings.discovery_urls = parse_discovery_urls(root["opcuaDiscoveryMethod"]);
  settings.application_names = parse_name_filter(root["applicationNames"]);
  settings.discovery_interval = parse_seconds(root, kIntervalField, kDefaultDiscoveryInterval);
  settings.client.connect_timeout =
      parse_seconds(root, kConnectTimeoutField, settings.client.connect_timeout);
  settings.client.request_timeout =
      parse_seconds(root, kRequestTimeoutField, settings.client.request_timeout);
  settings.warnings = unknown_key_warnings(root);
  return settings;
}

}  // namespace opcua
