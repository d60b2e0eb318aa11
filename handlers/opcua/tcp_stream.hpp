// A TCP connection whose every wait ends at a deadline or on cancellation.
#ifndef DOWSER_HANDLERS_OPCUA_TCP_STREAM_HPP
#define DOWSER_HANDLERS_OPCUA_TCP_STREAM_HPP

#include "cancellation.hpp"

#include <netdb.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
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

// The resolver could not answer now (EAI_AGAIN: no DNS server answered):
// whether the name resolves is not known.
class LookupUnavailable : public TransportError {
 public:
  using TransportError::TransportError;
};

using AddressList = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;
// What resolves names: ::getaddrinfo, or a stand-in in tests. It runs on a
// thread that may outlive the caller: it must own what it uses, and not throw.
using Resolver = std::function<int(const char*, const char*, const addrinfo*, addrinfo**)>;

// The addresses of host (service: a port number, or empty). getaddrinfo
// cannot be interrupted (a DNS server that does not answer holds it for its
// timeout times its attempts, 10 s and more), so it runs on a thread of its
// own, which touches nothing but its result and ends when the resolver
// returns: the caller stops waiting on cancellation. The resolver's own
// timeouts bound the wait otherwise: a name that takes a retry of the
// resolver (5 s by default) still resolves. An address literal is read
// without a thread. Throws TransportError (the name does not resolve;
// LookupUnavailable when the resolver could not say), Cancelled, or
// std::system_error (no thread or eventfd to be had).
AddressList look_up(const std::string& host, const std::string& service,
                    const Cancellation& cancellation, const Resolver& resolver = ::getaddrinfo);

class TcpStream {
 public:
  // Resolves host (see look_up) and connects to the first address that
  // answers before the deadline. Throws TransportError or Cancelled.
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
