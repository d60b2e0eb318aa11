// The discovery services of OPC UA (Part 4, 5.4 and 5.5) and the
// SecureChannel service set, as message bodies: the type id of the
// structure (Part 6, 5.2.2.15) followed by its fields. Requests are encoded,
// responses decoded; the response encoders exist for tests and fuzzing seeds.
#ifndef DOWSER_HANDLERS_OPCUA_CODEC_UA_SERVICES_HPP
#define DOWSER_HANDLERS_OPCUA_CODEC_UA_SERVICES_HPP

#include "ua_binary.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace opcua::ua {

// DefaultBinary encoding ids of the structures (namespace 0).
namespace type_id {
inline constexpr uint32_t kServiceFault = 397;
inline constexpr uint32_t kFindServersRequest = 422;
inline constexpr uint32_t kFindServersResponse = 425;
inline constexpr uint32_t kGetEndpointsRequest = 428;
inline constexpr uint32_t kGetEndpointsResponse = 431;
inline constexpr uint32_t kOpenSecureChannelRequest = 446;
inline constexpr uint32_t kOpenSecureChannelResponse = 449;
inline constexpr uint32_t kCloseSecureChannelRequest = 452;
}  // namespace type_id

struct RequestHeader {
  int64_t timestamp = 0;  // 100 ns ticks since 1601-01-01 UTC
  uint32_t request_handle = 0;
  uint32_t timeout_hint_ms = 0;
};

struct ResponseHeader {
  int64_t timestamp = 0;
  uint32_t request_handle = 0;
  uint32_t service_result = 0;
};

// Ticks of the OPC UA DateTime for a Unix time in milliseconds.
int64_t to_ua_datetime(int64_t unix_ms);

enum class SecurityTokenRequestType : int32_t { issue = 0, renew = 1 };
enum class MessageSecurityMode : int32_t { invalid = 0, none = 1, sign = 2, sign_and_encrypt = 3 };
enum class ApplicationType : int32_t {
  server = 0,
  client = 1,
  client_and_server = 2,
  discovery_server = 3,
};

struct ApplicationDescription {
  std::string application_uri;
  std::string product_uri;
  LocalizedText application_name;
  ApplicationType application_type = ApplicationType::server;
  std::string gateway_server_uri;
  std::string discovery_profile_uri;
  std::vector<std::string> discovery_urls;
  friend bool operator==(const ApplicationDescription&, const ApplicationDescription&) = default;
};

struct EndpointDescription {
  std::string endpoint_url;
  ApplicationDescription server;
  MessageSecurityMode security_mode = MessageSecurityMode::invalid;
  std::string security_policy_uri;
  std::string transport_profile_uri;
  uint8_t security_level = 0;
  // ServerCertificate and UserIdentityTokens are read, checked and dropped.
  friend bool operator==(const EndpointDescription&, const EndpointDescription&) = default;
};

struct ChannelSecurityToken {
  uint32_t channel_id = 0;
  uint32_t token_id = 0;
  int64_t created_at = 0;
  uint32_t revised_lifetime_ms = 0;
};

struct OpenSecureChannelResponse {
  ResponseHeader header;
  uint32_t server_protocol_version = 0;
  ChannelSecurityToken token;
};

struct FindServersResponse {
  ResponseHeader header;
  std::vector<ApplicationDescription> servers;
};

struct GetEndpointsResponse {
  ResponseHeader header;
  std::vector<EndpointDescription> endpoints;
};

// Requests. OpenSecureChannel asks for an Issue with security mode None.
Bytes encode_open_secure_channel_request(const RequestHeader& header, uint32_t lifetime_ms);
Bytes encode_find_servers_request(const RequestHeader& header, std::string_view endpoint_url);
Bytes encode_get_endpoints_request(const RequestHeader& header, std::string_view endpoint_url);
Bytes encode_close_secure_channel_request(const RequestHeader& header);

// Responses. Each throws StatusError for a ServiceFault or a Bad service
// result, and DecodeError for anything malformed, another type or trailing
// bytes.
OpenSecureChannelResponse decode_open_secure_channel_response(ByteView body);
FindServersResponse decode_find_servers_response(ByteView body);
GetEndpointsResponse decode_get_endpoints_response(ByteView body);

// The type id that starts a body (to tell requests apart in test peers).
NodeId peek_type_id(ByteView body);
// The request handle of a request body of any type.
uint32_t decode_request_handle(ByteView body);
// The EndpointUrl field of a FindServers or GetEndpoints request body.
std::string decode_endpoint_url_of_request(ByteView body);

Bytes encode_open_secure_channel_response(const OpenSecureChannelResponse& response);
Bytes encode_find_servers_response(const FindServersResponse& response);
Bytes encode_get_endpoints_response(const GetEndpointsResponse& response);
Bytes encode_service_fault(const ResponseHeader& header);

}  // namespace opcua::ua

#endif  // DOWSER_HANDLERS_OPCUA_CODEC_UA_SERVICES_HPP
