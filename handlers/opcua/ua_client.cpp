#include "ua_client.hpp"

#include "opcua_url.hpp"

#include <chrono>

namespace opcua {
namespace {

constexpr uint32_t kRequestedChannelLifetimeMs = 60000;
// The CloseSecureChannel message gets this long; the server never answers it.
constexpr std::chrono::milliseconds kCloseTimeout{500};

TcpStream connect_to(const std::string& endpoint_url, const ClientOptions& options,
                     const Cancellation& cancellation) {
  std::string why;
  auto url = parse_opc_tcp_url(endpoint_url, &why);
  if (!url) throw TransportError("'" + endpoint_url + "' " + why);
  return TcpStream::connect(url->host, url->port, Clock::now() + options.connect_timeout,
                            cancellation);
}

int64_t now_as_ua_datetime() {
  auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  return ua::to_ua_datetime(
      std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count());
}

ua::TransportLimits hello_limits(const ClientOptions& options) {
  if (options.receive_buffer_size < ua::kMinBufferSize)
    throw std::invalid_argument("receive buffer below " + std::to_string(ua::kMinBufferSize));
  ua::TransportLimits limits;
  limits.receive_buffer_size = options.receive_buffer_size;
  limits.send_buffer_size = options.receive_buffer_size;  // our requests are small
  limits.max_message_size = options.max_message_size;
  limits.max_chunk_count = options.max_chunk_count;
  return limits;
}

}  // namespace

UaChannel::UaChannel(const std::string& endpoint_url, const ClientOptions& options,
                     const Cancellation& cancellation)
    : endpoint_url_(endpoint_url),
      options_(options),
      client_limits_(hello_limits(options)),
      stream_(connect_to(endpoint_url, options, cancellation)) {
  say_hello();
  open_channel();
}

UaChannel::~UaChannel() { close_channel(); }

ua::RequestHeader UaChannel::next_request_header() {
  ua::RequestHeader header;
  header.timestamp = now_as_ua_datetime();
  header.request_handle = next_request_handle_++;
  header.timeout_hint_ms = static_cast<uint32_t>(options_.request_timeout.count());
  return header;
}

void UaChannel::say_hello() {
  auto deadline = request_deadline();
  ua::Bytes hello = ua::encode_hello(client_limits_, endpoint_url_);
  stream_.write_all(hello, deadline);
  ua::Bytes message = read_message(client_limits_.receive_buffer_size, deadline);
  ua::MessageHeader header = ua::decode_header(message);
  if (header.type != ua::MessageType::acknowledge)
    throw ua::DecodeError("expected Acknowledge, got " + std::string(ua::wire_name(header.type)));
  server_limits_ = ua::decode_acknowledge(ua::ByteView(message).subspan(ua::kHeaderSize));
  ua::check_acknowledge(client_limits_, server_limits_);
}

void UaChannel::open_channel() {
  auto deadline = request_deadline();
  uint32_t request_id = next_request_id_++;
  send(ua::MessageType::open_channel, request_id,
       ua::encode_open_secure_channel_request(next_request_header(), kRequestedChannelLifetimeMs),
       deadline);
  auto response = ua::decode_open_secure_channel_response(
      receive(ua::MessageType::open_channel, request_id, deadline));
  if (response.token.channel_id == 0) throw ua::DecodeError("server issued secure channel id 0");
  channel_id_ = response.token.channel_id;
  token_id_ = response.token.token_id;
}

void UaChannel::close_channel() noexcept {
  if (channel_id_ == 0) return;
  try {
    send(ua::MessageType::close_channel, next_request_id_++,
         ua::encode_close_secure_channel_request(next_request_header()),
         Clock::now() + kCloseTimeout);
  } catch (...) {  // the socket closes anyway; the server copes with that
  }
}

ua::Bytes UaChannel::call(const EncodeRequest& encode) {
  auto deadline = request_deadline();
  uint32_t request_id = next_request_id_++;
  send(ua::MessageType::message, request_id, encode(next_request_header()), deadline);
  return receive(ua::MessageType::message, request_id, deadline);
}

void UaChannel::send(ua::MessageType type, uint32_t request_id, const ua::Bytes& body,
                     Clock::time_point deadline) {
  ua::OutgoingMessage message{type, channel_id_, token_id_, request_id};
  for (const auto& chunk : ua::encode_chunks(message, body, server_limits_, next_sequence_number_))
    stream_.write_all(chunk, deadline);
}

ua::Bytes UaChannel::read_message(uint32_t size_limit, Clock::time_point deadline) {
  ua::Bytes message(ua::kHeaderSize);
  stream_.read_exact(message, deadline);
  ua::MessageHeader header = ua::decode_header(message);
  if (header.size > size_limit)
    throw ua::DecodeError("server sent a " + std::to_string(header.size) +
                          "-byte chunk, the limit is " + std::to_string(size_limit));
  message.resize(header.size);
  stream_.read_exact(std::span(message).subspan(ua::kHeaderSize), deadline);
  if (header.type == ua::MessageType::error) {
    auto error = ua::decode_error_message(ua::ByteView(message).subspan(ua::kHeaderSize));
    throw ua::StatusError(error.status, "server sent Error '" + error.reason + "'");
  }
  return message;
}

ua::Bytes UaChannel::receive(ua::MessageType type, uint32_t request_id,
                             Clock::time_point deadline) {
  ua::MessageAssembler assembler(options_.max_message_size, options_.max_chunk_count);
  last_response_ = {};
  for (;;) {
    ua::Bytes message = read_message(server_limits_.send_buffer_size, deadline);
    ua::Chunk chunk = ua::decode_chunk(message);
    check_chunk(chunk, type, request_id);
    ++last_response_.chunks;
    if (assembler.add(chunk)) {
      ua::Bytes body = assembler.take();
      last_response_.body_bytes = body.size();
      return body;
    }
  }
}

void UaChannel::check_chunk(const ua::Chunk& chunk, ua::MessageType type, uint32_t request_id) {
  if (chunk.type != type)
    throw ua::DecodeError("expected a " + std::string(ua::wire_name(type)) + " chunk, got " +
                          std::string(ua::wire_name(chunk.type)));
  // Before the channel is open its id is still unknown.
  if (channel_id_ != 0 && (chunk.channel_id != channel_id_ || chunk.token_id != token_id_))
    throw ua::DecodeError("chunk for secure channel " + std::to_string(chunk.channel_id) +
                          " token " + std::to_string(chunk.token_id) + ", ours is " +
                          std::to_string(channel_id_) + " token " + std::to_string(token_id_));
  if (chunk.request_id != request_id)
    throw ua::DecodeError("chunk answers request " + std::to_string(chunk.request_id) +
                          ", expected " + std::to_string(request_id));
  if (expected_sequence_number_ && chunk.sequence_number != *expected_sequence_number_)
    throw ua::DecodeError("chunk sequence number " + std::to_string(chunk.sequence_number) +
                          ", expected " + std::to_string(*expected_sequence_number_));
  expected_sequence_number_ = chunk.sequence_number + 1;
}

std::vector<ua::ApplicationDescription> find_servers(const std::string& endpoint_url,
                                                     const ClientOptions& options,
                                                     const Cancellation& cancellation) {
  UaChannel channel(endpoint_url, options, cancellation);
  ua::Bytes body = channel.call([&](const ua::RequestHeader& header) {
    return ua::encode_find_servers_request(header, endpoint_url);
  });
  return ua::decode_find_servers_response(body).servers;
}

std::vector<ua::EndpointDescription> get_endpoints(const std::string& endpoint_url,
                                                   const ClientOptions& options,
                                                   const Cancellation& cancellation) {
  UaChannel channel(endpoint_url, options, cancellation);
  ua::Bytes body = channel.call([&](const ua::RequestHeader& header) {
    return ua::encode_get_endpoints_request(header, endpoint_url);
  });
  return ua::decode_get_endpoints_response(body).endpoints;
}

}  // namespace opcua
