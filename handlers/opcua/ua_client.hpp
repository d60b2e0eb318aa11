// A client for OPC UA's session-less discovery services over UA-TCP: one
// secure channel with SecurityPolicy None per call, every wait bounded.
#ifndef DOWSER_HANDLERS_OPCUA_UA_CLIENT_HPP
#define DOWSER_HANDLERS_OPCUA_UA_CLIENT_HPP

#include "cancellation.hpp"
#include "tcp_stream.hpp"
#include "ua_services.hpp"
#include "ua_transport.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace opcua {

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{3000};  // TCP connect
  std::chrono::milliseconds request_timeout{5000};  // each request until its whole answer
  uint32_t receive_buffer_size = 65536;             // largest chunk we accept
  uint32_t max_message_size = 4u << 20;             // largest response body we accept
  uint32_t max_chunk_count = 1024;                  // most chunks per response we accept
};

// How the last response arrived, for tests of chunking.
struct ResponseStats {
  size_t chunks = 0;
  size_t body_bytes = 0;
};

// A connection with an open secure channel. Every method throws
// TransportError, ua::StatusError, ua::DecodeError or Cancelled.
class UaChannel {
 public:
  // Connects within connect_timeout, then says Hello and opens the channel,
  // each within request_timeout.
  UaChannel(const std::string& endpoint_url, const ClientOptions& options,
            const Cancellation& cancellation);
  // Sends CloseSecureChannel, best effort.
  ~UaChannel();
  UaChannel(const UaChannel&) = delete;
  UaChannel& operator=(const UaChannel&) = delete;

  // Sends the request encode() builds around the header it is given and
  // returns the body of the response.
  using EncodeRequest = std::function<ua::Bytes(const ua::RequestHeader&)>;
  ua::Bytes call(const EncodeRequest& encode);

  const ua::TransportLimits& server_limits() const noexcept { return server_limits_; }
  const ResponseStats& last_response() const noexcept { return last_response_; }

 private:
  Clock::time_point request_deadline() const { return Clock::now() + options_.request_timeout; }
  ua::RequestHeader next_request_header();
  void say_hello();
  void open_channel();
  void close_channel() noexcept;
  void send(ua::MessageType type, uint32_t request_id, const ua::Bytes& body,
            Clock::time_point deadline);
  // One whole message, header included; an Error message throws.
  ua::Bytes read_message(uint32_t size_limit, Clock::time_point deadline);
  ua::Bytes receive(ua::MessageType type, uint32_t request_id, Clock::time_point deadline);
  void check_chunk(const ua::Chunk& chunk, ua::MessageType type, uint32_t request_id);

  std::string endpoint_url_;
  ClientOptions options_;
  ua::TransportLimits client_limits_;  // checked before connecting
  TcpStream stream_;
  ua::TransportLimits server_limits_;
  uint32_t channel_id_ = 0;
  uint32_t token_id_ = 0;
  uint32_t next_request_id_ = 1;
  uint32_t next_request_handle_ = 1;
  uint32_t next_sequence_number_ = 1;
  std::optional<uint32_t> expected_sequence_number_;  // the server's, once it has sent one
  ResponseStats last_response_;
};

// FindServers on an LDS or a server's discovery endpoint.
std::vector<ua::ApplicationDescription> find_servers(const std::string& endpoint_url,
                                                     const ClientOptions& options,
                                                     const Cancellation& cancellation);

// GetEndpoints on a server's discovery endpoint.
std::vector<ua::EndpointDescription> get_endpoints(const std::string& endpoint_url,
                                                   const ClientOptions& options,
                                                   const Cancellation& cancellation);

}  // namespace opcua

#endif  // DOWSER_HANDLERS_OPCUA_UA_CLIENT_HPP
