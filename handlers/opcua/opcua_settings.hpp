// The discovery details of an opcua Configuration, validated (see README.md).
#ifndef DOWSER_HANDLERS_OPCUA_OPCUA_SETTINGS_HPP
#define DOWSER_HANDLERS_OPCUA_OPCUA_SETTINGS_HPP

#include "ua_client.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace opcua {

inline constexpr const char* kDefaultDiscoveryUrl = "opc.tcp://localhost:4840/";
inline constexpr std::chrono::milliseconds kDefaultDiscoveryInterval{10000};
inline constexpr std::chrono::milliseconds kFirstReportWait{10000};

// Akri's FilterList over application names: Include keeps only the listed
// names, Exclude drops them. Names match exactly.
struct NameFilter {
  enum class Action { include, exclude };
  Action action = Action::include;
  std::vector<std::string> items;
  bool accepts(const std::string& name) const;
};

struct Settings {
  std::vector<std::string> discovery_urls;  // opc.tcp URLs, unique, in the given order
  std::optional<NameFilter> application_names;
  std::chrono::milliseconds discovery_interval = kDefaultDiscoveryInterval;
  // How long the first report waits for every URL's first scan (not a
  // detail: tests shorten it).
  std::chrono::milliseconds first_report_wait = kFirstReportWait;
  ClientOptions client;
  std::vector<std::string> warnings;  // e.g. keys this handler does not know
};

// Parses YAML (or JSON) details; empty details take every default. Throws
// dowser::InvalidArgument naming the field and what is wrong with it.
Settings parse_settings(const std::string& details);

}  // namespace opcua

#endif  // DOWSER_HANDLERS_OPCUA_OPCUA_SETTINGS_HPP
