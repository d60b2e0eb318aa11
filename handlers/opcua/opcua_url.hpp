// opc.tcp URLs: parsing, and the rule that makes a server's advertised URL
// usable from this node (see README.md, "URL rewriting").
#ifndef DOWSER_HANDLERS_OPCUA_OPCUA_URL_HPP
#define DOWSER_HANDLERS_OPCUA_OPCUA_URL_HPP

#include "cancellation.hpp"
#include "tcp_stream.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace opcua {

inline constexpr uint16_t kDefaultOpcUaPort = 4840;

struct OpcTcpUrl {
  std::string host;  // an IPv6 literal without its brackets
  uint16_t port = kDefaultOpcUaPort;
  std::string path;  // empty or starting with '/'
  friend bool operator==(const OpcTcpUrl&, const OpcTcpUrl&) = default;
};

// Parses opc.tcp://host[:port][/path] (scheme in any case, IPv6 literals in
// brackets). Returns nullopt and sets *why for anything else.
std::optional<OpcTcpUrl> parse_opc_tcp_url(std::string_view url, std::string* why = nullptr);

// opc.tcp://host:port/path, with brackets around an IPv6 literal.
std::string to_string(const OpcTcpUrl& url);

// True for a URL of the opc.tcp scheme, in any case.
bool has_opc_tcp_scheme(std::string_view url);

// localhost (and names under .localhost), 127.0.0.0/8 and ::1.
bool is_loopback_host(std::string_view host);

// Whether a host name resolves from this node.
using HostResolves = std::function<bool(const std::string& host)>;

// The same question, where nullopt means the resolver cannot say now
// (EAI_AGAIN: no DNS server answered), or the scan was cancelled.
using HostLookup = std::function<std::optional<bool>(const std::string& host)>;
std::optional<bool> resolves_with_getaddrinfo(const std::string& host,
                                              const Cancellation& cancellation,
                                              const Resolver& resolver = ::getaddrinfo);

// Answers from lookup; where it cannot say, the last answer it gave for that
// host, so that a DNS blip does not move a server to the LDS's host (and to
// another id). A host it never answered for is taken as not resolving, as on
// a node without DNS, where every lookup fails that way. Safe to call from
// several threads; remembers at most kRememberedHosts names that resolved.
HostResolves remembering_last_answers(HostLookup lookup);
inline constexpr size_t kRememberedHosts = 4096;

// The URL to report for a server that a FindServers on `queried` listed as
// `advertised` (a parsed opc.tcp URL, `advertised_text` as sent). When the
// advertised host does not resolve here, or is a loopback name while the
// queried host is not (a remote LDS saying "localhost" means its own
// machine), the host is replaced by the queried host; port and path stay.
std::string reachable_url(const std::string& advertised_text, const OpcTcpUrl& advertised,
                          const OpcTcpUrl& queried, const HostResolves& resolves);

}  // namespace opcua

#endif  // DOWSER_HANDLERS_OPCUA_OPCUA_URL_HPP
