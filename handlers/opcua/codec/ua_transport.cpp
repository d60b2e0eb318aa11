#include "ua_transport.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <utility>

namespace opcua::ua {
namespace {

struct StatusName {
  uint32_t code;
  const char* name;
};

// The codes a discovery client can meet (Part 6, 7.1.5, and Part 4, 7.34).
constexpr std::array kStatusNames = {
    StatusName{0x80010000, "BadUnexpectedError"},
    StatusName{0x80020000, "BadInternalError"},
    StatusName{0x80050000, "BadCommunicationError"},
    StatusName{0x80070000, "BadDecodingError"},
    StatusName{0x80080000, "BadEncodingLimitsExceeded"},
    StatusName{0x800a0000, "BadTimeout"},
    StatusName{0x800b0000, "BadServiceUnsupported"},
    StatusName{0x800c0000, "BadShutdown"},
    StatusName{0x800e0000, "BadServerHalted"},
    StatusName{0x800f0000, "BadNothingToDo"},
    StatusName{0x80100000, "BadTooManyOperations"},
    StatusName{0x80130000, "BadSecurityChecksFailed"},
    StatusName{0x80220000, "BadSecureChannelIdInvalid"},
    StatusName{0x80550000, "BadSecurityPolicyRejected"},
    StatusName{0x807d0000, "BadTcpServerTooBusy"},
    StatusName{0x807e0000, "BadTcpMessageTypeInvalid"},
    StatusName{0x807f0000, "BadTcpSecureChannelUnknown"},
    StatusName{0x80800000, "BadTcpMessageTooLarge"},
    StatusName{0x80810000, "BadTcpNotEnoughResources"},
    StatusName{0x80820000, "BadTcpInternalError"},
    StatusName{0x80830000, "BadTcpEndpointUrlInvalid"},
    StatusName{0x80860000, "BadSecureChannelClosed"},
    StatusName{0x80ab0000, "BadInvalidArgument"},
    StatusName{0x80ac0000, "BadConnectionRejected"},
    StatusName{0x80b80000, "BadRequestTooLarge"},
    StatusName{0x80b90000, "BadResponseTooLarge"},
    StatusName{0x80be0000, "BadProtocolVersionUnsupported"},
};

constexpr std::array<std::pair<MessageType, std::string_view>, 7> kWireNames = {{
    {MessageType::hello, "HEL"},
    {MessageType::acknowledge, "ACK"},
    {MessageType::error, "ERR"},
    {MessageType::reverse_hello, "RHE"},
    {MessageType::open_channel, "OPN"},
    {MessageType::close_channel, "CLO"},
    {MessageType::message, "MSG"},
}};

// Bytes of a chunk before its body: header, channel id, security header
// (symmetric: token id), sequence header.
constexpr size_t kSymmetricPrefixSize = kHeaderSize + 4 + 4 + 8;

std::string hex32(uint32_t value) {
  char text[11];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

bool is_secure_conversation(MessageType type) {
  return type == MessageType::open_channel || type == MessageType::close_channel ||
         type == MessageType::message;
}

// The fixed part of a chunk; the body and the size come later.
void write_chunk_prefix(Writer& out, const OutgoingMessage& message, ChunkType chunk_type,
                        uint32_t sequence_number) {
  out.raw(wire_name(message.type));
  out.byte(static_cast<uint8_t>(chunk_type));
  out.uint32(0);  // message size, patched when the chunk is complete
  out.uint32(message.channel_id);
  if (message.type == MessageType::open_channel) {
    out.string(kSecurityPolicyNone);
    out.null_string();  // sender certificate
    out.null_string();  // receiver certificate thumbprint
  } else {
    out.uint32(message.token_id);
  }
  out.uint32(sequence_number);
  out.uint32(message.request_id);
}

size_t chunk_prefix_size(const OutgoingMessage& message) {
  if (message.type != MessageType::open_channel) return kSymmetricPrefixSize;
  return kHeaderSize + 4 + (4 + kSecurityPolicyNone.size()) + 4 + 4 + 8;
}

TransportLimits read_limits(Reader& in) {
  TransportLimits limits;
  limits.protocol_version = in.uint32();
  limits.receive_buffer_size = in.uint32();
  limits.send_buffer_size = in.uint32();
  limits.max_message_size = in.uint32();
  limits.max_chunk_count = in.uint32();
  return limits;
}

void write_limits(Writer& out, const TransportLimits& limits) {
  out.uint32(limits.protocol_version);
  out.uint32(limits.receive_buffer_size);
  out.uint32(limits.send_buffer_size);
  out.uint32(limits.max_message_size);
  out.uint32(limits.max_chunk_count);
}

// Starts a UA-TCP message (HEL, ACK, ERR) whose size is patched by finish().
Writer start_message(MessageType type) {
  Writer out;
  out.raw(wire_name(type));
  out.byte(static_cast<uint8_t>(ChunkType::final_chunk));
  out.uint32(0);
  return out;
}

Bytes finish(Writer& out) {
  out.patch_uint32(4, static_cast<uint32_t>(out.size()));
  return out.take();
}

void read_asymmetric_header(Reader& in) {
  std::string policy = in.string();
  if (policy != kSecurityPolicyNone)
    throw DecodeError("OPN chunk uses security policy '" + policy + "', expected None");
  size_t at = in.position();
  if (!in.string().empty() || !in.string().empty())
    throw DecodeError("OPN chunk with SecurityPolicy None carries a certificate (offset " +
                      std::to_string(at) + ")");
}

}  // namespace

StatusError::StatusError(uint32_t status, const std::string& context)
    : std::runtime_error(context + ": " + status_text(status)), status_(status) {}

std::string status_text(uint32_t status) {
  // The low 16 bits are flags; the code is the high half.
  uint32_t code = status & 0xffff0000u;
  for (const auto& known : kStatusNames)
    if (known.code == code) return std::string(known.name) + " (" + hex32(status) + ")";
  return hex32(status);
}

std::string_view wire_name(MessageType type) {
  for (const auto& [known, name] : kWireNames)
    if (known == type) return name;
  return "???";
}

MessageHeader decode_header(ByteView header) {
  Reader in(header);
  ByteView name = in.raw(3);
  std::string_view text(reinterpret_cast<const char*>(name.data()), name.size());
  auto found = std::find_if(kWireNames.begin(), kWireNames.end(),
                            [&](const auto& entry) { return entry.second == text; });
  if (found == kWireNames.end()) throw DecodeError("unknown message type");
  MessageHeader decoded;
  decoded.type = found->first;
  uint8_t chunk = in.byte();
  if (chunk != 'F' && chunk != 'C' && chunk != 'A')
    throw DecodeError("unknown chunk type " + std::to_string(chunk));
  decoded.chunk_type = static_cast<ChunkType>(chunk);
  if (decoded.chunk_type != ChunkType::final_chunk && !is_secure_conversation(decoded.type))
    throw DecodeError(std::string(wire_name(decoded.type)) + " message cannot be chunked");
  decoded.size = in.uint32();
  if (decoded.size < kHeaderSize)
    throw DecodeError("message size " + std::to_string(decoded.size) + " is below the header's");
  return decoded;
}

Bytes encode_hello(const TransportLimits& client, std::string_view endpoint_url) {
  if (endpoint_url.size() > kMaxEndpointUrlLength)
    throw std::length_error("endpoint URL longer than " + std::to_string(kMaxEndpointUrlLength) +
                            " bytes");
  Writer out = start_message(MessageType::hello);
  write_limits(out, client);
  out.string(endpoint_url);
  return finish(out);
}

Bytes encode_acknowledge(const TransportLimits& server) {
  Writer out = start_message(MessageType::acknowledge);
  write_limits(out, server);
  return finish(out);
}

Bytes encode_error_message(uint32_t status, std::string_view reason) {
  Writer out = start_message(MessageType::error);
  out.uint32(status);
  out.string(reason);
  return finish(out);
}

HelloMessage decode_hello(ByteView body) {
  Reader in(body);
  HelloMessage hello;
  hello.limits = read_limits(in);
  hello.endpoint_url = in.string();
  if (hello.endpoint_url.size() > kMaxEndpointUrlLength)
    throw DecodeError("Hello endpoint URL longer than " + std::to_string(kMaxEndpointUrlLength));
  in.expect_end("Hello");
  return hello;
}

TransportLimits decode_acknowledge(ByteView body) {
  Reader in(body);
  TransportLimits limits = read_limits(in);
  in.expect_end("Acknowledge");
  return limits;
}

ErrorMessage decode_error_message(ByteView body) {
  Reader in(body);
  ErrorMessage error;
  error.status = in.uint32();
  error.reason = in.string();
  in.expect_end("Error message");
  return error;
}

void check_acknowledge(const TransportLimits& hello, const TransportLimits& ack) {
  if (ack.receive_buffer_size < kMinBufferSize)
    throw DecodeError("Acknowledge receive buffer " + std::to_string(ack.receive_buffer_size) +
                      " is below " + std::to_string(kMinBufferSize));
  if (ack.send_buffer_size < kMinBufferSize || ack.send_buffer_size > hello.receive_buffer_size)
    throw DecodeError("Acknowledge send buffer " + std::to_string(ack.send_buffer_size) +
                      " is outside " + std::to_string(kMinBufferSize) + ".." +
                      std::to_string(hello.receive_buffer_size));
}

Chunk decode_chunk(ByteView bytes) {
  MessageHeader header = decode_header(bytes.first(std::min(bytes.size(), kHeaderSize)));
  if (!is_secure_conversation(header.type))
    throw DecodeError(std::string(wire_name(header.type)) + " is not a secure-conversation chunk");
  if (header.size != bytes.size())
    throw DecodeError("chunk header says " + std::to_string(header.size) + " bytes, got " +
                      std::to_string(bytes.size()));
  Reader in(bytes.subspan(kHeaderSize));
  Chunk chunk;
  chunk.type = header.type;
  chunk.chunk_type = header.chunk_type;
  chunk.channel_id = in.uint32();
  if (chunk.type == MessageType::open_channel) {
    read_asymmetric_header(in);
  } else {
    chunk.token_id = in.uint32();
  }
  chunk.sequence_number = in.uint32();
  chunk.request_id = in.uint32();
  chunk.body = in.raw(in.remaining());
  return chunk;
}

std::vector<Bytes> encode_chunks(const OutgoingMessage& message, ByteView body,
                                 const TransportLimits& peer, uint32_t& next_sequence_number) {
  if (peer.max_message_size != 0 && body.size() > peer.max_message_size)
    throw std::length_error("message of " + std::to_string(body.size()) +
                            " bytes exceeds the peer's limit of " +
                            std::to_string(peer.max_message_size));
  size_t prefix = chunk_prefix_size(message);
  if (peer.receive_buffer_size <= prefix)
    throw std::length_error("peer receive buffer too small for a chunk");
  size_t room = peer.receive_buffer_size - prefix;
  size_t count = std::max<size_t>(1, (body.size() + room - 1) / room);
  if (peer.max_chunk_count != 0 && count > peer.max_chunk_count)
    throw std::length_error("message needs " + std::to_string(count) +
                            " chunks, the peer accepts " + std::to_string(peer.max_chunk_count));
  std::vector<Bytes> chunks;
  for (size_t i = 0; i < count; ++i) {
    bool last = i + 1 == count;
    Writer out;
    write_chunk_prefix(out, message, last ? ChunkType::final_chunk : ChunkType::intermediate,
                       next_sequence_number++);
    out.raw(body.subspan(i * room, std::min(room, body.size() - i * room)));
    chunks.push_back(finish(out));
  }
  return chunks;
}

bool MessageAssembler::add(const Chunk& chunk) {
  if (chunk.chunk_type == ChunkType::abort) {
    ErrorMessage error = decode_error_message(chunk.body);
    throw StatusError(error.status, "peer aborted the message: " + error.reason);
  }
  ++chunks_;
  if (max_chunk_count_ != 0 && chunks_ > max_chunk_count_)
    throw DecodeError("message has more than " + std::to_string(max_chunk_count_) + " chunks");
  if (max_message_size_ != 0 && body_.size() + chunk.body.size() > max_message_size_)
    throw DecodeError("message exceeds " + std::to_string(max_message_size_) + " bytes");
  body_.insert(body_.end(), chunk.body.begin(), chunk.body.end());
  return chunk.chunk_type == ChunkType::final_chunk;
}

Bytes MessageAssembler::take() noexcept {
  Bytes body = std::move(body_);
  body_.clear();
  chunks_ = 0;
  return body;
}

}  // namespace opcua::ua
