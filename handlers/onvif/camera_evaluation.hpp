// From one announced camera to a device, or to the reason it is left out:
// Akri's filters in Akri's order (UUID, scopes, reachability, IP, MAC), and
// the calls that fill the device's properties.
#ifndef DOWSER_HANDLERS_ONVIF_CAMERA_EVALUATION_HPP
#define DOWSER_HANDLERS_ONVIF_CAMERA_EVALUATION_HPP

#include "announcement.hpp"
#include "camera_api.hpp"
#include "credentials.hpp"
#include "onvif_settings.hpp"

#include <dowser/handler.hpp>

#include <optional>
#include <string>

namespace onvif {

inline constexpr const char* kServiceUrlProperty = "ONVIF_DEVICE_SERVICE_URL";
inline constexpr const char* kUuidProperty = "ONVIF_DEVICE_UUID";
inline constexpr const char* kIpAddressProperty = "ONVIF_DEVICE_IP_ADDRESS";
inline constexpr const char* kMacAddressProperty = "ONVIF_DEVICE_MAC_ADDRESS";
inline constexpr const char* kManufacturerProperty = "ONVIF_DEVICE_MANUFACTURER";
inline constexpr const char* kModelProperty = "ONVIF_DEVICE_MODEL";
inline constexpr const char* kSerialNumberProperty = "ONVIF_DEVICE_SERIAL_NUMBER";
inline constexpr const char* kFirmwareVersionProperty = "ONVIF_DEVICE_FIRMWARE_VERSION";
inline constexpr const char* kHardwareIdProperty = "ONVIF_DEVICE_HARDWARE_ID";
inline constexpr const char* kStreamUriProperty = "ONVIF_DEVICE_STREAM_URI";
inline constexpr const char* kStreamUrisProperty = "ONVIF_DEVICE_STREAM_URIS";
inline constexpr const char* kProfileTokensProperty = "ONVIF_DEVICE_PROFILE_TOKENS";

struct Evaluation {
  std::optional<dowser::Device> device;  // nullopt: not reported
  // False when a call failed: the verdict may change, so the camera is
  // checked again on the next pass (Akri never checks it again).
  bool settled = true;
  std::string problem;  // why it is left out or what failed; empty when all went well
};

// Whether the UUID or scope filters drop the camera (no call needed).
bool dropped_by_announcement(const Announcement& camera, const Settings& settings);

// Runs the calls and the remaining filters. Never throws CallFailed.
Evaluation evaluate_camera(const Announcement& camera, const Settings& settings,
                           const CredentialStore& credentials, CameraApi& api);

}  // namespace onvif

#endif  // DOWSER_HANDLERS_ONVIF_CAMERA_EVALUATION_HPP
