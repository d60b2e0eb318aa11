// OPC UA Connection Protocol (UA-TCP, Part 6, 7.1) and Secure Conversation
// chunks (UA-SC, Part 6, 6.7) with SecurityPolicy None: message headers,
// Hello / Acknowledge / Error, chunk encoding with the peer's limits, and
// reassembly of chunked messages within our own limits.
#ifndef DOWSER_HANDLERS_OPCUA_CODEC_UA_TRANSPORT_HPP
#define DOWSER_HANDLERS_OPCUA_CODEC_UA_TRANSPORT_HPP

#include "ua_binary.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace opcua::ua {

// A Bad status a peer sent: an Error message, an abort chunk, a ServiceFault
// or a Bad service result.
class StatusError : public std::runtime_error {
 public:
  StatusError(uint32_t status, const std::string& context);
  uint32_t status() const noexcept { return status_; }

 private:
  uint32_t status_;
};

// "BadTimeout (0x800a0000)" for the codes discovery meets, else the hex.
std::string status_text(uint32_t status);
constexpr bool is_bad(uint32_t status) { return (status & 0x80000000u) != 0; }

enum class MessageType : uint8_t {
  hello,          // HEL
  acknowledge,    // ACK
  error,          // ERR
  reverse_hello,  // RHE
  open_channel,   // OPN
  close_channel,  // CLO
  message,        // MSG
};
std::string_view wire_name(MessageType type);

enum class ChunkType : char { final_chunk = 'F', intermediate = 'C', abort = 'A' };

inline constexpr size_t kHeaderSize = 8;
inline constexpr uint32_t kMinBufferSize = 8192;  // the smallest buffer a peer may announce
inline constexpr uint32_t kProtocolVersion = 0;
inline constexpr size_t kMaxEndpointUrlLength = 4096;
inline constexpr std::string_view kSecurityPolicyNone =
    "http://opcfoundation.org/UA/SecurityPolicy#None";

struct MessageHeader {
  MessageType type = MessageType::hello;
  ChunkType chunk_type = ChunkType::final_chunk;
  uint32_t size = 0;  // the whole message, header included
};

// Decodes the 8 bytes that start every message. Throws DecodeError on an
// unknown message or chunk type, or a size smaller than the header.
MessageHeader decode_header(ByteView header);

// What Hello and Acknowledge negotiate. 0 means "no limit" for the last two.
struct TransportLimits {
  uint32_t protocol_version = kProtocolVersion;
  uint32_t receive_buffer_size = 0;  // largest chunk the sender accepts
  uint32_t send_buffer_size = 0;     // largest chunk the sender will send
  uint32_t max_message_size = 0;     // largest message body the sender accepts
  uint32_t max_chunk_count = 0;      // most chunks per message the sender accepts
  friend bool operator==(const TransportLimits&, const TransportLimits&) = default;
};

// Whole messages, header included.
Bytes encode_hello(const TransportLimits& client, std::string_view endpoint_url);
Bytes encode_acknowledge(const TransportLimits& server);
Bytes encode_error_message(uint32_t status, std::string_view reason);

// Bodies, after the 8-byte header.
struct HelloMessage {
  TransportLimits limits;
  std::string endpoint_url;
};
HelloMessage decode_hello(ByteView body);
TransportLimits decode_acknowledge(ByteView body);
struct ErrorMessage {
  uint32_t status = 0;
  std::string reason;
};
ErrorMessage decode_error_message(ByteView body);

// The limits the server's Acknowledge sets for us, checked against the ones
// our Hello announced (Part 6, 7.1.2.4). Throws DecodeError when broken.
void check_acknowledge(const TransportLimits& hello, const TransportLimits& ack);

// One decoded secure-conversation chunk; body borrows from the chunk bytes.
struct Chunk {
  MessageType type = MessageType::message;  // open_channel, close_channel or message
  ChunkType chunk_type = ChunkType::final_chunk;
  uint32_t channel_id = 0;
  uint32_t token_id = 0;  // MSG and CLO only (symmetric security header)
  uint32_t sequence_number = 0;
  uint32_t request_id = 0;
  ByteView body;
};

// Decodes a whole chunk (header included). An OPN chunk must name
// SecurityPolicy None and carry no certificates.
Chunk decode_chunk(ByteView chunk);

// What every chunk of one outgoing message shares.
struct OutgoingMessage {
  MessageType type = MessageType::message;  // open_channel, close_channel or message
  uint32_t channel_id = 0;
  uint32_t token_id = 0;
  uint32_t request_id = 0;
};

// Splits body into chunks that fit the peer's receive buffer, numbered from
// next_sequence_number (advanced past the last one). Throws
// std::length_error when the peer's message size or chunk count forbids it.
std::vector<Bytes> encode_chunks(const OutgoingMessage& message, ByteView body,
                                 const TransportLimits& peer, uint32_t& next_sequence_number);

// Joins the chunks of one response within our limits (0: no limit).
class MessageAssembler {
 public:
  MessageAssembler(size_t max_message_size, size_t max_chunk_count)
      : max_message_size_(max_message_size), max_chunk_count_(max_chunk_count) {}

  // Adds one chunk's body. Returns true once the final chunk has come.
  // Throws StatusError for an abort chunk, DecodeError past a limit.
  bool add(const Chunk& chunk);
  Bytes take() noexcept;

 private:
  size_t max_message_size_;
  size_t max_chunk_count_;
  size_t chunks_ = 0;
  Bytes body_;
};

}  // namespace opcua::ua

#endif  // DOWSER_HANDLERS_OPCUA_CODEC_UA_TRANSPORT_HPP
