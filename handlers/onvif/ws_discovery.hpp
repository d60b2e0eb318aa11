// WS-Discovery for the handler over gSOAP's wsddapi: Probe for
// NetworkVideoTransmitters by multicast on the chosen interfaces and by
// unicast to the configured targets, and hear ProbeMatches, Hello and Bye.
// Used by one thread: it owns two gSOAP UDP contexts.
#ifndef DOWSER_HANDLERS_ONVIF_WS_DISCOVERY_HPP
#define DOWSER_HANDLERS_ONVIF_WS_DISCOVERY_HPP

#include "onvif_settings.hpp"
#include "wsdd_events.hpp"

#include <chrono>
#include <string>
#include <vector>

struct soap;

namespace onvif {

inline constexpr const char* kMulticastGroup = "239.255.255.250";

struct MulticastInterface {
  std::string name;
  unsigned index = 0;
};

// The interfaces to use: the named ones (a name that is not up with an IPv4
// address gets a warning), or every up, multicast-capable IPv4 interface.
std::vector<MulticastInterface> multicast_interfaces(const Settings& settings,
                                                     std::vector<std::string>& warnings);

class WsDiscovery {
 public:
  // Opens a probe socket on an ephemeral port (ProbeMatches come back to it)
  // and, when there are multicast interfaces, a socket on port 3702 that has
  // joined 239.255.255.250 on each of them for Hello and Bye. Throws
  // std::runtime_error when a socket cannot be opened.
  WsDiscovery(std::vector<MulticastInterface> interfaces, std::vector<ProbeTarget> unicast_targets,
              WsddEvents& events);
  ~WsDiscovery();
  WsDiscovery(const WsDiscovery&) = delete;
  WsDiscovery& operator=(const WsDiscovery&) = delete;

  // Sends one Probe per interface and per unicast target. Returns the
  // problems (a send that failed), for the log.
  std::vector<std::string> probe();
  // Waits until messages arrive or `deadline` passes, and delivers what came
  // (returning after each batch, so the caller can act on it). Returns false
  // at once when `cancel_fd` becomes readable.
  bool listen_once(std::chrono::steady_clock::time_point deadline, int cancel_fd);

 private:
  static void serve_waiting(soap* context);
  std::vector<MulticastInterface> interfaces_;
  std::vector<ProbeTarget> unicast_targets_;
  soap* probe_soap_ = nullptr;
  soap* announcement_soap_ = nullptr;  // only with multicast interfaces
};

}  // namespace onvif

#endif  // DOWSER_HANDLERS_ONVIF_WS_DISCOVERY_HPP
