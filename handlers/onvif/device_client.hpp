// CameraApi over gSOAP: SOAP 1.2 calls over HTTP or HTTPS (any certificate
// is accepted: cameras carry self-signed ones), each bounded by the request
// timeout, with a WS-Security UsernameToken when a credential is given. One
// object per thread: a gSOAP context is not shared.
#ifndef DOWSER_HANDLERS_ONVIF_DEVICE_CLIENT_HPP
#define DOWSER_HANDLERS_ONVIF_DEVICE_CLIENT_HPP

#include "camera_api.hpp"

#include <atomic>
#include <chrono>
#include <memory>

struct soap;

namespace onvif {

class DeviceClient final : public CameraApi {
 public:
  // Once stopping is set, no call starts (each throws CallFailed): a stop
  // waits for the call in progress only, at most the timeout.
  DeviceClient(std::chrono::milliseconds timeout, const std::atomic<bool>& stopping);
  ~DeviceClient() override;
  DeviceClient(const DeviceClient&) = delete;
  DeviceClient& operator=(const DeviceClient&) = delete;

  void get_system_date_and_time(const std::string& url) override;
  NetworkIdentity get_network_interfaces(const std::string& url,
                                         const std::optional<Credential>& credential) override;
  DeviceInformation get_device_information(const std::string& url,
                                           const std::optional<Credential>& credential) override;
  std::vector<MediaStream> get_streams(const std::string& url,
                                       const std::optional<Credential>& credential) override;

 private:
  void prepare(const std::optional<Credential>& credential);
  [[noreturn]] void fail(const char* operation);
  std::string media_service(const std::string& url, const std::optional<Credential>& credential);

  soap* soap_;
  const std::atomic<bool>& stopping_;
  // The camera's clock minus ours, from its GetSystemDateAndTime: tokens are
  // dated by the camera's clock, which may be far off.
  std::chrono::system_clock::duration clock_offset_{};
};

}  // namespace onvif

#endif  // DOWSER_HANDLERS_ONVIF_DEVICE_CLIENT_HPP
