// Naming: the names dowser gives things, compatible with Akri's: Instance
// names (BLAKE2b, 3-byte digest), slot names, slot usage values, Event
// names, and the Kubernetes extended-resource names the kubelet will accept.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dowser::naming {

// The 6 lowercase hex digits of BLAKE2b with a 3-byte digest of
// device_id (shared devices) or device_id + node (local devices).
std::string device_digest(std::string_view device_id, bool shared, std::string_view node);

// "<object>.<16 hex digits>": a Kubernetes Event's name, from BLAKE2b of
// what the Event tells (the object's uid and version, the reason and the
// message). Every node that sees the same problem names its Event alike, so
// the API server keeps one (the others' creates are refused as duplicates).
std::string event_name(std::string_view object_name, std::string_view problem);

// <configuration>-<digest>
std::string instance_name(std::string_view configuration, std::string_view device_id, bool shared,
                          std::string_view node);

// <instance>-<index>
std::string slot_name(std::string_view instance, uint32_t index);

// The index of a slot of this instance, or nullopt when slot is not
// "<instance>-<decimal index>" with index < capacity.
std::optional<uint32_t> slot_index(std::string_view slot, std::string_view instance,
                                   uint32_t capacity);

// What holds a slot: deviceUsage values. One grammar: "" (free), "<node>"
// (the Instance-level plugin on node), "C:<vdev>:<node>" (the
// Configuration-level plugin on node, for virtual device vdev).
struct SlotUsage {
  enum class Kind { free, instance, configuration };
  Kind kind = Kind::free;
  std::string node;
  std::string vdev;

  static SlotUsage free_slot() { return {}; }
  static SlotUsage instance_level(std::string node) {
    return {Kind::instance, std::move(node), {}};
  }
  static SlotUsage configuration_level(std::string vdev, std::string node) {
    return {Kind::configuration, std::move(node), std::move(vdev)};
  }
  bool is_free() const noexcept { return kind == Kind::free; }
  friend bool operator==(const SlotUsage&, const SlotUsage&) = default;
};

class UsageParseError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Throws UsageParseError naming the value and what is wrong with it.
SlotUsage parse_usage(std::string_view value);
std::string format_usage(const SlotUsage& usage);

// Whether a deviceUsage value is a claim node holds, IL or CL. Values nobody
// could have written are no one's: not ours to judge.
bool is_claim_of(std::string_view usage, std::string_view node);
// Removes from a deviceUsage map (slot -> usage) every claim node holds.
// Returns whether anything was removed.
bool release_claims_of(std::map<std::string, std::string>& device_usage, std::string_view node);

// <domain>/<name>, checked as the kubelet's IsExtendedResourceName does.
// Throws std::invalid_argument saying which rule the name breaks.
std::string resource_name(std::string_view domain, std::string_view name);

// Empty when name is a valid extended resource name, else the reason.
std::string extended_resource_name_problem(std::string_view name);

// Empty when name may name an Instance (a DNS-1123 subdomain, as for every
// Kubernetes object of its kind), else the reason.
std::string instance_name_problem(std::string_view name);

// Empty when node is a valid Kubernetes node name (a DNS-1123 subdomain),
// else the reason. Claims name their node: one with a ':' could not be read
// back, so the daemon refuses such a name at start.
std::string node_name_problem(std::string_view node);

// This node's name as the kubelet names it by default: $NODE_NAME, else the
// host name, lowercased; origin says which, for messages about the name.
struct DefaultNodeName {
  std::string name;
  std::string origin;  // "the NODE_NAME environment variable" or "the host name"
};
DefaultNodeName default_node_name();

}  // namespace dowser::naming
