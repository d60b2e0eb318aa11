// DiscoveryServices over a table instead of sockets, for the discovery
// logic tests: which URL answers FindServers with what, which server answers
// GetEndpoints, which host names resolve. Thread-safe; changes between scans.
#pragma once

#include "cancellation.hpp"
#include "opcua_discovery.hpp"
#include "tcp_stream.hpp"
#include "ua_test_peer.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace opcua::test {

class FakeNetwork {
 public:
  void set_find_servers(const std::string& url, std::vector<ua::ApplicationDescription> answer) {
    std::lock_guard lock(mutex_);
    find_servers_[url] = std::move(answer);
  }
  void remove_find_servers(const std::string& url) {
    std::lock_guard lock(mutex_);
    find_servers_.erase(url);
  }
  void set_endpoints(const std::string& url, std::vector<ua::EndpointDescription> answer) {
    std::lock_guard lock(mutex_);
    endpoints_[url] = std::move(answer);
  }
  void remove_endpoints(const std::string& url) {
    std::lock_guard lock(mutex_);
    endpoints_.erase(url);
  }
  // FindServers on url waits until the session is cancelled, like a peer
  // that accepted the connection and never answers, or until released.
  void hang(const std::string& url) {
    std::lock_guard lock(mutex_);
    hanging_.insert(url);
    auto [fd, added] = release_fds_.try_emplace(url, -1);
    if (added) fd->second = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    uint64_t count = 0;  // a release told before: not this hang's
    [[maybe_unused]] auto drained = ::read(fd->second, &count, sizeof count);
  }
  // Calls hanging on url end as timed out; later ones are answered.
  void release(const std::string& url) {
    std::lock_guard lock(mutex_);
    hanging_.erase(url);
    uint64_t one = 1;
    if (auto fd = release_fds_.find(url); fd != release_fds_.end()) [[maybe_unused]]
      auto written = ::write(fd->second, &one, sizeof one);
  }
  ~FakeNetwork() {
    for (const auto& [url, fd] : release_fds_) ::close(fd);
  }
  void resolvable(const std::string& host) {
    std::lock_guard lock(mutex_);
    resolvable_.insert(host);
  }
  // The resolver cannot answer for host now (EAI_AGAIN), or can again.
  void resolver_unavailable_for(const std::string& host, bool unavailable) {
    std::lock_guard lock(mutex_);
    if (unavailable)
      unavailable_.insert(host);
    else
      unavailable_.erase(host);
  }
  // Looking host up throws what no scan expects (as a thread that cannot be
  // started would): the scan itself fails.
  void resolving_breaks(const std::string& host) {
    std::lock_guard lock(mutex_);
    breaking_.insert(host);
  }

  size_t find_servers_calls() const { return find_servers_calls_; }
  // Waits until FindServers has been called `count` times in all.
  bool wait_for_calls(size_t count, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return called_.wait_for(lock, timeout, [&] { return find_servers_calls_ >= count; });
  }
  // Calls to a hanging URL that are waiting right now.
  size_t hanging_calls() const { return hanging_calls_; }
  bool wait_for_hanging_call(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return called_.wait_for(lock, timeout, [&] { return hanging_calls_ > 0; });
  }

  DiscoveryServices services(const Cancellation& cancellation) {
    DiscoveryServices services;
    services.find_servers = [this, &cancellation](const std::string& url) {
      return find_servers(url, cancellation);
    };
    services.get_endpoints = [this](const std::string& url) { return endpoints(url); };
    // Remembering as the network's services do, for as long as these
    // services live (a discovery session).
    services.resolves = remembering_last_answers([this](const std::string& host) {
      std::lock_guard lock(mutex_);
      if (breaking_.contains(host)) throw std::runtime_error("resolver broke on " + host);
      if (unavailable_.contains(host)) return std::optional<bool>();
      return std::optional<bool>(resolvable_.contains(host));
    });
    return services;
  }

 private:
  std::vector<ua::ApplicationDescription> find_servers(const std::string& url,
                                                       const Cancellation& cancellation) {
    bool hangs = false;
    {
      std::lock_guard lock(mutex_);
      ++find_servers_calls_;
      hangs = hanging_.contains(url);
      if (hangs) ++hanging_calls_;  // counted before anyone can see the call
    }
    called_.notify_all();
    if (hangs) {
      wait_for_release_or_cancel(url, cancellation);
      --hanging_calls_;
      if (cancellation.cancelled()) throw Cancelled();
      throw TransportError("FindServers on " + url + ": timed out");
    }
    std::lock_guard lock(mutex_);
    auto found = find_servers_.find(url);
    if (found == find_servers_.end()) throw TransportError("connect to " + url + ": refused");
    return found->second;
  }

  // Both are eventfds: one poll() waits for whichever comes first.
  void wait_for_release_or_cancel(const std::string& url, const Cancellation& cancellation) {
    int released = -1;
    {
      std::lock_guard lock(mutex_);
      released = release_fds_.at(url);
    }
    pollfd fds[2] = {{cancellation.fd(), POLLIN, 0}, {released, POLLIN, 0}};
    while (::poll(fds, 2, -1) < 0 && errno == EINTR) {
    }
  }

  std::vector<ua::EndpointDescription> endpoints(const std::string& url) {
    std::lock_guard lock(mutex_);
    auto found = endpoints_.find(url);
    if (found == endpoints_.end()) throw TransportError("connect to " + url + ": refused");
    return found->second;
  }

  std::mutex mutex_;
  std::condition_variable called_;
  std::map<std::string, std::vector<ua::ApplicationDescription>> find_servers_;
  std::map<std::string, std::vector<ua::EndpointDescription>> endpoints_;
  std::set<std::string> hanging_;
  std::map<std::string, int> release_fds_;  // per URL ever hung: written by release()
  std::set<std::string> resolvable_;
  std::set<std::string> breaking_;
  std::set<std::string> unavailable_;
  std::atomic<size_t> find_servers_calls_{0};
  std::atomic<size_t> hanging_calls_{0};
};

// Log lines a StateLog wrote.
class LogRecorder {
 public:
  StateLog::Sink sink() {
    return [this](dowser::LogLevel level, const std::string& line) {
      std::lock_guard lock(mutex_);
      lines_.push_back({level, line});
    };
  }
  size_t count(dowser::LogLevel level, const std::string& containing) const {
    std::lock_guard lock(mutex_);
    size_t n = 0;
    for (const auto& [l, line] : lines_)
      if (l == level && line.find(containing) != std::string::npos) ++n;
    return n;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<dowser::LogLevel, std::string>> lines_;
};

}  // namespace opcua::test
