#include "ua_services.hpp"

#include "ua_transport.hpp"

namespace opcua::ua {
namespace {

// Smallest encodings, used to check array counts against the bytes left:
// an ApplicationDescription is five empty strings, a LocalizedText mask and
// an Int32; an EndpointDescription adds four strings, an Int32, an empty
// array and a Byte; a UserTokenPolicy is four strings and an Int32.
constexpr size_t kEmptyString = 4;  // also an Int32, an enumeration or an empty array
constexpr size_t kMinApplicationDescriptionSize = 5 * kEmptyString + 1 + kEmptyString;
constexpr size_t kMinEndpointDescriptionSize =
    kMinApplicationDescriptionSize + 4 * kEmptyString + kEmptyString + kEmptyString + 1;
constexpr size_t kMinUserTokenPolicySize = 4 * kEmptyString + kEmptyString;

constexpr int64_t kUnixEpochInUaMs = 11644473600000;  // 1601-01-01 to 1970-01-01
constexpr int64_t kTicksPerMs = 10000;

std::string type_text(const NodeId& id) {
  if (id.kind != NodeIdKind::numeric) return "a non-numeric NodeId";
  return "ns=" + std::to_string(id.namespace_index) + ";i=" + std::to_string(id.numeric);
}

// Reads an enumeration and checks it is one of 0..max.
template <typename Enum>
Enum read_enum(Reader& in, int32_t max, const char* what) {
  int32_t value = in.int32();
  if (value < 0 || value > max)
    throw DecodeError(std::string(what) + " has unknown value " + std::to_string(value));
  return static_cast<Enum>(value);
}

void write_request_header(Writer& out, const RequestHeader& header) {
  out.node_id(standard_node_id(0));  // authentication token: none, no session
  out.int64(header.timestamp);
  out.uint32(header.request_handle);
  out.uint32(0);      // return diagnostics: none
  out.null_string();  // audit entry id
  out.uint32(header.timeout_hint_ms);
  out.null_extension_object();  // additional header
}

// Reads a request body up to the end of its header.
Reader skip_to_request_fields(ByteView body, uint32_t* request_handle) {
  Reader in(body);
  (void)in.expanded_node_id();
  (void)in.node_id();  // authentication token
  (void)in.int64();    // timestamp
  *request_handle = in.uint32();
  (void)in.uint32();  // return diagnostics
  in.skip_string();   // audit entry id
  (void)in.uint32();  // timeout hint
  in.skip_extension_object();
  return in;
}

void write_response_header(Writer& out, const ResponseHeader& header) {
  out.int64(header.timestamp);
  out.uint32(header.request_handle);
  out.uint32(header.service_result);
  out.byte(0);   // service diagnostics: empty DiagnosticInfo
  out.int32(0);  // string table
  out.null_extension_object();
}

ResponseHeader read_response_header(Reader& in) {
  ResponseHeader header;
  header.timestamp = in.int64();
  header.request_handle = in.uint32();
  header.service_result = in.uint32();
  in.skip_diagnostic_info();
  in.skip_array(4, [](Reader& r) { r.skip_string(); });  // string table
  in.skip_extension_object();
  return header;
}

Writer start_body(uint32_t type) {
  Writer out;
  out.node_id(standard_node_id(type));
  return out;
}

// Reads a response's type id and header: a ServiceFault or a Bad result
// throws StatusError, another type DecodeError.
ResponseHeader read_response_start(Reader& in, uint32_t expected_type, const char* name) {
  NodeId type = in.expanded_node_id();
  if (type == standard_node_id(type_id::kServiceFault)) {
    ResponseHeader fault = read_response_header(in);
    if (!is_bad(fault.service_result))
      throw DecodeError(std::string("ServiceFault instead of ") + name + " has a Good result");
    throw StatusError(fault.service_result, std::string(name) + " refused with a ServiceFault");
  }
  if (type != standard_node_id(expected_type))
    throw DecodeError(std::string("expected ") + name + " (i=" + std::to_string(expected_type) +
                      "), got " + type_text(type));
  ResponseHeader header = read_response_header(in);
  if (is_bad(header.service_result))
    throw StatusError(header.service_result, std::string(name) + " failed");
  return header;
}

ApplicationDescription read_application(Reader& in) {
  ApplicationDescription app;
  app.application_uri = in.string();
  app.product_uri = in.string();
  app.application_name = in.localized_text();
  app.application_type = read_enum<ApplicationType>(in, 3, "ApplicationType");
  app.gateway_server_uri = in.string();
  app.discovery_profile_uri = in.string();
  app.discovery_urls = in.string_array();
  return app;
}

void write_application(Writer& out, const ApplicationDescription& app) {
  out.string(app.application_uri);
  out.string(app.product_uri);
  out.localized_text(app.application_name);
  out.int32(static_cast<int32_t>(app.application_type));
  out.string(app.gateway_server_uri);
  out.string(app.discovery_profile_uri);
  out.string_array(app.discovery_urls);
}

void skip_user_token_policy(Reader& in) {
  in.skip_string();  // policy id
  (void)read_enum<int32_t>(in, 3, "UserTokenType");
  in.skip_string();  // issued token type
  in.skip_string();  // issuer endpoint URL
  in.skip_string();  // security policy URI
}

EndpointDescription read_endpoint(Reader& in) {
  EndpointDescription endpoint;
  endpoint.endpoint_url = in.string();
  endpoint.server = read_application(in);
  in.skip_string();  // server certificate
  endpoint.security_mode = read_enum<MessageSecurityMode>(in, 3, "MessageSecurityMode");
  endpoint.security_policy_uri = in.string();
  in.skip_array(kMinUserTokenPolicySize, skip_user_token_policy);
  endpoint.transport_profile_uri = in.string();
  endpoint.security_level = in.byte();
  return endpoint;
}

void write_endpoint(Writer& out, const EndpointDescription& endpoint) {
  out.string(endpoint.endpoint_url);
  write_application(out, endpoint.server);
  out.null_string();  // server certificate
  out.int32(static_cast<int32_t>(endpoint.security_mode));
  out.string(endpoint.security_policy_uri);
  out.int32(0);  // user identity tokens
  out.string(endpoint.transport_profile_uri);
  out.byte(endpoint.security_level);
}

// FindServers and GetEndpoints requests: header, URL, then two string arrays.
Bytes encode_discovery_request(uint32_t type, const RequestHeader& header,
                               std::string_view endpoint_url) {
  Writer out = start_body(type);
  write_request_header(out, header);
  out.string(endpoint_url);
  out.int32(0);  // locale ids
  out.int32(0);  // server URIs (FindServers) or profile URIs (GetEndpoints)
  return out.take();
}

}  // namespace

int64_t to_ua_datetime(int64_t unix_ms) { return (unix_ms + kUnixEpochInUaMs) * kTicksPerMs; }

Bytes encode_open_secure_channel_request(const RequestHeader& header, uint32_t lifetime_ms) {
  Writer out = start_body(type_id::kOpenSecureChannelRequest);
  write_request_header(out, header);
  out.uint32(kProtocolVersion);
  out.int32(static_cast<int32_t>(SecurityTokenRequestType::issue));
  out.int32(static_cast<int32_t>(MessageSecurityMode::none));
  out.null_string();  // client nonce: SecurityPolicy None uses none
  out.uint32(lifetime_ms);
  return out.take();
}

Bytes encode_find_servers_request(const RequestHeader& header, std::string_view endpoint_url) {
  return encode_discovery_request(type_id::kFindServersRequest, header, endpoint_url);
}

Bytes encode_get_endpoints_request(const RequestHeader& header, std::string_view endpoint_url) {
  return encode_discovery_request(type_id::kGetEndpointsRequest, header, endpoint_url);
}

Bytes encode_close_secure_channel_request(const RequestHeader& header) {
  Writer out = start_body(type_id::kCloseSecureChannelRequest);
  write_request_header(out, header);
  return out.take();
}

OpenSecureChannelResponse decode_open_secure_channel_response(ByteView body) {
  Reader in(body);
  OpenSecureChannelResponse response;
  response.header =
      read_response_start(in, type_id::kOpenSecureChannelResponse, "OpenSecureChannelResponse");
  response.server_protocol_version = in.uint32();
  response.token.channel_id = in.uint32();
  response.token.token_id = in.uint32();
  response.token.created_at = in.int64();
  response.token.revised_lifetime_ms = in.uint32();
  in.skip_string();  // server nonce
  in.expect_end("OpenSecureChannelResponse");
  return response;
}

FindServersResponse decode_find_servers_response(ByteView body) {
  Reader in(body);
  FindServersResponse response;
  response.header = read_response_start(in, type_id::kFindServersResponse, "FindServersResponse");
  response.servers = in.array(kMinApplicationDescriptionSize, read_application);
  in.expect_end("FindServersResponse");
  return response;
}

GetEndpointsResponse decode_get_endpoints_response(ByteView body) {
  Reader in(body);
  GetEndpointsResponse response;
  response.header = read_response_start(in, type_id::kGetEndpointsResponse, "GetEndpointsResponse");
  response.endpoints = in.array(kMinEndpointDescriptionSize, read_endpoint);
  in.expect_end("GetEndpointsResponse");
  return response;
}

NodeId peek_type_id(ByteView body) {
  Reader in(body);
  return in.expanded_node_id();
}

uint32_t decode_request_handle(ByteView body) {
  uint32_t handle = 0;
  (void)skip_to_request_fields(body, &handle);
  return handle;
}

std::string decode_endpoint_url_of_request(ByteView body) {
  uint32_t handle = 0;
  return skip_to_request_fields(body, &handle).string();
}

Bytes encode_open_secure_channel_response(const OpenSecureChannelResponse& response) {
  Writer out = start_body(type_id::kOpenSecureChannelResponse);
  write_response_header(out, response.header);
  out.uint32(response.server_protocol_version);
  out.uint32(response.token.channel_id);
  out.uint32(response.token.token_id);
  out.int64(response.token.created_at);
  out.uint32(response.token.revised_lifetime_ms);
  out.null_string();  // server nonce
  return out.take();
}

Bytes encode_find_servers_response(const FindServersResponse& response) {
  Writer out = start_body(type_id::kFindServersResponse);
  write_response_header(out, response.header);
  out.int32(static_cast<int32_t>(response.servers.size()));
  for (const auto& server : response.servers) write_application(out, server);
  return out.take();
}

Bytes encode_get_endpoints_response(const GetEndpointsResponse& response) {
  Writer out = start_body(type_id::kGetEndpointsResponse);
  write_response_header(out, response.header);
  out.int32(static_cast<int32_t>(response.endpoints.size()));
  for (const auto& endpoint : response.endpoints) write_endpoint(out, endpoint);
  return out.take();
}

Bytes encode_service_fault(const ResponseHeader& header) {
  Writer out = start_body(type_id::kServiceFault);
  write_response_header(out, header);
  return out.take();
}

}  // namespace opcua::ua
