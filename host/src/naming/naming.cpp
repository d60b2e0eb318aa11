#include "naming.hpp"

#include <blake2.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <climits>
#include <cstdlib>

namespace dowser::naming {
namespace {

bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// Kubernetes IsQualifiedName's name part: at most 63, alphanumeric at both
// ends, '-', '_' and '.' inside.
std::string qualified_name_part_problem(std::string_view part) {
  if (part.empty()) return "the name part after '/' is empty";
  if (part.size() > 63) return "the name part after '/' is longer than 63 characters";
  if (!is_alnum(part.front()) || !is_alnum(part.back()))
    return "the name part after '/' must start and end with a letter or digit";
  bool allowed = std::all_of(part.begin(), part.end(), [](char c) {
    return is_alnum(c) || c == '-' || c == '_' || c == '.';
  });
  return allowed ? "" : "the name part after '/' may only hold letters, digits, '-', '_' and '.'";
}

// A DNS-1123 subdomain: lowercase alphanumeric labels joined by '.', '-'
// inside labels. what names the text in the reason ("the prefix").
std::string dns_subdomain_problem(std::string_view text, const std::string& what) {
  if (text.empty() || text.size() > 253) return what + " must be 1 to 253 characters";
  auto lower_alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_alnum(text.front()) || !lower_alnum(text.back()))
    return what + " must start and end with a lowercase letter or digit";
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (lower_alnum(c) || c == '-') continue;
    if (c == '.' && text[i - 1] != '.' && text[i - 1] != '-' && text[i + 1] != '-') continue;
    return what + " must be a DNS subdomain (lowercase letters, digits, '-' and '.')";
  }
  return "";
}

// BLAKE2b of input with a Bytes-byte digest, in lowercase hex.
template <size_t Bytes>
std::string hex_digest(std::string_view input) {
  std::array<uint8_t, Bytes> digest{};
  blake2b(digest.data(), input.data(), nullptr, digest.size(), input.size(), 0);
  static constexpr char hex[] = "0123456789abcdef";
  std::string text;
  for (uint8_t byte : digest) {
    text += hex[byte >> 4];
    text += hex[byte & 0xf];
  }
  return text;
}

}  // namespace

std::string device_digest(std::string_view device_id, bool shared, std::string_view node) {
  std::string input(device_id);
  if (!shared) input += node;
  return hex_digest<3>(input);
}

std::string event_name(std::string_view object_name, std::string_view problem) {
  // A DNS subdomain of at most 253: the object's name is cut to leave room
  // for ".<16 hex>", and where it is cut, no '-' or '.' may end it.
  constexpr size_t kMaxObjectPart = 253 - 17;
  std::string name(object_name.substr(0, kMaxObjectPart));
  while (!name.empty() && (name.back() == '-' || name.back() == '.')) name.pop_back();
  return name + "." + hex_digest<8>(problem);
}

std::string instance_name(std::string_view configuration, std::string_view device_id, bool shared,
                          std::string_view node) {
  return std::string(configuration) + "-" + device_digest(device_id, shared, node);
}

std::string slot_name(std::string_view instance, uint32_t index) {
  return std::string(instance) + "-" + std::to_string(index);
}

std::optional<uint32_t> slot_index(std::string_view slot, std::string_view instance,
                                   uint32_t capacity) {
  if (slot.size() <= instance.size() + 1 || slot.substr(0, instance.size()) != instance ||
      slot[instance.size()] != '-') {
    return std::nullopt;
  }
  std::string_view digits = slot.substr(instance.size() + 1);
  if (digits.size() > 1 && digits.front() == '0') return std::nullopt;  // one spelling per slot
  uint32_t index = 0;
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (error != std::errc() || end != digits.data() + digits.size() || index >= capacity)
    return std::nullopt;
  return index;
}

SlotUsage parse_usage(std::string_view value) {
  if (value.empty()) return SlotUsage::free_slot();
  auto fail = [&](const char* why) {
    throw UsageParseError("slot usage '" + std::string(value) + "': " + why);
  };
  // A claim names a node: a value no node could have is unreadable, not a
  // claim of some node nobody knows (still counted as taken).
  auto node_of = [&](std::string_view node) {
    if (auto problem = node_name_problem(node); !problem.empty()) fail(problem.c_str());
    return std::string(node);
  };
  if (value.find(':') == std::string_view::npos) return SlotUsage::instance_level(node_of(value));
  if (value.substr(0, 2) != "C:") fail("expected '<node>' or 'C:<virtual device>:<node>'");
  std::string_view rest = value.substr(2);
  size_t colon = rest.find(':');
  if (colon == std::string_view::npos) fail("expected 'C:<virtual device>:<node>'");
  std::string_view vdev = rest.substr(0, colon), node = rest.substr(colon + 1);
  if (vdev.empty()) fail("the virtual device is empty");
  if (node.empty()) fail("the node is empty");
  if (node.find(':') != std::string_view::npos) fail("a node name cannot hold ':'");
  return SlotUsage::configuration_level(std::string(vdev), node_of(node));
}

bool is_claim_of(std::string_view usage, std::string_view node) {
  try {
    SlotUsage parsed = parse_usage(usage);
    return !parsed.is_free() && parsed.node == node;
  } catch (const UsageParseError&) {
    return false;
  }
}

bool release_claims_of(std::map<std::string, std::string>& device_usage, std::string_view node) {
  return std::erase_if(device_usage,
                       [node](const auto& slot) { return is_claim_of(slot.second, node); }) > 0;
}

std::string format_usage(const SlotUsage& usage) {
  switch (usage.kind) {
    case SlotUsage::Kind::free:
      return "";
    case SlotUsage::Kind::instance:
      return usage.node;
    case SlotUsage::Kind::configuration:
      return "C:" + usage.vdev + ":" + usage.node;
  }
  return "";
}

std::string extended_resource_name_problem(std::string_view name) {
  size_t slash = name.find('/');
  if (slash == std::string_view::npos) return "it has no '<domain>/' prefix";
  if (name.find("kubernetes.io/") != std::string_view::npos)
    return "'kubernetes.io/' names are reserved for Kubernetes";
  if (name.substr(0, 9) == "requests.") return "it may not start with 'requests.'";
  if (name.find('/', slash + 1) != std::string_view::npos) return "it has more than one '/'";
  // The kubelet checks "requests." + name as a qualified name.
  std::string prefix = "requests." + std::string(name.substr(0, slash));
  if (auto problem = dns_subdomain_problem(prefix, "the prefix"); !problem.empty()) return problem;
  return qualified_name_part_problem(name.substr(slash + 1));
}

std::string instance_name_problem(std::string_view name) {
  return dns_subdomain_problem(name, "an Instance name");
}

std::string node_name_problem(std::string_view node) {
  return dns_subdomain_problem(node, "a node name");
}

DefaultNodeName default_node_name() {
  if (const char* node = std::getenv("NODE_NAME"); node != nullptr && *node != '\0')
    return {node, "the NODE_NAME environment variable"};
  char host[HOST_NAME_MAX + 1] = {};
  ::gethostname(host, sizeof host);
  std::string name = host;
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return {name, "the host name"};
}

std::string resource_name(std::string_view domain, std::string_view name) {
  std::string full = std::string(domain) + "/" + std::string(name);
  if (auto problem = extended_resource_name_problem(full); !problem.empty())
    throw std::invalid_argument("resource name '" + full + "' is not valid: " + problem);
  return full;
}

}  // namespace dowser::naming
