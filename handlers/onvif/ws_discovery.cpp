#include "ws_discovery.hpp"

#include "wsddapi.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <array>
#include <stdexcept>

namespace onvif {
namespace {

constexpr const char* kProbeTypes = "dn:NetworkVideoTransmitter";

std::vector<MulticastInterface> ipv4_interfaces() {
  std::vector<MulticastInterface> found;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return found;
  for (ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || entry->ifa_addr->sa_family != AF_INET) continue;
    if ((entry->ifa_flags & IFF_UP) == 0 || (entry->ifa_flags & IFF_MULTICAST) == 0) continue;
    bool listed = std::any_of(found.begin(), found.end(),
                              [&](const auto& known) { return known.name == entry->ifa_name; });
    if (!listed) found.push_back({entry->ifa_name, ::if_nametoindex(entry->ifa_name)});
  }
  ::freeifaddrs(list);
  return found;
}

// gSOAP sends SOAP-over-UDP from a fresh socket of its own, but the answers
// to a Probe go back to the port it came from: send from the bound socket,
// to the peer gSOAP resolved.
int send_from_bound_socket(soap* context, const char* data, size_t size) {
  ssize_t sent = ::sendto(context->master, data, size, 0, &context->peer.addr,
                          static_cast<socklen_t>(context->peerlen));
  return sent == static_cast<ssize_t>(size) ? SOAP_OK : SOAP_UDP_ERROR;
}

soap* udp_context(WsddEvents& events) {
  soap* context = soap_new1(SOAP_IO_UDP | SOAP_C_UTFSTRING);
  if (context == nullptr) throw std::bad_alloc();
  context->user = &events;
  context->bind_flags = SO_REUSEADDR;  // port 3702 is shared with other listeners
  return context;
}

void release(soap* context) {
  if (context == nullptr) return;
  soap_destroy(context);
  soap_end(context);
  soap_free(context);
}

std::string soap_problem(soap* context) {
  const char* reason = soap_fault_string(context);
  return reason != nullptr ? reason : "gSOAP error " + std::to_string(context->error);
}

void bind_or_throw(soap* context, int port, const char* what) {
  if (!soap_valid_socket(soap_bind(context, nullptr, port, 100)))
    throw std::runtime_error(std::string("cannot open the ") + what +
                             " socket: " + soap_problem(context));
}

ip_mreqn group_on(unsigned index) {
  ip_mreqn request{};
  ::inet_pton(AF_INET, kMulticastGroup, &request.imr_multiaddr);
  request.imr_ifindex = static_cast<int>(index);
  return request;
}

}  // namespace

std::vector<MulticastInterface> multicast_interfaces(const Settings& settings,
                                                     std::vector<std::string>& warnings) {
  auto usable = ipv4_interfaces();
  if (!settings.multicast_interfaces) return usable;
  std::vector<MulticastInterface> chosen;
  for (const auto& name : *settings.multicast_interfaces) {
    auto it = std::find_if(usable.begin(), usable.end(),
                           [&](const auto& candidate) { return candidate.name == name; });
    if (it == usable.end()) {
      warnings.push_back(std::string(kMulticastInterfacesProperty) + ": interface '" + name +
                         "' is not up with an IPv4 address and multicast; not used");
    } else {
      chosen.push_back(*it);
    }
  }
  return chosen;
}

WsDiscovery::WsDiscovery(std::vector<MulticastInterface> interfaces,
                         std::vector<ProbeTarget> unicast_targets, WsddEvents& events)
    : interfaces_(std::move(interfaces)), unicast_targets_(std::move(unicast_targets)) {
  try {
    probe_soap_ = udp_context(events);
    bind_or_throw(probe_soap_, 0, "WS-Discovery probe");
    probe_soap_->fsend = send_from_bound_socket;
    if (interfaces_.empty()) return;
    announcement_soap_ = udp_context(events);
    bind_or_throw(announcement_soap_, kWsDiscoveryPort, "WS-Discovery Hello/Bye");
    for (const auto& interface : interfaces_) {
      ip_mreqn request = group_on(interface.index);
      if (::setsockopt(announcement_soap_->master, IPPROTO_IP, IP_ADD_MEMBERSHIP, &request,
                       sizeof request) != 0)
        throw std::runtime_error("cannot join " + std::string(kMulticastGroup) + " on " +
                                 interface.name);
    }
  } catch (...) {
    release(announcement_soap_);
    release(probe_soap_);
    throw;
  }
}

WsDiscovery::~WsDiscovery() {
  release(announcement_soap_);
  release(probe_soap_);
}

std::vector<std::string> WsDiscovery::probe() {
  std::vector<std::string> problems;
  auto send = [&](const std::string& endpoint) {
    const char* id = soap_wsa_rand_uuid(probe_soap_);
    if (soap_wsdd_Probe(probe_soap_, SOAP_WSDD_ADHOC, SOAP_WSDD_TO_TS, endpoint.c_str(), id,
                        nullptr, kProbeTypes, nullptr, nullptr) != SOAP_OK)
      problems.push_back("Probe to " + endpoint + " failed: " + soap_problem(probe_soap_));
    soap_destroy(probe_soap_);
    soap_end(probe_soap_);
  };
  for (const auto& interface : interfaces_) {
    ip_mreqn outgoing = group_on(interface.index);
    if (::setsockopt(probe_soap_->master, IPPROTO_IP, IP_MULTICAST_IF, &outgoing,
                     sizeof outgoing) != 0) {
      problems.push_back("cannot send multicast on " + interface.name);
      continue;
    }
    send("soap.udp://" + std::string(kMulticastGroup) + ":" + std::to_string(kWsDiscoveryPort));
  }
  for (const auto& target : unicast_targets_)
    send("soap.udp://" + target.host + ":" + std::to_string(target.port));
  return problems;
}

bool WsDiscovery::listen_once(std::chrono::steady_clock::time_point deadline, int cancel_fd) {
  std::array<soap*, 2> contexts = {probe_soap_, announcement_soap_};
  for (;;) {
    auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    std::array<pollfd, 3> fds = {
        pollfd{cancel_fd, POLLIN, 0}, pollfd{probe_soap_->master, POLLIN, 0},
        pollfd{announcement_soap_ != nullptr ? announcement_soap_->master : -1, POLLIN, 0}};
    int ready =
        ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (fds[0].revents != 0) return false;
    if (ready <= 0) {
      if (ready == 0 || errno != EINTR) return true;
      continue;
    }
    for (size_t i = 0; i < contexts.size(); ++i)
      if (fds[i + 1].revents != 0) serve_waiting(contexts[i]);
    return true;
  }
}

// soap_wsdd_listen's loop without its flaw: it returns only after 1 ms of
// silence, so a sender of a datagram a millisecond would keep it (and the
// session's stop) forever. This reads at most kMaxDatagramsPerWake, calling
// the wsdd_event_* handlers; a malformed message is dropped.
void WsDiscovery::serve_waiting(soap* context) {
  constexpr int kMaxDatagramsPerWake = 64;
  context->accept_timeout = context->recv_timeout = context->send_timeout = -1000;
  for (int served = 0; served < kMaxDatagramsPerWake; ++served) {
    // Fails when nothing more came within 1 ms, or on a malformed message.
    if (!soap_valid_socket(soap_accept(context)) || soap_begin_serve(context)) break;
    context->keep_alive = 0;
    const bool failed = soap_wsdd_serve_request(context) != SOAP_OK;
    soap_destroy(context);
    soap_end(context);
    if (failed) break;  // the next wake-up reads on
  }
  soap_destroy(context);
  soap_end(context);
}

}  // namespace onvif
