// Parsing of debugEcho discovery requests and the snapshot they produce.
// Kept apart from the module so that unit tests can link it directly.
#ifndef DOWSER_HANDLERS_DEBUG_ECHO_DETAILS_HPP
#define DOWSER_HANDLERS_DEBUG_ECHO_DETAILS_HPP

#include <dowser/handler.hpp>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace debug_echo {

inline constexpr const char* kDescriptionProperty = "DEBUG_ECHO_DESCRIPTION";
inline constexpr const char* kAvailabilityFileProperty = "DEBUG_ECHO_AVAILABILITY_FILE";
inline constexpr const char* kPollIntervalProperty = "DEBUG_ECHO_POLL_INTERVAL_MS";
inline constexpr const char* kInstancesSharedProperty = "DEBUG_ECHO_INSTANCES_SHARED";

inline constexpr const char* kDefaultAvailabilityFile = "/tmp/debug-echo-availability.txt";
inline constexpr std::chrono::milliseconds kDefaultPollInterval{1000};
inline constexpr std::chrono::milliseconds kMinPollInterval{10};
inline constexpr std::chrono::milliseconds kMaxPollInterval{24 * 60 * 60 * 1000};

// Everything one discovery session needs, validated.
struct Settings {
  std::vector<std::string> descriptions;  // unique, in first-seen order
  std::string availability_file;          // absolute path
  std::chrono::milliseconds poll_interval = kDefaultPollInterval;
  bool shared = false;
};

// The descriptions of YAML details `descriptions: [string, ...]`, without
// duplicates. Throws dowser::InvalidArgument naming what is wrong.
std::vector<std::string> parse_descriptions(const std::string& details);

// Each parser below throws dowser::InvalidArgument naming the property.
std::string parse_availability_file(const std::string& value);
std::chrono::milliseconds parse_poll_interval(const std::string& value);
bool parse_instances_shared(const std::string& value);

// Details plus properties, with defaults for absent properties.
Settings parse_request(const dowser::DiscoverRequest& request);

// True when the availability file's content says the devices are offline.
bool says_offline(std::string_view content);

// True unless the file exists, is a readable regular file and says OFFLINE
// in its first 64 KiB.
bool is_online(const std::string& availability_file);

// The snapshot to report: one device per description, or none when offline.
std::vector<dowser::Device> make_devices(const Settings& settings, bool online);

}  // namespace debug_echo

#endif  // DOWSER_HANDLERS_DEBUG_ECHO_DETAILS_HPP
