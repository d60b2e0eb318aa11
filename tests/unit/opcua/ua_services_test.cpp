// Service requests encoded byte by byte; responses decoded from what
// node-opcua 2.186.4 sent, and refused when malformed in any way.
#include "ua_services.hpp"
#include "codec_test_support.hpp"
#include "ua_transport.hpp"

namespace opcua::test {
namespace {

using ua::ApplicationType;
using ua::DecodeError;
using ua::MessageSecurityMode;

const ua::RequestHeader kHeader{1, 7, 5000};
// The RequestHeader above: no token, timestamp 1, handle 7, no diagnostics,
// null audit id, timeout hint 5000, no additional header.
const char* const kHeaderHex = "0000 0100000000000000 07000000 00000000 ffffffff 88130000 000000";

// The body inside a captured MSG or OPN chunk.
ua::Bytes body_of(const std::string& vector) {
  ua::Bytes message = vector_file(vector);
  auto body = ua::decode_chunk(message).body;
  return ua::Bytes(body.begin(), body.end());
}

TEST(UaServices, FindServersRequestBytes) {
  std::string url = "opc.tcp://h:4840";
  EXPECT_EQ(ua::encode_find_servers_request(kHeader, url),
            concat({hex("0100a601"), hex(kHeaderHex), hex("10000000"), text_bytes(url),
                    hex("00000000 00000000")}));
}

TEST(UaServices, GetEndpointsRequestBytes) {
  std::string url = "opc.tcp://h:4840";
  ua::Bytes request = ua::encode_get_endpoints_request(kHeader, url);
  EXPECT_EQ(request, concat({hex("0100ac01"), hex(kHeaderHex), hex("10000000"), text_bytes(url),
                             hex("00000000 00000000")}));
  EXPECT_EQ(ua::decode_request_handle(request), 7u);
  EXPECT_EQ(ua::decode_endpoint_url_of_request(request), url);
}

TEST(UaServices, OpenSecureChannelRequestAsksForIssueWithModeNone) {
  EXPECT_EQ(ua::encode_open_secure_channel_request(kHeader, 60000),
            concat({hex("0100be01"), hex(kHeaderHex),
                    hex("00000000 00000000 01000000 ffffffff 60ea0000")}));
}

TEST(UaServices, CloseSecureChannelRequestIsTheHeaderAlone) {
  EXPECT_EQ(ua::encode_close_secure_channel_request(kHeader),
            concat({hex("0100c401"), hex(kHeaderHex)}));
}

TEST(UaServices, DateTimeCountsTicksFrom1601) {
  EXPECT_EQ(ua::to_ua_datetime(0), 116444736000000000);
  EXPECT_EQ(ua::to_ua_datetime(1), 116444736000010000);
}

TEST(UaServices, OpenSecureChannelResponseFromNodeOpcua) {
  auto response =
      ua::decode_open_secure_channel_response(body_of("open_secure_channel_response.bin"));
  EXPECT_EQ(response.header.request_handle, 1u);
  EXPECT_EQ(response.header.service_result, 0u);
  EXPECT_EQ(response.token.channel_id, 5u);
  EXPECT_EQ(response.token.token_id, 1u);
  EXPECT_EQ(response.token.revised_lifetime_ms, 60000u);
}

TEST(UaServices, FindServersResponseFromNodeOpcuaLds) {
  auto response = ua::decode_find_servers_response(body_of("find_servers_response_lds.bin"));
  ASSERT_EQ(response.servers.size(), 3u);
  const auto& lds = response.servers[0];
  EXPECT_EQ(lds.application_uri, "urn:dowser:peers:PeersLDS");
  EXPECT_EQ(lds.application_type, ApplicationType::discovery_server);
  EXPECT_EQ(lds.application_name, (ua::LocalizedText{"en", "PeersLDS"}));
  EXPECT_EQ(lds.discovery_urls, std::vector<std::string>{"opc.tcp://127.0.0.1:4840"});
  const auto& a = response.servers[1];
  EXPECT_EQ(a.application_uri, "urn:dowser:peers:A");
  EXPECT_EQ(a.product_uri, "NodeOPCUA-Server");
  EXPECT_EQ(a.application_type, ApplicationType::server);
  EXPECT_EQ(a.application_name.text, "A");
  EXPECT_EQ(a.discovery_urls, std::vector<std::string>{"opc.tcp://127.0.0.1:4841"});
  EXPECT_EQ(response.servers[2].discovery_urls,
            std::vector<std::string>{"opc.tcp://127.0.0.1:4842"});
}

TEST(UaServices, FindServersResponseFromNodeOpcuaServerNamesItself) {
  auto response = ua::decode_find_servers_response(body_of("find_servers_response_server.bin"));
  ASSERT_EQ(response.servers.size(), 1u);
  EXPECT_EQ(response.servers[0].application_uri, "urn:dowser:peers:A");
}

TEST(UaServices, GetEndpointsResponseFromNodeOpcua) {
  auto response = ua::decode_get_endpoints_response(body_of("get_endpoints_response.bin"));
  ASSERT_EQ(response.endpoints.size(), 7u);
  const auto& none = response.endpoints[0];
  EXPECT_EQ(none.endpoint_url, "opc.tcp://127.0.0.1:4841");
  EXPECT_EQ(none.security_mode, MessageSecurityMode::none);
  EXPECT_EQ(none.security_policy_uri, "http://opcfoundation.org/UA/SecurityPolicy#None");
  EXPECT_EQ(none.server.application_uri, "urn:dowser:peers:A");
  EXPECT_EQ(none.transport_profile_uri,
            "http://opcfoundation.org/UA-Profile/Transport/uatcp-uasc-uabinary");
  EXPECT_EQ(response.endpoints[1].security_mode, MessageSecurityMode::sign);
  EXPECT_EQ(response.endpoints[1].security_policy_uri,
            "http://opcfoundation.org/UA/SecurityPolicy#Basic256Sha256");
  EXPECT_EQ(response.endpoints[6].security_mode, MessageSecurityMode::sign_and_encrypt);
}

TEST(UaServices, EveryTruncationOfARealResponseIsADecodeError) {
  ua::Bytes body = body_of("get_endpoints_response.bin");
  for (size_t length = 0; length < body.size(); ++length)
    EXPECT_THROW(ua::decode_get_endpoints_response(ua::ByteView(body).first(length)), DecodeError)
        << "prefix of " << length << " bytes";
}

TEST(UaServices, TrailingBytesAreRefused) {
  ua::Bytes body = body_of("find_servers_response_server.bin");
  body.push_back(0);
  EXPECT_THROW(ua::decode_find_servers_response(body), DecodeError);
}

TEST(UaServices, AnotherResponseTypeIsRefused) {
  EXPECT_THROW(ua::decode_get_endpoints_response(body_of("find_servers_response_server.bin")),
               DecodeError);
}

TEST(UaServices, ServiceFaultAndBadResultsCarryTheirStatus) {
  ua::ResponseHeader fault{0, 7, 0x800b0000};
  try {
    ua::decode_find_servers_response(ua::encode_service_fault(fault));
    FAIL() << "a ServiceFault must throw";
  } catch (const ua::StatusError& e) {
    EXPECT_EQ(e.status(), 0x800b0000u);
    EXPECT_NE(std::string(e.what()).find("BadServiceUnsupported"), std::string::npos);
  }
  ua::FindServersResponse bad;
  bad.header.service_result = 0x80020000;
  EXPECT_THROW(ua::decode_find_servers_response(ua::encode_find_servers_response(bad)),
               ua::StatusError);
  EXPECT_THROW(ua::decode_find_servers_response(ua::encode_service_fault({})), DecodeError)
      << "a ServiceFault with a Good result is nonsense";
}

TEST(UaServices, UnknownEnumerationValuesAreRefused) {
  ua::FindServersResponse response;
  response.servers.push_back({});
  response.servers[0].application_type = static_cast<ApplicationType>(9);
  EXPECT_THROW(ua::decode_find_servers_response(ua::encode_find_servers_response(response)),
               DecodeError);
}

TEST(UaServices, ArraysOfTheSmallestElementsPassTheCountCheck) {
  // Every string empty: the count check must not assume bigger elements.
  ua::FindServersResponse found;
  found.servers.resize(3);
  EXPECT_EQ(ua::decode_find_servers_response(ua::encode_find_servers_response(found)).servers,
            found.servers);
  ua::GetEndpointsResponse endpoints;
  endpoints.endpoints.resize(3);
  EXPECT_EQ(
      ua::decode_get_endpoints_response(ua::encode_get_endpoints_response(endpoints)).endpoints,
      endpoints.endpoints);
}

TEST(UaServices, ResponseEncodersRoundTrip) {
  ua::FindServersResponse found;
  found.header = {5, 9, 0};
  ua::ApplicationDescription app;
  app.application_uri = "urn:x";
  app.application_name = {"en", "X"};
  app.application_type = ApplicationType::client_and_server;
  app.discovery_urls = {"https://x", "opc.tcp://x:4840/p"};
  found.servers = {app, {}};
  auto decoded = ua::decode_find_servers_response(ua::encode_find_servers_response(found));
  EXPECT_EQ(decoded.header.request_handle, 9u);
  EXPECT_EQ(decoded.servers, found.servers);

  ua::GetEndpointsResponse endpoints;
  ua::EndpointDescription endpoint;
  endpoint.endpoint_url = "opc.tcp://x:4840/p";
  endpoint.server = app;
  endpoint.security_mode = MessageSecurityMode::sign;
  endpoint.security_policy_uri = "http://opcfoundation.org/UA/SecurityPolicy#Basic256Sha256";
  endpoint.security_level = 3;
  endpoints.endpoints = {endpoint};
  EXPECT_EQ(
      ua::decode_get_endpoints_response(ua::encode_get_endpoints_response(endpoints)).endpoints,
      endpoints.endpoints);

  ua::OpenSecureChannelResponse opened;
  opened.token = {11, 2, 3, 60000};
  auto reopened =
      ua::decode_open_secure_channel_response(ua::encode_open_secure_channel_response(opened));
  EXPECT_EQ(reopened.token.channel_id, 11u);
  EXPECT_EQ(reopened.token.token_id, 2u);
}

}  // namespace
}  // namespace opcua::test
