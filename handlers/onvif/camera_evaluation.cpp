#include "camera_evaluation.hpp"

#include <algorithm>
#include <span>

namespace onvif {
namespace {

bool exact(const std::string& item, const std::string& value) { return item == value; }

std::vector<std::string> known(const std::optional<std::string>& value) {
  return value ? std::vector<std::string>{*value} : std::vector<std::string>{};
}

// A camera has one or two addresses (IPv4, IPv6); an announcement listing
// thousands of dead ones would hold a check (and the session's stop) for
// hours at one request timeout each.
constexpr size_t kMaxAddressesTried = 8;

// The first of the first kMaxAddressesTried XAddrs that answers
// GetSystemDateAndTime, or nullopt.
std::optional<std::string> first_reachable(const Announcement& camera, CameraApi& api,
                                           std::string& problem) {
  const size_t tried = std::min(camera.xaddrs.size(), kMaxAddressesTried);
  for (const auto& url : std::span(camera.xaddrs).first(tried)) {
    try {
      api.get_system_date_and_time(url);
      return url;
    } catch (const CallFailed& e) {
      problem = "GetSystemDateAndTime on " + url + " failed: " + e.what();
    }
  }
  if (camera.xaddrs.empty()) problem = "announces no device service address (XAddrs)";
  return std::nullopt;
}

void add_information(dowser::Properties& properties, const DeviceInformation& information) {
  // What the camera says of itself may be in any encoding: made valid, not
  // a reason to lose the camera.
  auto add = [&](const char* key, const std::string& value) {
    if (!value.empty()) properties[key] = dowser::property_value(value);
  };
  add(kManufacturerProperty, information.manufacturer);
  add(kModelProperty, information.model);
  add(kSerialNumberProperty, information.serial_number);
  add(kFirmwareVersionProperty, information.firmware_version);
  add(kHardwareIdProperty, information.hardware_id);
}

// Camera text made values the host takes (rule D2), not a reason to lose the
// camera. The lists hold whole profiles, the same ones, as many as fit in
// one value's size together: the whole device must stay under
// DOWSER_MAX_DEVICE_LEN (rule D5), and an NVR may have hundreds.
void add_streams(dowser::Properties& properties, const std::vector<MediaStream>& streams) {
  if (streams.empty()) return;
  std::string uris;
  std::string tokens;
  for (const auto& stream : streams) {
    const std::string uri = dowser::property_value(stream.uri);
    const std::string token = dowser::property_value(stream.profile_token);
    const size_t separator = uris.empty() ? 0 : 1;
    if (uris.size() + tokens.size() + 2 * separator + uri.size() + token.size() >
        DOWSER_MAX_PROPERTY_VALUE_LEN)
      break;
    uris += (separator != 0 ? " " : "") + uri;
    tokens += (separator != 0 ? " " : "") + token;
  }
  properties[kStreamUriProperty] = dowser::property_value(streams.front().uri);
  properties[kStreamUrisProperty] = uris;
  properties[kProfileTokensProperty] = tokens;
}

// Runs one call; a failure is noted and leaves the evaluation unsettled.
template <typename Call>
auto attempt(Evaluation& evaluation, const char* what, Call call)
    -> std::optional<decltype(call())> {
  try {
    return call();
  } catch (const CallFailed& e) {
    evaluation.settled = false;
    if (evaluation.problem.empty()) evaluation.problem = std::string(what) + " failed: " + e.what();
    return std::nullopt;
  }
}

}  // namespace

bool dropped_by_announcement(const Announcement& camera, const Settings& settings) {
  return filter_drops(settings.uuids, {device_uuid(camera.endpoint)}, equals_ignoring_case) ||
         filter_drops(settings.scopes, camera.scopes, exact);
}

namespace {

Evaluation evaluate_with_calls(const Announcement& camera, const Settings& settings,
                               const CredentialStore& credentials, CameraApi& api) {
  Evaluation evaluation;
  if (dropped_by_announcement(camera, settings)) {
    evaluation.problem = "left out by the uuids or scopes filter";
    return evaluation;
  }
  auto url = first_reachable(camera, api, evaluation.problem);
  if (!url) {
    evaluation.settled = false;
    return evaluation;
  }
  std::string uuid = device_uuid(camera.endpoint);
  auto credential = credentials.lookup(uuid);
  NetworkIdentity identity = attempt(evaluation, "GetNetworkInterfaces", [&] {
                               return api.get_network_interfaces(*url, credential);
                             }).value_or(NetworkIdentity{});
  if (filter_drops(settings.ip_addresses, known(identity.ip_address), equals_ignoring_case) ||
      filter_drops(settings.mac_addresses, known(identity.mac_address), equals_ignoring_case)) {
    if (evaluation.problem.empty())
      evaluation.problem = "left out by the ipAddresses or macAddresses filter";
    return evaluation;
  }
  dowser::Device device;
  device.id = uuid;
  device.sharing = dowser::Sharing::shared;
  device.properties[kServiceUrlProperty] = dowser::property_value(*url);
  device.properties[kUuidProperty] = uuid;
  if (identity.ip_address)
    device.properties[kIpAddressProperty] = dowser::property_value(*identity.ip_address);
  if (identity.mac_address)
    device.properties[kMacAddressProperty] = dowser::property_value(*identity.mac_address);
  if (auto information = attempt(evaluation, "GetDeviceInformation",
                                 [&] { return api.get_device_information(*url, credential); }))
    add_information(device.properties, *information);
  if (auto streams = attempt(evaluation, "reading stream URIs",
                             [&] { return api.get_streams(*url, credential); }))
    add_streams(device.properties, *streams);
  evaluation.device = std::move(device);
  return evaluation;
}

}  // namespace

Evaluation evaluate_camera(const Announcement& camera, const Settings& settings,
                           const CredentialStore& credentials, CameraApi& api) {
  try {
    return evaluate_with_calls(camera, settings, credentials, api);
  } catch (const std::exception& e) {  // not a failed call: out of memory, no random bytes
    return Evaluation{std::nullopt, false, std::string("checking it failed: ") + e.what()};
  }
}

}  // namespace onvif
