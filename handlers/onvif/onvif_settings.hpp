// An onvif Configuration's discovery details and the discovery properties
// that choose where to probe, validated (see docs/handlers-onvif.md).
#ifndef DOWSER_HANDLERS_ONVIF_ONVIF_SETTINGS_HPP
#define DOWSER_HANDLERS_ONVIF_ONVIF_SETTINGS_HPP

#include <dowser/handler.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace onvif {

// Properties naming where to probe (dowser additions; Akri has neither).
inline constexpr const char* kMulticastInterfacesProperty = "ONVIF_MULTICAST_INTERFACES";
inline constexpr const char* kUnicastTargetsProperty = "ONVIF_UNICAST_PROBE_TARGETS";
inline constexpr int kWsDiscoveryPort = 3702;

// Akri's FilterList. Whether a value matches an item is the caller's rule.
struct FilterList {
  enum class Action { include, exclude };
  Action action = Action::include;
  std::vector<std::string> items;
};

// Akri's execute_filter: true when the camera must be dropped. `values` are
// what the camera has (empty when unknown); `matches(item, value)` compares.
// No list keeps; Exclude with no items keeps; an unknown value drops;
// Include drops unless an item matches; Exclude drops if one does.
template <typename Matches>
bool filter_drops(const std::optional<FilterList>& filter, const std::vector<std::string>& values,
                  Matches matches) {
  if (!filter) return false;
  if (filter->action == FilterList::Action::exclude && filter->items.empty()) return false;
  if (values.empty()) return true;
  bool any = false;
  for (const auto& item : filter->items)
    for (const auto& value : values) any = any || matches(item, value);
  return filter->action == FilterList::Action::include ? !any : any;
}

// Case-insensitive equality (UUID, IP and MAC filters).
bool equals_ignoring_case(const std::string& a, const std::string& b);

struct ProbeTarget {
  std::string host;
  int port = kWsDiscoveryPort;
  friend bool operator==(const ProbeTarget&, const ProbeTarget&) = default;
};

struct Settings {
  std::optional<FilterList> ip_addresses;
  std::optional<FilterList> mac_addresses;
  std::optional<FilterList> scopes;
  std::optional<FilterList> uuids;
  std::chrono::milliseconds discovery_timeout{1000};
  std::chrono::milliseconds discovery_interval{10000};
  std::chrono::milliseconds request_timeout{2000};
  // Interfaces to probe by multicast and to hear Hello/Bye on; nullopt means
  // every interface that is up, multicast-capable and has an IPv4 address.
  std::optional<std::vector<std::string>> multicast_interfaces;
  std::vector<ProbeTarget> unicast_targets;
  std::vector<std::string> warnings;  // e.g. keys this handler does not know
};

// Parses the details (YAML or JSON; empty takes every default) and the two
// probe properties. Throws dowser::InvalidArgument naming the field and the
// problem. Credentials are read separately (credentials.hpp).
Settings parse_settings(const dowser::DiscoverRequest& request);

}  // namespace onvif

#endif  // DOWSER_HANDLERS_ONVIF_ONVIF_SETTINGS_HPP
