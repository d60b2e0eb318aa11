#include "tcp_stream.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

namespace opcua {
namespace {

std::string errno_text(int error) { return std::generic_category().message(error); }

// Waits until fd is ready for events (or has an error the next call will
// report). Throws TransportError at the deadline and Cancelled on cancel.
void wait_ready(int fd, short events, Clock::time_point deadline, const Cancellation& cancellation,
                const std::string& what) {
  for (;;) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) throw TransportError("timed out " + what);
    pollfd fds[2] = {{fd, events, 0}, {cancellation.fd(), POLLIN, 0}};
    int ready = ::poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), INT_MAX)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) throw TransportError("poll failed: " + errno_text(errno));
    if (fds[1].revents != 0) throw Cancelled();
    if (fds[0].revents != 0) return;
  }
}

// One getaddrinfo call, shared by its thread and the caller that may stop
// waiting for it; the last of the two frees it.
struct PendingLookup {
  PendingLookup() : done_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (done_fd < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  }
  ~PendingLookup() {
    if (found != nullptr) ::freeaddrinfo(found);
    ::close(done_fd);
  }
  PendingLookup(const PendingLookup&) = delete;
  PendingLookup& operator=(const PendingLookup&) = delete;

  const int done_fd;  // readable once the resolver returned
  std::mutex mutex;
  int status = 0;             // under mutex
  addrinfo* found = nullptr;  // under mutex
};

class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  ~FdGuard() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// A connected non-blocking socket to one address.
int connect_address(const addrinfo& address, Clock::time_point deadline,
                    const Cancellation& cancellation, const std::string& target) {
  FdGuard fd(::socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                      address.ai_protocol));
  if (fd.get() < 0) throw TransportError("socket: " + errno_text(errno));
  int one = 1;  // requests are single small writes: send them at once
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd.get(), address.ai_addr, address.ai_addrlen) != 0) {
    if (errno != EINPROGRESS)
      throw TransportError("connect to " + target + ": " + errno_text(errno));
    wait_ready(fd.get(), POLLOUT, deadline, cancellation, "connecting to " + target);
    int error = 0;
    socklen_t length = sizeof error;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) throw TransportError("connect to " + target + ": " + errno_text(error));
  }
  return fd.release();
}

}  // namespace

AddressList look_up(const std::string& host, const std::string& service,
                    const Cancellation& cancellation, const Resolver& resolver) {
  // A stopped session's scan may still go through many servers: none of
  // them starts a thread.
  if (cancellation.cancelled()) throw Cancelled();
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  if (!service.empty()) hints.ai_flags = AI_NUMERICSERV;
  const char* service_or_null = service.empty() ? nullptr : service.c_str();
  // An address literal never waits for a resolver: no thread for it.
  addrinfo numeric = hints;
  numeric.ai_flags |= AI_NUMERICHOST;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), service_or_null, &numeric, &found) == 0)
    return AddressList(found, &::freeaddrinfo);

  auto pending = std::make_shared<PendingLookup>();
  // Throws std::system_error when no thread is to be had (a pids limit).
  std::thread([pending, host, service, hints, resolver]() noexcept {
    addrinfo* answer = nullptr;
    const int status =
        resolver(host.c_str(), service.empty() ? nullptr : service.c_str(), &hints, &answer);
    std::lock_guard lock(pending->mutex);
    pending->status = status;
    pending->found = answer;
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t written = ::write(pending->done_fd, &one, sizeof one);
  }).detach();
  wait_ready(pending->done_fd, POLLIN, Clock::time_point::max(), cancellation,
             "resolving '" + host + "'");
  std::lock_guard lock(pending->mutex);
  const int status = pending->status;
  if (status == EAI_AGAIN || status == EAI_MEMORY || status == EAI_SYSTEM)
    throw LookupUnavailable("cannot resolve '" + host + "' now: " + ::gai_strerror(status));
  if (status != 0) throw TransportError("cannot resolve '" + host + "': " + ::gai_strerror(status));
  return AddressList(std::exchange(pending->found, nullptr), &::freeaddrinfo);
}

TcpStream TcpStream::connect(const std::string& host, uint16_t port, Clock::time_point deadline,
                             const Cancellation& cancellation) {
  std::string target = host + ":" + std::to_string(port);
  AddressList addresses = look_up(host, std::to_string(port), cancellation);
  std::string failure = "no address for " + target;
  for (const addrinfo* address = addresses.get(); address != nullptr; address = address->ai_next) {
    try {
      return TcpStream(connect_address(*address, deadline, cancellation, target), cancellation);
    } catch (const TransportError& e) {
      failure = e.what();  // try the next address, report the last failure
    }
  }
  throw TransportError(failure);
}

TcpStream::TcpStream(TcpStream&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), cancellation_(other.cancellation_) {}

TcpStream::~TcpStream() {
  if (fd_ >= 0) ::close(fd_);
}

void TcpStream::write_all(std::span<const uint8_t> bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent > 0) {
      bytes = bytes.subspan(static_cast<size_t>(sent));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      wait_ready(fd_, POLLOUT, deadline, *cancellation_, "sending");
    } else {
      throw TransportError("send: " + errno_text(errno));
    }
  }
}

void TcpStream::read_exact(std::span<uint8_t> bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    ssize_t received = ::recv(fd_, bytes.data(), bytes.size(), 0);
    if (received > 0) {
      bytes = bytes.subspan(static_cast<size_t>(received));
    } else if (received == 0) {
      throw TransportError("connection closed by the peer");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      wait_ready(fd_, POLLIN, deadline, *cancellation_, "waiting for the peer's answer");
    } else {
      throw TransportError("recv: " + errno_text(errno));
    }
  }
}

}  // namespace opcua
