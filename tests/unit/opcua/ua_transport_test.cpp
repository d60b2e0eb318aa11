// UA-TCP messages and secure-conversation chunks (Part 6, 7.1 and 6.7).
#include "ua_transport.hpp"
#include "codec_test_support.hpp"
#include "ua_services.hpp"

namespace opcua::test {
namespace {

using ua::ChunkType;
using ua::DecodeError;
using ua::MessageType;

ua::TransportLimits limits(uint32_t receive, uint32_t send, uint32_t message, uint32_t chunks) {
  ua::TransportLimits l;
  l.receive_buffer_size = receive;
  l.send_buffer_size = send;
  l.max_message_size = message;
  l.max_chunk_count = chunks;
  return l;
}

TEST(UaTransport, HelloCarriesLimitsAndEndpointUrl) {
  std::string url = "opc.tcp://h:4840";
  ua::Bytes expected = concat({hex("48454c46 30000000 | 00000000 | 00000100 | 00000100 |"
                                   " 00004000 | 00040000 | 10000000"),
                               text_bytes(url)});
  EXPECT_EQ(ua::encode_hello(limits(65536, 65536, 4u << 20, 1024), url), expected);
  auto decoded = ua::decode_hello(ua::ByteView(expected).subspan(ua::kHeaderSize));
  EXPECT_EQ(decoded.endpoint_url, url);
  EXPECT_EQ(decoded.limits, limits(65536, 65536, 4u << 20, 1024));
}

TEST(UaTransport, HelloRefusesOverlongEndpointUrl) {
  EXPECT_THROW(ua::encode_hello({}, std::string(4097, 'x')), std::length_error);
}

TEST(UaTransport, AcknowledgeFromNodeOpcua) {
  ua::Bytes message = vector_file("acknowledge.bin");
  auto header = ua::decode_header(message);
  EXPECT_EQ(header.type, MessageType::acknowledge);
  EXPECT_EQ(header.size, message.size());
  auto ack = ua::decode_acknowledge(ua::ByteView(message).subspan(ua::kHeaderSize));
  EXPECT_EQ(ack, limits(65536, 65536, 4u << 20, 1024));
  EXPECT_EQ(ua::encode_acknowledge(ack), message);
}

TEST(UaTransport, HeaderRefusesUnknownTypesChunkedTransportMessagesAndTinySizes) {
  EXPECT_THROW(ua::decode_header(hex("58595a46 08000000")), DecodeError) << "XYZ";
  EXPECT_THROW(ua::decode_header(hex("48545450 2f312e31")), DecodeError) << "HTTP/1.1";
  EXPECT_THROW(ua::decode_header(hex("41434b43 1c000000")), DecodeError) << "ACK as chunk C";
  EXPECT_THROW(ua::decode_header(hex("4d534758 18000000")), DecodeError) << "chunk type X";
  EXPECT_THROW(ua::decode_header(hex("4d534746 07000000")), DecodeError) << "size 7";
  EXPECT_THROW(ua::decode_header(hex("4d5347")), DecodeError) << "truncated";
}

TEST(UaTransport, ErrorMessageRoundTrips) {
  ua::Bytes message = ua::encode_error_message(0x80830000, "bad url");
  EXPECT_EQ(message, concat({hex("45525246 17000000 00008380 07000000"), text_bytes("bad url")}));
  auto error = ua::decode_error_message(ua::ByteView(message).subspan(ua::kHeaderSize));
  EXPECT_EQ(error.status, 0x80830000u);
  EXPECT_EQ(error.reason, "bad url");
  EXPECT_EQ(ua::status_text(error.status), "BadTcpEndpointUrlInvalid (0x80830000)");
  EXPECT_EQ(ua::status_text(0x80ff0000), "0x80ff0000");
}

TEST(UaTransport, AcknowledgeLimitsAreChecked) {
  auto hello = limits(65536, 65536, 0, 0);
  EXPECT_NO_THROW(ua::check_acknowledge(hello, limits(8192, 65536, 0, 0)));
  EXPECT_THROW(ua::check_acknowledge(hello, limits(8191, 65536, 0, 0)), DecodeError)
      << "receive buffer below the minimum";
  EXPECT_THROW(ua::check_acknowledge(hello, limits(65536, 65537, 0, 0)), DecodeError)
      << "server would send chunks larger than we accept";
  EXPECT_THROW(ua::check_acknowledge(hello, limits(65536, 100, 0, 0)), DecodeError);
}

TEST(UaTransport, OpenChannelChunkFromNodeOpcua) {
  ua::Bytes message = vector_file("open_secure_channel_response.bin");
  ua::Chunk chunk = ua::decode_chunk(message);
  EXPECT_EQ(chunk.type, MessageType::open_channel);
  EXPECT_EQ(chunk.chunk_type, ChunkType::final_chunk);
  EXPECT_EQ(chunk.channel_id, 5u);
  EXPECT_EQ(chunk.sequence_number, 1u);
  EXPECT_EQ(chunk.request_id, 1u);
  EXPECT_EQ(ua::peek_type_id(chunk.body), ua::standard_node_id(449));
}

TEST(UaTransport, OpenChannelChunkMustUsePolicyNoneWithoutCertificates) {
  auto opn = [](const std::string& policy, const std::string& certificate) {
    ua::Writer out;
    out.raw(std::string_view("OPNF"));
    out.uint32(0);
    out.uint32(0);  // channel id
    out.string(policy);
    if (certificate.empty()) {
      out.null_string();
    } else {
      out.string(certificate);
    }
    out.null_string();
    out.uint32(1);
    out.uint32(1);
    out.patch_uint32(4, static_cast<uint32_t>(out.size()));
    return out.take();
  };
  EXPECT_NO_THROW(ua::decode_chunk(opn(std::string(ua::kSecurityPolicyNone), "")));
  EXPECT_THROW(ua::decode_chunk(opn("http://opcfoundation.org/UA/SecurityPolicy#Basic256", "")),
               DecodeError);
  EXPECT_THROW(ua::decode_chunk(opn(std::string(ua::kSecurityPolicyNone), "cert")), DecodeError);
}

TEST(UaTransport, ChunkSizeMustMatchItsHeader) {
  ua::Bytes message = vector_file("find_servers_response_lds.bin");
  ua::Bytes longer = message;
  longer.push_back(0);
  EXPECT_THROW(ua::decode_chunk(longer), DecodeError);
  EXPECT_THROW(ua::decode_chunk(ua::ByteView(message).first(message.size() - 1)), DecodeError);
  EXPECT_THROW(ua::decode_chunk(vector_file("acknowledge.bin")), DecodeError) << "not a chunk";
}

TEST(UaTransport, LargeBodiesAreSplitToThePeersReceiveBuffer) {
  ua::Bytes body(20000);
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<uint8_t>(i * 7);
  uint32_t sequence = 41;
  auto chunks =
      ua::encode_chunks({MessageType::message, 9, 3, 77}, body, limits(8192, 8192, 0, 0), sequence);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(sequence, 44u);
  ua::MessageAssembler assembler(0, 0);
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_LE(chunks[i].size(), 8192u);
    ua::Chunk chunk = ua::decode_chunk(chunks[i]);
    EXPECT_EQ(chunk.channel_id, 9u);
    EXPECT_EQ(chunk.token_id, 3u);
    EXPECT_EQ(chunk.request_id, 77u);
    EXPECT_EQ(chunk.sequence_number, 41u + i);
    EXPECT_EQ(chunk.chunk_type,
              i + 1 < chunks.size() ? ChunkType::intermediate : ChunkType::final_chunk);
    EXPECT_EQ(assembler.add(chunk), i + 1 == chunks.size());
  }
  EXPECT_EQ(assembler.take(), body);
}

TEST(UaTransport, SmallBodyIsOneChunkWithExactLayout) {
  uint32_t sequence = 1;
  auto chunks = ua::encode_chunks({MessageType::close_channel, 5, 1, 3}, hex("0100c401"),
                                  limits(8192, 8192, 0, 0), sequence);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0], hex("434c4f46 1c000000 05000000 01000000 01000000 03000000 0100c401"));
}

