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

void DeadNodeTracker::listed(const std::map<std::string, bool>& ready_by_node,
                             Clock::time_point now) {
  for (const auto& [node, known] : nodes_)
    if (ready_by_node.count(node) == 0) deleted_.insert(node);
  std::erase_if(nodes_, [&](const auto& entry) { return ready_by_node.count(entry.first) == 0; });
  for (const auto& [node, ready] : ready_by_node) changed(node, ready, now);
}

void DeadNodeTracker::changed(const std::string& node, bool ready, Clock::time_point now) {
  deleted_.erase(node);  // re-created
  auto [entry, added] = nodes_.try_emplace(node);
  Known& known = entry->second;
  if (ready) {
    known = Known{};
  } else if (added || known.ready) {
    known = Known{false, now, false};
  }
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
