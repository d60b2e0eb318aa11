// The pure decisions of dead-node cleanup: readiness, what to scrub, and when.
#include "naming.hpp"
#include "node_cleanup.hpp"

#include <algorithm>

namespace dowser::node_cleanup {

bool node_ready(const nlohmann::json& node) {
  const auto pointer = "/status/conditions"_json_pointer;
  if (!node.contains(pointer) || !node.at(pointer).is_array()) return false;
  for (const auto& condition : node.at(pointer)) {
    if (condition.is_object() && condition.value("type", "") == "Ready")
      return condition.value("status", "") == "True";
  }
  return false;
}

std::optional<store::Instance> scrub_node(const store::Instance& instance,
                                          const std::string& node) {
  store::Instance scrubbed = instance;
  bool changed = scrubbed.nodes.erase(node) > 0;
  changed = naming::release_claims_of(scrubbed.device_usage, node) || changed;
  if (!changed) return std::nullopt;
  return scrubbed;
}

std::set<std::string> nodes_named_in(const store::Instance& instance) {
  std::set<std::string> nodes = instance.nodes;
  for (const auto& [slot, value] : instance.device_usage) {
    try {
      naming::SlotUsage usage = naming::parse_usage(value);
      if (!usage.is_free()) nodes.insert(std::move(usage.node));
    } catch (const naming::UsageParseError&) {
      // not an agent's claim: no node to judge
    }
  }
  return nodes;
}

void DeadNodeTracker::listed(const std::map<std::string, bool>& ready_by_node,
                             Clock::time_point now) {
  const auto deleted = [&](const auto& entry) {
    return entry.second.listed && ready_by_node.count(entry.first) == 0;
  };
  for (const auto& entry : nodes_)
    if (deleted(entry)) deleted_.insert(entry.first);
  std::erase_if(nodes_, deleted);
  for (const auto& [node, ready] : ready_by_node) changed(node, ready, now);
}

void DeadNodeTracker::changed(const std::string& node, bool ready, Clock::time_point now) {
  deleted_.erase(node);  // re-created
  auto [entry, added] = nodes_.try_emplace(node);
  Known& known = entry->second;
  if (ready) {
    known = Known{};
  } else if (added || known.ready || !known.listed) {
    known = Known{.ready = false, .not_ready_since = now, .reported = false, .listed = true};
  }
}

std::vector<std::string> DeadNodeTracker::named_in_store(const std::set<std::string>& nodes,
                                                         Clock::time_point now) {
  std::vector<std::string> unknown;
  for (const auto& node : nodes) {
    if (deleted_.count(node) > 0) continue;
    auto [entry, added] = nodes_.try_emplace(
        node, Known{.ready = false, .not_ready_since = now, .reported = false, .listed = false});
    if (added) unknown.push_back(node);
  }
  return unknown;
}

void DeadNodeTracker::deleted(const std::string& node) {
  nodes_.erase(node);
  deleted_.insert(node);
}

std::vector<std::string> DeadNodeTracker::take_due(Clock::time_point now) {
  std::vector<std::string> due(deleted_.begin(), deleted_.end());
  deleted_.clear();
  for (auto& [node, known] : nodes_) {
    if (known.ready || known.reported || now < known.not_ready_since + grace_) continue;
    known.reported = true;
    due.push_back(node);
  }
  return due;
}

std::optional<Clock::time_point> DeadNodeTracker::next_due(Clock::time_point now) const {
  if (!deleted_.empty()) return now;
  std::optional<Clock::time_point> next;
  for (const auto& [node, known] : nodes_) {
    if (known.ready || known.reported) continue;
    Clock::time_point due = known.not_ready_since + grace_;
    if (!next || due < *next) next = due;
  }
  return next;
}

}  // namespace dowser::node_cleanup
