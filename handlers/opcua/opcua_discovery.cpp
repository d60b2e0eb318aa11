#include "opcua_discovery.hpp"

#include "cancellation.hpp"
#include "parallel.hpp"

#include <algorithm>
#include <map>

namespace opcua {
namespace {

bool is_server(ua::ApplicationType type) {
  return type == ua::ApplicationType::server || type == ua::ApplicationType::client_and_server;
}

const std::string* first_opc_tcp_url(const std::vector<std::string>& urls) {
  auto found = std::find_if(urls.begin(), urls.end(), has_opc_tcp_scheme);
  return found == urls.end() ? nullptr : &*found;
}

std::string mode_name(ua::MessageSecurityMode mode) {
  switch (mode) {
    case ua::MessageSecurityMode::none:
      return "None";
    case ua::MessageSecurityMode::sign:
      return "Sign";
    case ua::MessageSecurityMode::sign_and_encrypt:
      return "SignAndEncrypt";
    case ua::MessageSecurityMode::invalid:
      break;
  }
  return "Invalid";
}

// The part of a policy URI after '#': "...SecurityPolicy#None" -> "None".
std::string policy_name(const std::string& uri) {
  size_t hash = uri.rfind('#');
  return hash == std::string::npos ? uri : uri.substr(hash + 1);
}

template <typename Name>
std::vector<std::string> distinct(const std::vector<ua::EndpointDescription>& endpoints,
                                  Name name_of) {
  std::vector<std::string> names;
  for (const auto& endpoint : endpoints) {
    std::string name = name_of(endpoint);
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ",") + item;
  return text;
}

// Runs query and turns any failure into a logged problem of subject.
template <typename Query>
auto logged(StateLog& log, const std::string& subject, Query query)
    -> std::optional<decltype(query())> {
  try {
    auto result = query();
    log.ok(subject);
    return result;
  } catch (const Cancelled&) {
    return std::nullopt;  // the session is stopping: nothing went wrong
  } catch (const std::exception& e) {
    log.failed(subject, e.what());
    return std::nullopt;
  }
}

}  // namespace

std::vector<ServerCandidate> select_servers(const std::vector<ua::ApplicationDescription>& found,
                                            const OpcTcpUrl& queried,
                                            const std::optional<NameFilter>& filter,
                                            const HostResolves& resolves, StateLog& log) {
  std::vector<ServerCandidate> selected;
  for (const auto& application : found) {
    if (!is_server(application.application_type)) continue;
    if (filter && !filter->accepts(application.application_name.text)) continue;
    std::string subject = "server '" + application.application_uri + "'";
    const std::string* url = first_opc_tcp_url(application.discovery_urls);
    std::string why = "has no opc.tcp discovery URL";
    std::optional<OpcTcpUrl> parsed = url ? parse_opc_tcp_url(*url, &why) : std::nullopt;
    if (!parsed) {
      log.failed(subject, "skipped: discovery URL " + why);
      continue;
    }
    log.ok(subject);
    selected.push_back({reachable_url(*url, *parsed, queried, resolves), application});
  }
  return selected;
}

std::vector<std::string> security_policy_names(
    const std::vector<ua::EndpointDescription>& endpoints) {
  return distinct(endpoints, [](const auto& e) { return policy_name(e.security_policy_uri); });
}

std::vector<std::string> security_mode_names(
    const std::vector<ua::EndpointDescription>& endpoints) {
  return distinct(endpoints, [](const auto& e) { return mode_name(e.security_mode); });
}

dowser::Device make_device(const ServerCandidate& server,
                           const std::vector<ua::EndpointDescription>& endpoints) {
  dowser::Device device;
  device.id = server.discovery_url;
  device.properties[kDiscoveryUrlProperty] = server.discovery_url;
  // Names come from the server as raw bytes (Latin-1, a NUL): made valid,
  // not a reason to lose the server.
  device.properties[kApplicationNameProperty] =
      dowser::property_value(server.application.application_name.text);
  device.properties[kApplicationUriProperty] =
      dowser::property_value(server.application.application_uri);
  device.properties[kSecurityPoliciesProperty] =
      dowser::property_value(joined(security_policy_names(endpoints)));
  device.properties[kSecurityModesProperty] = joined(security_mode_names(endpoints));
  device.sharing = dowser::Sharing::shared;
  return device;
}

std::vector<dowser::Device> merge_unique(const std::vector<std::vector<dowser::Device>>& lists) {
  std::map<std::string, const dowser::Device*> by_id;
  for (const auto& list : lists)
    for (const auto& device : list) by_id.try_emplace(device.id, &device);
  std::vector<dowser::Device> merged;
  merged.reserve(by_id.size());
  for (const auto& [id, device] : by_id) merged.push_back(*device);
  return merged;
}

std::vector<dowser::Device> scan_url(const std::string& queried_url, const Settings& settings,
                                     const DiscoveryServices& services, StateLog& log) {
  auto queried = parse_opc_tcp_url(queried_url);
  auto found = logged(log, queried_url, [&] { return services.find_servers(queried_url); });
  if (!queried || !found) return {};
  auto servers =
      select_servers(*found, *queried, settings.application_names, services.resolves, log);

  // A server that does not answer GetEndpoints is not usable from here.
  std::vector<std::optional<dowser::Device>> devices(servers.size());
  parallel_for(servers.size(), kMaxParallelEndpointQueries, [&](size_t i) {
    const auto& server = servers[i];
    devices[i] = logged(log, server.discovery_url, [&] {
      return make_device(server, services.get_endpoints(server.discovery_url));
    });
  });
  std::vector<dowser::Device> reachable;
  for (auto& device : devices)
    if (device) reachable.push_back(std::move(*device));
  return merge_unique({reachable});
}

}  // namespace opcua