TEST(UaTransport, PeerMessageSizeAndChunkCountLimitsAreHonoured) {
  ua::Bytes body(20000);
  uint32_t sequence = 1;
  EXPECT_THROW(ua::encode_chunks({}, body, limits(8192, 8192, 19999, 0), sequence),
               std::length_error);
  EXPECT_THROW(ua::encode_chunks({}, body, limits(8192, 8192, 0, 2), sequence), std::length_error);
  EXPECT_EQ(ua::encode_chunks({}, body, limits(8192, 8192, 20000, 3), sequence).size(), 3u);
}

TEST(UaTransport, AssemblerEnforcesOurLimits) {
  ua::Bytes body(20000);
  uint32_t sequence = 1;
  auto chunks = ua::encode_chunks({}, body, limits(8192, 8192, 0, 0), sequence);
  ua::MessageAssembler by_count(0, 2);
  EXPECT_FALSE(by_count.add(ua::decode_chunk(chunks[0])));
  EXPECT_FALSE(by_count.add(ua::decode_chunk(chunks[1])));
  EXPECT_THROW(by_count.add(ua::decode_chunk(chunks[2])), DecodeError);
  ua::MessageAssembler by_size(10000, 0);
  EXPECT_FALSE(by_size.add(ua::decode_chunk(chunks[0])));
  EXPECT_THROW(by_size.add(ua::decode_chunk(chunks[1])), DecodeError);
}

TEST(UaTransport, AbortChunkRaisesItsStatus) {
  ua::Writer out;
  out.uint32(0x80b90000);
  out.string("too large");
  ua::Chunk abort;
  abort.chunk_type = ChunkType::abort;
  abort.body = out.bytes();
  ua::MessageAssembler assembler(0, 0);
  try {
    assembler.add(abort);
    FAIL() << "an abort chunk must throw";
  } catch (const ua::StatusError& e) {
    EXPECT_EQ(e.status(), 0x80b90000u);
    EXPECT_NE(std::string(e.what()).find("too large"), std::string::npos);
  }
}

TEST(UaTransport, TwoChunksFromNodeOpcuaMakeOneGetEndpointsResponse) {
  ua::MessageAssembler assembler(4u << 20, 1024);
  ua::Bytes first = vector_file("get_endpoints_response_chunk1.bin");
  ua::Bytes second = vector_file("get_endpoints_response_chunk2.bin");
  EXPECT_EQ(first.size(), 8192u) << "node-opcua filled our 8192-byte receive buffer";
  ua::Chunk one = ua::decode_chunk(first);
  ua::Chunk two = ua::decode_chunk(second);
  EXPECT_EQ(two.sequence_number, one.sequence_number + 1);
  EXPECT_FALSE(assembler.add(one));
  EXPECT_TRUE(assembler.add(two));
  auto response = ua::decode_get_endpoints_response(assembler.take());
  EXPECT_EQ(response.endpoints.size(), 7u);
}

}  // namespace
}  // namespace opcua::test
