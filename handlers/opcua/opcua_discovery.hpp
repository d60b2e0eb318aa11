// One discovery pass over one configured URL: FindServers, keep the servers
// the Configuration wants, make their URLs reachable from this node, ask
// each for its endpoints, and turn them into devices.
#ifndef DOWSER_HANDLERS_OPCUA_OPCUA_DISCOVERY_HPP
#define DOWSER_HANDLERS_OPCUA_OPCUA_DISCOVERY_HPP

#include "opcua_settings.hpp"
#include "opcua_url.hpp"
#include "state_log.hpp"
#include "ua_services.hpp"

#include <dowser/handler.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace opcua {

inline constexpr const char* kDiscoveryUrlProperty = "OPCUA_DISCOVERY_URL";
inline constexpr const char* kApplicationNameProperty = "OPCUA_APPLICATION_NAME";
inline constexpr const char* kApplicationUriProperty = "OPCUA_APPLICATION_URI";
inline constexpr const char* kSecurityPoliciesProperty = "OPCUA_SECURITY_POLICIES";
inline constexpr const char* kSecurityModesProperty = "OPCUA_SECURITY_MODES";

// GetEndpoints calls one pass makes at the same time.
inline constexpr size_t kMaxParallelEndpointQueries = 8;

// The network as discovery sees it; each call throws on failure.
struct DiscoveryServices {
  std::function<std::vector<ua::ApplicationDescription>(const std::string& url)> find_servers;
  std::function<std::vector<ua::EndpointDescription>(const std::string& url)> get_endpoints;
  HostResolves resolves;
};

// A server FindServers named, with the URL this node should use for it.
struct ServerCandidate {
  std::string discovery_url;
  ua::ApplicationDescription application;
};

// Servers (and ClientAndServers) that pass the name filter, each with its
// first opc.tcp discovery URL made reachable (see reachable_url). Those
// without an opc.tcp URL are left out and logged.
std::vector<ServerCandidate> select_servers(const std::vector<ua::ApplicationDescription>& found,
                                            const OpcTcpUrl& queried,
                                            const std::optional<NameFilter>& filter,
                                            const HostResolves& resolves, StateLog& log);

// Distinct names, in the server's order: "None", "Basic256Sha256", ...
std::vector<std::string> security_policy_names(
    const std::vector<ua::EndpointDescription>& endpoints);
// Distinct modes, in the server's order: "None", "Sign", "SignAndEncrypt".
std::vector<std::string> security_mode_names(const std::vector<ua::EndpointDescription>& endpoints);

dowser::Device make_device(const ServerCandidate& server,
                           const std::vector<ua::EndpointDescription>& endpoints);

// One list per configured URL, in order, merged into one snapshot sorted by
// id: a server several LDSes name is one device (the first URL's wins).
std::vector<dowser::Device> merge_unique(const std::vector<std::vector<dowser::Device>>& lists);

// One pass over `queried_url`. Never throws: an unreachable URL or server,
// or a malformed answer, is logged (once per change) and yields no device.
std::vector<dowser::Device> scan_url(const std::string& queried_url, const Settings& settings,
                                     const DiscoveryServices& services, StateLog& log);

}  // namespace opcua

#endif  // DOWSER_HANDLERS_OPCUA_OPCUA_DISCOVERY_HPP
