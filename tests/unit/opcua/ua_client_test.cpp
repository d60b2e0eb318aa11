// The UA-TCP client against in-process peers on 127.0.0.1: the exchange,
// chunked answers, negotiated limits, and every way a peer can misbehave.
#include "ua_client.hpp"
#include "ua_test_peer.hpp"

#include <gtest/gtest.h>

#include <future>

namespace opcua::test {
namespace {

using namespace std::chrono_literals;
using ua::ApplicationType;
using ua::MessageSecurityMode;

ClientOptions quick_options() {
  ClientOptions options;
  options.connect_timeout = 2s;
  options.request_timeout = 2s;
  return options;
}

// Throws whatever find_servers throws, as its message.
std::string find_servers_error(const std::string& url, const ClientOptions& options) {
  Cancellation cancellation;
  try {
    find_servers(url, options, cancellation);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// A peer that reads the Hello, then runs `then` with the connection.
TcpTestPeer::Serve after_hello(std::function<void(PeerConnection&)> then) {
  return [then](PeerConnection& connection) {
    if (connection.read_message()) then(connection);
  };
}

TEST(UaClient, FindServersAndGetEndpointsOverOneChannelEach) {
  FakeServerConfig config;
  config.servers = {application("A", ApplicationType::server, {"opc.tcp://127.0.0.1:1/a"}),
                    application("L", ApplicationType::discovery_server, {})};
  config.endpoints = endpoints_for(
      {{MessageSecurityMode::none, "None"}, {MessageSecurityMode::sign, "Basic256Sha256"}});
  FakeUaServer server(config);
  Cancellation cancellation;
  EXPECT_EQ(find_servers(server.url(), quick_options(), cancellation), config.servers);
  EXPECT_EQ(get_endpoints(server.url(), quick_options(), cancellation), config.endpoints);
  EXPECT_TRUE(server.peer().wait_closed(2, 5s)) << "each call closes its connection";
  EXPECT_EQ(server.close_requests(), 2u) << "with a CloseSecureChannel first";

  auto hellos = server.hellos();
  ASSERT_EQ(hellos.size(), 2u);
  EXPECT_EQ(hellos[0].endpoint_url, server.url());
  EXPECT_EQ(hellos[0].limits.receive_buffer_size, 65536u);
  EXPECT_EQ(hellos[0].limits.max_message_size, 4u << 20);
  EXPECT_EQ(hellos[0].limits.max_chunk_count, 1024u);
}

TEST(UaClient, ChunkedAnswersAreReassembled) {
  FakeServerConfig config;
  // About 40 KB of endpoints, sent in chunks of at most 8192 bytes.
  for (int i = 0; i < 100; ++i)
    config.endpoints.push_back(endpoints_for({{MessageSecurityMode::sign,
                                               std::string(300, static_cast<char>('a' + i % 26))}})
                                   .front());
  config.send_buffer_size = 8192;
  FakeUaServer server(config);
  Cancellation cancellation;
  UaChannel channel(server.url(), quick_options(), cancellation);
  auto body = channel.call([&](const ua::RequestHeader& header) {
    return ua::encode_get_endpoints_request(header, server.url());
  });
  EXPECT_EQ(ua::decode_get_endpoints_response(body).endpoints, config.endpoints);
  EXPECT_GE(channel.last_response().chunks, 5u);
  EXPECT_EQ(channel.server_limits().send_buffer_size, 8192u);
}

TEST(UaClient, ASmallReceiveBufferIsAnnouncedAndHonoured) {
  FakeServerConfig config;
  config.endpoints = endpoints_for({{MessageSecurityMode::none, std::string(20000, 'x')}});
  FakeUaServer server(config);
  ClientOptions options = quick_options();
  options.receive_buffer_size = 8192;
  Cancellation cancellation;
  EXPECT_EQ(get_endpoints(server.url(), options, cancellation), config.endpoints);
  EXPECT_EQ(server.hellos().at(0).limits.receive_buffer_size, 8192u);
}

TEST(UaClient, AnAnswerOverOurMessageLimitIsRefused) {
  FakeServerConfig config;
  config.endpoints = endpoints_for({{MessageSecurityMode::none, std::string(100000, 'x')}});
  FakeUaServer server(config);
  ClientOptions options = quick_options();
  options.max_message_size = 65536;
  Cancellation cancellation;
  EXPECT_THROW(get_endpoints(server.url(), options, cancellation), ua::DecodeError);
}

TEST(UaClient, ConnectionRefusedIsATransportError) {
  uint16_t port = 0;
  {
    TcpTestPeer closed_again([](PeerConnection&) {});
    port = closed_again.port();
  }
  std::string error =
      find_servers_error("opc.tcp://127.0.0.1:" + std::to_string(port), quick_options());
  EXPECT_NE(error.find("refused"), std::string::npos) << error;
}

TEST(UaClient, AnUnresolvableHostIsATransportError) {
  std::string error =
      find_servers_error("opc.tcp://" + kNameNeverResolved + ":4840", quick_options());
  EXPECT_NE(error.find("cannot resolve"), std::string::npos) << error;
}

TEST(UaClient, ASilentPeerTimesOut) {
  TcpTestPeer silent(after_hello([](PeerConnection& c) { c.wait_for_client_close(); }));
  ClientOptions options = quick_options();
  options.request_timeout = 200ms;
  std::string error = find_servers_error(silent.url(), options);
  EXPECT_NE(error.find("timed out"), std::string::npos) << error;
}

TEST(UaClient, CancellationEndsAWaitAtOnce) {
  TcpTestPeer silent(after_hello([](PeerConnection& c) { c.wait_for_client_close(); }));
  ClientOptions options = quick_options();
  options.request_timeout = std::chrono::hours(1);  // only cancellation can end this wait
  Cancellation cancellation;
  auto call =
      std::async(std::launch::async, [&] { find_servers(silent.url(), options, cancellation); });
  ASSERT_TRUE(silent.wait_accepted(1, 5s));
  cancellation.cancel();
  EXPECT_THROW(call.get(), Cancelled);
}

TEST(UaClient, GarbageInsteadOfAcknowledgeIsADecodeError) {
  TcpTestPeer http(after_hello([](PeerConnection& c) {
    std::string reply = "HTTP/1.1 400 Bad Request\r\n\r\n";
    c.write(ua::ByteView(reinterpret_cast<const uint8_t*>(reply.data()), reply.size()));
  }));
  EXPECT_NE(find_servers_error(http.url(), quick_options()).find("unknown message type"),
            std::string::npos);
}

TEST(UaClient, AnErrorMessageCarriesItsStatusAndReason) {
  TcpTestPeer refusing(after_hello([](PeerConnection& c) {
    c.write(ua::encode_error_message(0x80830000, "no such endpoint"));
  }));
  std::string error = find_servers_error(refusing.url(), quick_options());
  EXPECT_NE(error.find("BadTcpEndpointUrlInvalid"), std::string::npos) << error;
  EXPECT_NE(error.find("no such endpoint"), std::string::npos) << error;
}

TEST(UaClient, AChunkLargerThanNegotiatedIsRefusedUnread) {
  TcpTestPeer oversized(after_hello([](PeerConnection& c) {
    ua::TransportLimits limits{0, 8192, 8192, 0, 0};
    c.write(ua::encode_acknowledge(limits));
    if (!c.read_message()) return;
    c.write(ua::Bytes{'O', 'P', 'N', 'F', 0x01, 0x20, 0x00, 0x00});  // claims 8193 bytes
    c.wait_for_client_close();
  }));
  std::string error = find_servers_error(oversized.url(), quick_options());
  EXPECT_NE(error.find("8193-byte chunk"), std::string::npos) << error;
}

TEST(UaClient, AnAcknowledgeWithImpossibleLimitsIsRefused) {
  TcpTestPeer tiny(after_hello([](PeerConnection& c) {
    c.write(ua::encode_acknowledge({0, 1024, 1024, 0, 0}));
    c.wait_for_client_close();
  }));
  EXPECT_NE(find_servers_error(tiny.url(), quick_options()).find("receive buffer"),
            std::string::npos);
}

// Answers Hello and OPN properly, then sends `reply(request)` to FindServers.
TcpTestPeer::Serve bad_find_servers_answer(
    std::function<std::vector<ua::Bytes>(const ua::Chunk&)> reply) {
  return [reply](PeerConnection& c) {
    if (!c.read_message()) return;
    c.write(ua::encode_acknowledge({0, 65536, 65536, 0, 0}));
    auto open = c.read_message();
    if (!open) return;
    ua::Chunk request = ua::decode_chunk(*open);
    uint32_t sequence = 1;
    ua::OutgoingMessage opened{ua::MessageType::open_channel, 7, 1, request.request_id};
    for (const auto& chunk : ua::encode_chunks(
             opened, ua::encode_open_secure_channel_response({{}, 0, {7, 1, 0, 60000}}),
             {0, 65536, 65536, 0, 0}, sequence))
      c.write(chunk);
    auto find = c.read_message();
    if (!find) return;
    for (const auto& bytes : reply(ua::decode_chunk(*find))) c.write(bytes);
    c.wait_for_client_close();
  };
}

ua::Bytes find_servers_chunk(uint32_t channel, uint32_t request_id, uint32_t sequence) {
  ua::OutgoingMessage message{ua::MessageType::message, channel, 1, request_id};
  return ua::encode_chunks(message, ua::encode_find_servers_response({}), {0, 65536, 65536, 0, 0},
                           sequence)
      .front();
}

TEST(UaClient, AnswersForAnotherRequestChannelOrOutOfSequenceAreRefused) {
  TcpTestPeer wrong_request(bad_find_servers_answer([](const ua::Chunk& request) {
    return std::vector<ua::Bytes>{find_servers_chunk(7, request.request_id + 1, 2)};
  }));
  EXPECT_NE(find_servers_error(wrong_request.url(), quick_options()).find("answers request"),
            std::string::npos);
  TcpTestPeer wrong_channel(bad_find_servers_answer([](const ua::Chunk& request) {
    return std::vector<ua::Bytes>{find_servers_chunk(8, request.request_id, 2)};
  }));
  EXPECT_NE(find_servers_error(wrong_channel.url(), quick_options()).find("secure channel 8"),
            std::string::npos);
  TcpTestPeer skipped(bad_find_servers_answer([](const ua::Chunk& request) {
    return std::vector<ua::Bytes>{find_servers_chunk(7, request.request_id, 3)};
  }));
  EXPECT_NE(find_servers_error(skipped.url(), quick_options()).find("sequence number 3"),
            std::string::npos);
}

TEST(UaClient, AServiceFaultCarriesItsStatus) {
  TcpTestPeer faulting(bad_find_servers_answer([](const ua::Chunk& request) {
    ua::OutgoingMessage message{ua::MessageType::message, 7, 1, request.request_id};
    uint32_t sequence = 2;
    return ua::encode_chunks(message, ua::encode_service_fault({0, 0, 0x800b0000}),
                             {0, 65536, 65536, 0, 0}, sequence);
  }));
  Cancellation cancellation;
  try {
    find_servers(faulting.url(), quick_options(), cancellation);
    FAIL() << "a ServiceFault must throw";
  } catch (const ua::StatusError& e) {
    EXPECT_EQ(e.status(), 0x800b0000u);
  }
}

TEST(UaClient, AnAbortChunkCarriesItsStatus) {
  TcpTestPeer aborting(bad_find_servers_answer([](const ua::Chunk& request) {
    ua::Writer error;
    error.uint32(0x80b90000);
    error.string("response too large");
    ua::Writer chunk;
    chunk.raw(std::string_view("MSGA"));
    chunk.uint32(0);
    chunk.uint32(7);
    chunk.uint32(1);
    chunk.uint32(2);
    chunk.uint32(request.request_id);
    chunk.raw(error.bytes());
    chunk.patch_uint32(4, static_cast<uint32_t>(chunk.size()));
    return std::vector<ua::Bytes>{chunk.take()};
  }));
  EXPECT_NE(find_servers_error(aborting.url(), quick_options()).find("response too large"),
            std::string::npos);
}

TEST(UaClient, HalfAChunkThenSilenceTimesOut) {
  TcpTestPeer hanging_up(bad_find_servers_answer([](const ua::Chunk& request) {
    ua::Bytes chunk = find_servers_chunk(7, request.request_id, 2);
    chunk.resize(chunk.size() / 2);
    return std::vector<ua::Bytes>{chunk};
  }));
  // The peer keeps its end open after half a chunk: the request times out.
  ClientOptions options = quick_options();
  options.request_timeout = 200ms;
  EXPECT_NE(find_servers_error(hanging_up.url(), options).find("timed out"), std::string::npos);
}

}  // namespace
}  // namespace opcua::test
