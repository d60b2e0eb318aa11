#include "device_client.hpp"

#include "username_token.hpp"

#include "onvifClientH.h"

#include <ctime>
#include <mutex>
#include <new>

namespace onvif {
namespace {

constexpr const char* kMediaNamespace = "http://www.onvif.org/ver10/media/wsdl";

std::string text_of(const std::string* value) { return value != nullptr ? *value : std::string(); }

bool within(const int* value, int low, int high) {
  return value != nullptr && *value >= low && *value <= high;
}

// UTCDateTime as a time point; nullopt when a field is missing or out of
// range (a camera's clock is its own: INT_MAX as a year must not overflow).
std::optional<std::chrono::system_clock::time_point> utc_time(const tt__DateTime* when) {
  if (when == nullptr || when->tt__Date == nullptr || when->tt__Time == nullptr)
    return std::nullopt;
  const tt__Date& date = *when->tt__Date;
  const tt__Time& time = *when->tt__Time;
  if (!within(date.tt__Year, 1970, 9999) || !within(date.tt__Month, 1, 12) ||
      !within(date.tt__Day, 1, 31) || !within(time.tt__Hour, 0, 23) ||
      !within(time.tt__Minute, 0, 59) || !within(time.tt__Second, 0, 60))
    return std::nullopt;
  std::tm fields{};
  fields.tm_year = *date.tt__Year - 1900;
  fields.tm_mon = *date.tt__Month - 1;
  fields.tm_mday = *date.tt__Day;
  fields.tm_hour = *time.tt__Hour;
  fields.tm_min = *time.tt__Minute;
  fields.tm_sec = *time.tt__Second;
  return std::chrono::system_clock::from_time_t(::timegm(&fields));
}

std::optional<std::string> first_ipv4(const tt__IPv4Configuration& config) {
  for (const auto& manual : config.tt__Manual)
    if (manual.tt__Address) return *manual.tt__Address;
  for (const auto* address : {config.tt__LinkLocal, config.tt__FromDHCP})
    if (address != nullptr && address->tt__Address) return *address->tt__Address;
  return std::nullopt;
}

}  // namespace

DeviceClient::DeviceClient(std::chrono::milliseconds timeout, const std::atomic<bool>& stopping)
    : soap_(soap_new1(SOAP_C_UTFSTRING | SOAP_IO_DEFAULT)), stopping_(stopping) {
  if (soap_ == nullptr) throw std::bad_alloc();
  static std::once_flag ssl_initialised;
  std::call_once(ssl_initialised, [] { soap_ssl_init(); });
  // Negative gSOAP timeouts are microseconds.
  int micros = -static_cast<int>(std::chrono::microseconds(timeout).count());
  soap_->connect_timeout = soap_->send_timeout = soap_->recv_timeout = micros;
  soap_->transfer_timeout =
      static_cast<int>(std::chrono::ceil<std::chrono::seconds>(timeout).count());
  soap_ssl_client_context(soap_, SOAP_SSL_NO_AUTHENTICATION, nullptr, nullptr, nullptr, nullptr,
                          nullptr);
}

DeviceClient::~DeviceClient() {
  soap_destroy(soap_);
  soap_end(soap_);
  soap_free(soap_);
}

void DeviceClient::prepare(const std::optional<Credential>& credential) {
  if (stopping_) throw CallFailed("the session is stopping");
  soap_destroy(soap_);
  soap_end(soap_);
  soap_->header = nullptr;
  if (!credential) return;
  UsernameToken token =
      fresh_username_token(credential->username, credential->password.value_or(""),
                           std::chrono::system_clock::now() + clock_offset_);
  soap_header(soap_);
  auto* security = soap_new__wsse__Security(soap_);
  auto* username = soap_new__wsse__UsernameToken(soap_);
  username->wsse__Username = token.username;
  username->wsse__Password = soap_new__wsse__Password(soap_);
  username->wsse__Password->__item = token.password_digest;
  username->wsse__Password->Type = kPasswordDigestType;
  username->wsse__Nonce = soap_new__wsse__Nonce(soap_);
  username->wsse__Nonce->__item = token.nonce;
  username->wsse__Nonce->EncodingType = kBase64EncodingType;
  username->wsu__Created = soap_new_std__string(soap_);
  *username->wsu__Created = token.created;
  security->wsse__UsernameToken = username;
  soap_->header->wsse__Security = security;
}

void DeviceClient::fail(const char* operation) {
  std::string message = std::string(operation) + ": ";
  const char* reason = soap_fault_string(soap_);
  const char* subcode = soap_fault_subcode(soap_);
  message += reason != nullptr ? reason : "gSOAP error " + std::to_string(soap_->error);
  if (subcode != nullptr) message += std::string(" (") + subcode + ")";
  soap_destroy(soap_);
  soap_end(soap_);
  throw CallFailed(message);
}

void DeviceClient::get_system_date_and_time(const std::string& url) {
  prepare(std::nullopt);
  _tds__GetSystemDateAndTime request;
  _tds__GetSystemDateAndTimeResponse response;
  if (soap_call___tds__GetSystemDateAndTime(soap_, url.c_str(), nullptr, &request, response))
    fail("GetSystemDateAndTime");
  auto* date = response.tds__SystemDateAndTime;
  auto camera_time = utc_time(date != nullptr ? date->tt__UTCDateTime : nullptr);
  clock_offset_ = camera_time ? *camera_time - std::chrono::system_clock::now()
                              : std::chrono::system_clock::duration{};
}

NetworkIdentity DeviceClient::get_network_interfaces(const std::string& url,
                                                     const std::optional<Credential>& credential) {
  prepare(credential);
  _tds__GetNetworkInterfaces request;
  _tds__GetNetworkInterfacesResponse response;
  if (soap_call___tds__GetNetworkInterfaces(soap_, url.c_str(), nullptr, &request, response))
    fail("GetNetworkInterfaces");
  NetworkIdentity identity;
  for (const auto& interface : response.tds__NetworkInterfaces) {
    if (!identity.ip_address && interface.tt__IPv4 != nullptr && interface.tt__IPv4->tt__Config)
      identity.ip_address = first_ipv4(*interface.tt__IPv4->tt__Config);
    if (!identity.mac_address && interface.tt__Info != nullptr && interface.tt__Info->tt__HwAddress)
      identity.mac_address = *interface.tt__Info->tt__HwAddress;
  }
  return identity;
}

DeviceInformation DeviceClient::get_device_information(
    const std::string& url, const std::optional<Credential>& credential) {
  prepare(credential);
  _tds__GetDeviceInformation request;
  _tds__GetDeviceInformationResponse response;
  if (soap_call___tds__GetDeviceInformation(soap_, url.c_str(), nullptr, &request, response))
    fail("GetDeviceInformation");
  return {text_of(response.tds__Manufacturer), text_of(response.tds__Model),
          text_of(response.tds__FirmwareVersion), text_of(response.tds__SerialNumber),
          text_of(response.tds__HardwareId)};
}

// The media service's address from GetServices; the device service's own
// address when the camera does not offer GetServices (ONVIF before 2.0).
std::string DeviceClient::media_service(const std::string& url,
                                        const std::optional<Credential>& credential) {
  prepare(credential);
  _tds__GetServices request;
  request.tds__IncludeCapability = false;
  _tds__GetServicesResponse response;
  if (soap_call___tds__GetServices(soap_, url.c_str(), nullptr, &request, response) != SOAP_OK)
    return url;
  for (const auto& service : response.tds__Service)
    if (text_of(service.tds__Namespace) == kMediaNamespace && service.tds__XAddr)
      return *service.tds__XAddr;
  return url;
}

std::vector<MediaStream> DeviceClient::get_streams(const std::string& url,
                                                   const std::optional<Credential>& credential) {
  std::string media = media_service(url, credential);
  prepare(credential);
  _trt__GetProfiles profiles_request;
  _trt__GetProfilesResponse profiles;
  if (soap_call___trt__GetProfiles(soap_, media.c_str(), nullptr, &profiles_request, profiles))
    fail("GetProfiles");
  std::vector<std::string> tokens;
  for (const auto& profile : profiles.trt__Profiles) tokens.push_back(profile.token);
  std::vector<MediaStream> streams;
  for (const auto& token : tokens) {
    prepare(credential);
    _trt__GetStreamUri request;
    request.trt__ProfileToken = token;
    request.trt__StreamSetup = soap_new_tt__StreamSetup(soap_);
    request.trt__StreamSetup->tt__Stream = "RTP-Unicast";
    request.trt__StreamSetup->tt__Transport = soap_new_tt__Transport(soap_);
    request.trt__StreamSetup->tt__Transport->tt__Protocol = "RTSP";
    _trt__GetStreamUriResponse response;
    if (soap_call___trt__GetStreamUri(soap_, media.c_str(), nullptr, &request, response))
      fail("GetStreamUri");
    if (response.trt__MediaUri == nullptr || !response.trt__MediaUri->tt__Uri)
      throw CallFailed("GetStreamUri: the answer holds no Uri");
    streams.push_back({token, *response.trt__MediaUri->tt__Uri});
  }
  return streams;
}

}  // namespace onvif
