// A TCP connection whose every wait ends at a deadline or on cancellation.
#ifndef DOWSER_HANDLERS_OPCUA_TCP_STREAM_HPP
#define DOWSER_HANDLERS_OPCUA_TCP_STREAM_HPP

#include "cancellation.hpp"

#include <chrono>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

namespace opcua {

using Clock = std::chrono::steady_clock;

// The peer could not be reached, closed the connection, or was too slow.
class TransportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class TcpStream {
 public:
  // Resolves host and connects to the first address that answers before
  // the deadline. Throws TransportError or Cancelled.
  static TcpStream connect(const std::string& host, uint16_t port, Clock::time_point deadline,
                           const Cancellation& cancellation);

  TcpStream(TcpStream&& other) noexcept;
  TcpStream& operator=(TcpStream&&) = delete;
  TcpStream(const TcpStream&) = delete;
  ~TcpStream();

  // Both throw TransportError (timeout, reset, closed) or Cancelled.
  void write_all(std::span<const uint8_t> bytes, Clock::time_point deadline);
  void read_exact(std::span<uint8_t> bytes, Clock::time_point deadline);

 private:
  TcpStream(int fd, const Cancellation& cancellation) : fd_(fd), cancellation_(&cancellation) {}

  int fd_ = -1;
  const Cancellation* cancellation_;
};

}  // namespace opcua

#endif  // DOWSER_HANDLERS_OPCUA_TCP_STREAM_HPP
