#include "debug_echo_details.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>
#include <system_error>

namespace debug_echo {
namespace {

using dowser::lowercase;
using dowser::trimmed;

[[noreturn]] void refuse(const std::string& message) { throw dowser::InvalidArgument(message); }

YAML::Node load_yaml(const std::string& details) {
  try {
    return YAML::Load(details);
  } catch (const YAML::Exception& e) {
    // yaml-cpp counts lines and columns from 0; people count from 1.
    refuse("discovery details are not valid YAML: line " + std::to_string(e.mark.line + 1) +
           ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

YAML::Node descriptions_node(const YAML::Node& root) {
  if (!root.IsDefined() || root.IsNull()) refuse("discovery details are empty");
  if (!root.IsMap()) refuse("discovery details: expected a mapping with 'descriptions'");
  YAML::Node descriptions = root["descriptions"];
  if (!descriptions.IsDefined()) refuse("discovery details: 'descriptions' is missing");
  if (!descriptions.IsSequence()) refuse("discovery details: 'descriptions' is not a sequence");
  return descriptions;
}

std::string description_at(const YAML::Node& item, size_t index) {
  std::string where = "discovery details: descriptions[" + std::to_string(index) + "]";
  // A plain `~`, `null` or empty item is null, not a string; quoted ones are strings.
  if (!item.IsScalar()) refuse(where + " is not a string");
  auto description = item.as<std::string>();
  if (description.empty()) refuse(where + " is empty (it would be a device id)");
  return description;
}

}  // namespace

std::vector<std::string> parse_descriptions(const std::string& details) {
  YAML::Node descriptions = descriptions_node(load_yaml(details));
  std::vector<std::string> unique;
  std::set<std::string> seen;
  for (size_t i = 0; i < descriptions.size(); ++i) {
    std::string description = description_at(descriptions[i], i);
    // Device ids are unique within a snapshot, so a repeated description is one device.
    if (seen.insert(description).second) unique.push_back(std::move(description));
  }
  return unique;
}

std::string parse_availability_file(const std::string& value) {
  // Relative paths would depend on the host's working directory.
  bool names_a_file = !value.empty() && value.front() == '/' && value.back() != '/';
  if (!names_a_file)
    refuse(std::string(kAvailabilityFileProperty) + " must be an absolute file path, got '" +
           value + "'");
  return value;
}

std::chrono::milliseconds parse_poll_interval(const std::string& value) {
  std::string text = trimmed(value);
  long long ms = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), ms);
  bool whole = error == std::errc() && end == text.data() + text.size() && !text.empty();
  if (!whole || ms < kMinPollInterval.count() || ms > kMaxPollInterval.count())
    refuse(std::string(kPollIntervalProperty) + " must be a whole number of milliseconds from " +
           std::to_string(kMinPollInterval.count()) + " to " +
           std::to_string(kMaxPollInterval.count()) + ", got '" + value + "'");
  return std::chrono::milliseconds(ms);
}

bool parse_instances_shared(const std::string& value) {
  std::string text = lowercase(trimmed(value));
  if (text == "true") return true;
  if (text == "false") return false;
  refuse(std::string(kInstancesSharedProperty) + " must be 'true' or 'false', got '" + value + "'");
}

Settings parse_request(const dowser::DiscoverRequest& request) {
  Settings settings;
  settings.descriptions = parse_descriptions(request.discovery_details);
  settings.availability_file = parse_availability_file(
      request.property_or(kAvailabilityFileProperty, kDefaultAvailabilityFile));
  settings.poll_interval = parse_poll_interval(
      request.property_or(kPollIntervalProperty, std::to_string(kDefaultPollInterval.count())));
  settings.shared = parse_instances_shared(request.property_or(kInstancesSharedProperty, "false"));
  return settings;
}

bool says_offline(std::string_view content) {
  return content.find("OFFLINE") != std::string_view::npos;
}

// Any local user may put something at the default path in /tmp: a FIFO
// would block the poll (and the session's stop) in open(), /dev/zero would
// be read without end, and opening some devices does something (a tty may
// become the controlling terminal). Only a regular file's first bytes count,
// and nothing else is opened.
bool is_online(const std::string& availability_file) {
  constexpr size_t kReadAtMost = size_t{64} * 1024;
  struct stat named {};
  if (::stat(availability_file.c_str(), &named) != 0 || !S_ISREG(named.st_mode))
    return true;  // no file means nobody asked for offline
  const int fd = ::open(availability_file.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return true;
  struct stat status {};  // what was opened: it may have been replaced since
  std::string content;
  if (::fstat(fd, &status) == 0 && S_ISREG(status.st_mode)) {
    content.resize(kReadAtMost);
    const ssize_t got = ::read(fd, content.data(), content.size());
    content.resize(got > 0 ? static_cast<size_t>(got) : 0);
  }
  ::close(fd);
  return !says_offline(content);
}

std::vector<dowser::Device> make_devices(const Settings& settings, bool online) {
  std::vector<dowser::Device> devices;
  if (!online) return devices;
  devices.reserve(settings.descriptions.size());
  for (const auto& description : settings.descriptions) {
    dowser::Device device;
    device.id = description;
    device.properties[kDescriptionProperty] = description;
    device.sharing = settings.shared ? dowser::Sharing::shared : dowser::Sharing::local;
    devices.push_back(std::move(device));
  }
  return devices;
}

}  // namespace debug_echo
