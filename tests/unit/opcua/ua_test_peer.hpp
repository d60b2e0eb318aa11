// In-process UA-TCP peers on 127.0.0.1 for the client and module tests:
// TcpTestPeer runs a function per accepted connection; FakeUaServer answers
// Hello, OpenSecureChannel, FindServers and GetEndpoints from fixed data,
// written with the codec's response encoders. Interoperability with a real
// stack is tested against node-opcua (tests/integration/opcua).
#pragma once

#include "cancellation.hpp"
#include "ua_services.hpp"
#include "ua_transport.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace opcua::test {

// A host name no resolver is asked about: glibc refuses a label longer than
// 63 bytes before it sends a query, so tests of "cannot resolve" send
// nothing past 127.0.0.0/8 (a `.invalid` name would reach the node's DNS).
inline const std::string kNameNeverResolved = std::string(64, 'x') + ".invalid";

// One accepted connection, as the peer sees it. Reads end (nullopt) when
// the client closes or the peer is being destroyed.
class PeerConnection {
 public:
  PeerConnection(int fd, const Cancellation& stopping) : fd_(fd), stopping_(stopping) {}
  std::optional<ua::Bytes> read_message();  // one whole message, header included
  bool read_exact(uint8_t* data, size_t size);
  void write(ua::ByteView bytes);
  // Waits until the client has closed its end (true) or the peer stops.
  bool wait_for_client_close();

 private:
  bool wait_readable();
  int fd_;
  const Cancellation& stopping_;
};

class TcpTestPeer {
 public:
  using Serve = std::function<void(PeerConnection&)>;
  explicit TcpTestPeer(Serve serve);
  ~TcpTestPeer();  // stops every connection's function and joins
  TcpTestPeer(const TcpTestPeer&) = delete;
  TcpTestPeer& operator=(const TcpTestPeer&) = delete;

  uint16_t port() const noexcept { return port_; }
  std::string url(const std::string& path = "") const;
  // Waits until `count` connections were accepted.
  bool wait_accepted(size_t count, std::chrono::milliseconds timeout);
  // Waits until `count` connections were closed by the client.
  bool wait_closed(size_t count, std::chrono::milliseconds timeout);

 private:
  void accept_loop();
  void run_connection(int fd);

  Serve serve_;
  Cancellation stopping_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::mutex mutex_;
  std::condition_variable changed_;
  size_t accepted_ = 0;
  size_t closed_ = 0;
  std::vector<std::thread> connections_;
  std::thread acceptor_;  // last: starts once the rest is ready
};

struct FakeServerConfig {
  std::vector<ua::ApplicationDescription> servers;  // the FindServers answer
  std::vector<ua::EndpointDescription> endpoints;   // the GetEndpoints answer
  uint32_t send_buffer_size = 65536;                // largest chunk it sends
};

// An OPC UA server that speaks just enough for discovery.
class FakeUaServer {
 public:
  explicit FakeUaServer(FakeServerConfig config);
  std::string url() const { return peer_.url(); }
  std::vector<ua::HelloMessage> hellos() const;
  size_t close_requests() const;
  TcpTestPeer& peer() { return peer_; }

 private:
  void serve(PeerConnection& connection);
  ua::Bytes answer(const ua::Chunk& request) const;

  FakeServerConfig config_;
  mutable std::mutex mutex_;
  std::vector<ua::HelloMessage> hellos_;
  size_t close_requests_ = 0;
  TcpTestPeer peer_;  // last: serves once the rest is ready
};

// An application description as node-opcua would send it.
ua::ApplicationDescription application(const std::string& name, ua::ApplicationType type,
                                       std::vector<std::string> discovery_urls);

// Endpoints with the given security modes and policy names.
std::vector<ua::EndpointDescription> endpoints_for(
    const std::vector<std::pair<ua::MessageSecurityMode, std::string>>& modes_and_policies);

}  // namespace opcua::test
