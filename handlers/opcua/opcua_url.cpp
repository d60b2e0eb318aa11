#include "opcua_url.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace opcua {
namespace {

constexpr std::string_view kScheme = "opc.tcp://";

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool ends_with_ci(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && iequals(text.substr(text.size() - suffix.size()), suffix);
}

std::optional<OpcTcpUrl> fail(std::string* why, std::string reason) {
  if (why != nullptr) *why = std::move(reason);
  return std::nullopt;
}

std::optional<uint16_t> parse_port(std::string_view text) {
  unsigned value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535)
    return std::nullopt;
  return static_cast<uint16_t>(value);
}

// Splits "host[:port]" or "[v6]:port" into host and the text after ':'.
bool split_authority(std::string_view authority, std::string_view* host,
                     std::optional<std::string_view>* port) {
  std::string_view rest;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return false;
    *host = authority.substr(1, close - 1);
    rest = authority.substr(close + 1);
  } else {
    size_t colon = authority.find(':');
    *host = authority.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view() : authority.substr(colon);
  }
  if (rest.empty()) return true;
  if (rest.front() != ':') return false;
  *port = rest.substr(1);
  return true;
}

}  // namespace

bool has_opc_tcp_scheme(std::string_view url) {
  return url.size() >= kScheme.size() && iequals(url.substr(0, kScheme.size()), kScheme);
}

std::optional<OpcTcpUrl> parse_opc_tcp_url(std::string_view url, std::string* why) {
  if (!has_opc_tcp_scheme(url)) return fail(why, "does not start with opc.tcp://");
  std::string_view rest = url.substr(kScheme.size());
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (authority.find('@') != std::string_view::npos)
    return fail(why, "user information is not supported");
  std::string_view host;
  std::optional<std::string_view> port_text;
  if (!split_authority(authority, &host, &port_text)) return fail(why, "malformed host or port");
  if (host.empty()) return fail(why, "has no host");
  OpcTcpUrl parsed;
  parsed.host = std::string(host);
  if (port_text) {
    auto port = parse_port(*port_text);
    if (!port) return fail(why, "port '" + std::string(*port_text) + "' is not 1..65535");
    parsed.port = *port;
  }
  if (slash != std::string_view::npos) parsed.path = std::string(rest.substr(slash));
  return parsed;
}

std::string to_string(const OpcTcpUrl& url) {
  bool ipv6 = url.host.find(':') != std::string::npos;
  std::string host = ipv6 ? "[" + url.host + "]" : url.host;
  return std::string(kScheme) + host + ":" + std::to_string(url.port) + url.path;
}

bool is_loopback_host(std::string_view host) {
  if (iequals(host, "localhost") || iequals(host, "localhost.") || ends_with_ci(host, ".localhost"))
    return true;
  in_addr v4{};
  std::string text(host);
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

std::optional<bool> resolves_with_getaddrinfo(const std::string& host,
                                              const Cancellation& cancellation,
                                              const Resolver& resolver) {
  try {
    return look_up(host, "", cancellation, resolver) != nullptr;
  } catch (const LookupUnavailable&) {
    return std::nullopt;
  } catch (const TransportError&) {  // no such host
    return false;
  } catch (const Cancelled&) {  // the scan's result goes unreported anyway
    return std::nullopt;
  }
}

HostResolves remembering_last_answers(HostLookup lookup) {
  // Only names that resolved: "not known" and "does not resolve" answer
  // alike, and names an LDS makes up (each a definite no) take no room.
  // At the limit the one that resolved longest ago goes.
  struct Memory {
    std::mutex mutex;
    std::list<std::string> oldest_first;
    std::unordered_map<std::string, std::list<std::string>::iterator> resolved;

    void forget(const std::string& host) {
      const auto found = resolved.find(host);
      if (found == resolved.end()) return;
      oldest_first.erase(found->second);
      resolved.erase(found);
    }
    void remember(const std::string& host) {
      forget(host);
      if (resolved.size() >= kRememberedHosts) forget(oldest_first.front());
      resolved[host] = oldest_first.insert(oldest_first.end(), host);
    }
  };
  auto memory = std::make_shared<Memory>();
  return [lookup = std::move(lookup), memory](const std::string& host) {
    const std::optional<bool> answer = lookup(host);
    std::lock_guard lock(memory->mutex);
    if (!answer) return memory->resolved.contains(host);
    if (*answer)
      memory->remember(host);
    else
      memory->forget(host);
    return *answer;
  };
}

std::string reachable_url(const std::string& advertised_text, const OpcTcpUrl& advertised,
                          const OpcTcpUrl& queried, const HostResolves& resolves) {
  bool remote_loopback = is_loopback_host(advertised.host) && !is_loopback_host(queried.host);
  if (!remote_loopback && resolves(advertised.host)) return advertised_text;
  OpcTcpUrl rewritten = advertised;
  rewritten.host = queried.host;
  return to_string(rewritten);
}

}  // namespace opcua
