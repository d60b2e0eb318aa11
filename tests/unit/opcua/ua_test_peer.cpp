#include "ua_test_peer.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <system_error>

namespace opcua::test {

bool PeerConnection::wait_readable() {
  for (;;) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {stopping_.fd(), POLLIN, 0}};
    int ready = ::poll(fds, 2, -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0 || fds[1].revents != 0) return false;
    if (fds[0].revents != 0) return true;
  }
}

bool PeerConnection::read_exact(uint8_t* data, size_t size) {
  while (size > 0) {
    if (!wait_readable()) return false;
    ssize_t got = ::recv(fd_, data, size, 0);
    if (got <= 0) return false;
    data += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

std::optional<ua::Bytes> PeerConnection::read_message() {
  ua::Bytes message(ua::kHeaderSize);
  if (!read_exact(message.data(), message.size())) return std::nullopt;
  auto header = ua::decode_header(message);
  message.resize(header.size);
  if (!read_exact(message.data() + ua::kHeaderSize, header.size - ua::kHeaderSize))
    return std::nullopt;
  return message;
}

void PeerConnection::write(ua::ByteView bytes) {
  while (!bytes.empty()) {
    ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent <= 0) return;  // the client went away; the test will notice
    bytes = bytes.subspan(static_cast<size_t>(sent));
  }
}

bool PeerConnection::wait_for_client_close() {
  uint8_t byte = 0;
  while (wait_readable()) {
    if (::recv(fd_, &byte, 1, 0) <= 0) return true;
  }
  return false;
}

TcpTestPeer::TcpTestPeer(Serve serve) : serve_(std::move(serve)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(listen_fd_, 16) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    throw std::system_error(errno, std::generic_category(), "test peer listen");
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpTestPeer::~TcpTestPeer() {
  stopping_.cancel();
  acceptor_.join();
  for (auto& connection : connections_) connection.join();
  ::close(listen_fd_);
}

std::string TcpTestPeer::url(const std::string& path) const {
  return "opc.tcp://127.0.0.1:" + std::to_string(port_) + path;
}

void TcpTestPeer::accept_loop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stopping_.fd(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(mutex_);
    ++accepted_;
    connections_.emplace_back([this, fd] { run_connection(fd); });
    changed_.notify_all();
  }
}

void TcpTestPeer::run_connection(int fd) {
  PeerConnection connection(fd, stopping_);
  try {
    serve_(connection);
  } catch (const std::exception&) {  // a malformed client message ends the connection
  }
  bool client_closed = connection.wait_for_client_close();
  ::close(fd);
  std::lock_guard lock(mutex_);
  if (client_closed) ++closed_;
  changed_.notify_all();
}

bool TcpTestPeer::wait_accepted(size_t count, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return accepted_ >= count; });
}

bool TcpTestPeer::wait_closed(size_t count, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return closed_ >= count; });
}

FakeUaServer::FakeUaServer(FakeServerConfig config)
    : config_(std::move(config)), peer_([this](PeerConnection& c) { serve(c); }) {}

std::vector<ua::HelloMessage> FakeUaServer::hellos() const {
  std::lock_guard lock(mutex_);
  return hellos_;
}

size_t FakeUaServer::close_requests() const {
  std::lock_guard lock(mutex_);
  return close_requests_;
}

void FakeUaServer::serve(PeerConnection& connection) {
  auto hello_message = connection.read_message();
  if (!hello_message) return;
  auto hello = ua::decode_hello(ua::ByteView(*hello_message).subspan(ua::kHeaderSize));
  {
    std::lock_guard lock(mutex_);
    hellos_.push_back(hello);
  }
  ua::TransportLimits ours;
  ours.receive_buffer_size = 65536;
  ours.send_buffer_size = std::min(config_.send_buffer_size, hello.limits.receive_buffer_size);
  connection.write(ua::encode_acknowledge(ours));

  // Chunks go out within the client's receive buffer and our send buffer.
  // The client's message size and chunk count are ignored on purpose: the
  // client must enforce them itself.
  ua::TransportLimits client;
  client.receive_buffer_size = ours.send_buffer_size;
  uint32_t sequence = 1;
  while (auto message = connection.read_message()) {
    ua::Chunk request = ua::decode_chunk(*message);
    if (request.type == ua::MessageType::close_channel) {
      std::lock_guard lock(mutex_);
      ++close_requests_;
      return;
    }
    ua::OutgoingMessage reply{request.type, 7, 1, request.request_id};
    for (const auto& chunk : ua::encode_chunks(reply, answer(request), client, sequence))
      connection.write(chunk);
  }
}

ua::Bytes FakeUaServer::answer(const ua::Chunk& request) const {
  ua::ResponseHeader header{0, ua::decode_request_handle(request.body), 0};
  uint32_t type = ua::peek_type_id(request.body).numeric;
  if (type == ua::type_id::kOpenSecureChannelRequest) {
    return ua::encode_open_secure_channel_response({header, 0, {7, 1, 0, 60000}});
  }
  if (type == ua::type_id::kFindServersRequest) {
    return ua::encode_find_servers_response({header, config_.servers});
  }
  if (type == ua::type_id::kGetEndpointsRequest) {
    return ua::encode_get_endpoints_response({header, config_.endpoints});
  }
  header.service_result = 0x800b0000;  // BadServiceUnsupported
  return ua::encode_service_fault(header);
}

ua::ApplicationDescription application(const std::string& name, ua::ApplicationType type,
                                       std::vector<std::string> discovery_urls) {
  ua::ApplicationDescription app;
  app.application_uri = "urn:test:" + name;
  app.product_uri = "urn:test:product";
  app.application_name = {"en", name};
  app.application_type = type;
  app.discovery_urls = std::move(discovery_urls);
  return app;
}

std::vector<ua::EndpointDescription> endpoints_for(
    const std::vector<std::pair<ua::MessageSecurityMode, std::string>>& modes_and_policies) {
  std::vector<ua::EndpointDescription> endpoints;
  for (const auto& [mode, policy] : modes_and_policies) {
    ua::EndpointDescription endpoint;
    endpoint.endpoint_url = "opc.tcp://127.0.0.1:4841";
    endpoint.security_mode = mode;
    endpoint.security_policy_uri = "http://opcfoundation.org/UA/SecurityPolicy#" + policy;
    endpoints.push_back(endpoint);
  }
  return endpoints;
}

}  // namespace opcua::test
