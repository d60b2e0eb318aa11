// The ONVIF calls the handler makes to one camera, as an interface: the
// gSOAP client (device_client.hpp) is the real one; tests may script one.
#ifndef DOWSER_HANDLERS_ONVIF_CAMERA_API_HPP
#define DOWSER_HANDLERS_ONVIF_CAMERA_API_HPP

#include "credentials.hpp"

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace onvif {

// A call that got no usable answer: unreachable, timed out, a SOAP fault
// (e.g. not authorized), or a reply without the expected content.
class CallFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct NetworkIdentity {
  std::optional<std::string> ip_address;   // first IPv4 address
  std::optional<std::string> mac_address;  // first hardware address
};

struct DeviceInformation {
  std::string manufacturer;
  std::string model;
  std::string firmware_version;
  std::string serial_number;
  std::string hardware_id;
};

struct MediaStream {
  std::string profile_token;
  std::string uri;
};

class CameraApi {
 public:
  virtual ~CameraApi() = default;
  // Every call throws CallFailed. The unauthenticated GetSystemDateAndTime
  // comes first for a URL: it proves the camera answers, and its clock
  // dates the UsernameTokens of the later calls.
  virtual void get_system_date_and_time(const std::string& url) = 0;
  virtual NetworkIdentity get_network_interfaces(const std::string& url,
                                                 const std::optional<Credential>& credential) = 0;
  virtual DeviceInformation get_device_information(const std::string& url,
                                                   const std::optional<Credential>& credential) = 0;
  // GetServices (media service address), GetProfiles, GetStreamUri (RTSP).
  virtual std::vector<MediaStream> get_streams(const std::string& url,
                                               const std::optional<Credential>& credential) = 0;
};

}  // namespace onvif

#endif  // DOWSER_HANDLERS_ONVIF_CAMERA_API_HPP
