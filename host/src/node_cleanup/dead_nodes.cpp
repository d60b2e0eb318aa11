// The pure decisions of dead-node cleanup: readiness, what to scrub, and when.
#include "naming.hpp"
#include "node_cleanup.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>

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
    if (deleted(entry)) deleted_.emplace(entry.first, now + stagger(entry.first));
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
  std::erase_if(nodes_, [&](const auto& entry) {
    return !entry.second.listed && nodes.count(entry.first) == 0;
  });
  const Known unlisted{.ready = false, .not_ready_since = now, .reported = false, .listed = false};
  std::vector<std::string> starting;
  for (const auto& node : nodes) {
    if (deleted_.count(node) > 0) continue;
    auto [entry, added] = nodes_.try_emplace(node, unlisted);
    Known& known = entry->second;
    const bool written_back = !added && !known.listed && known.reported;  // since its scrub
    if (written_back) known = unlisted;
    if (added || written_back) starting.push_back(node);
  }
  return starting;
}

void DeadNodeTracker::deleted(const std::string& node, Clock::time_point now) {
  nodes_.erase(node);
  deleted_.emplace(node, now + stagger(node));  // a second deletion event keeps the first time
}

std::vector<std::string> DeadNodeTracker::take_due(Clock::time_point now) {
  std::vector<std::string> due;
  std::erase_if(deleted_, [&](const auto& entry) {
    if (now < entry.second) return false;
    due.push_back(entry.first);
    return true;
  });
  for (auto& [node, known] : nodes_) {
    if (known.ready || known.reported || now < not_ready_due(node, known)) continue;
    known.reported = true;
    due.push_back(node);
  }
  return due;
}

std::optional<Clock::time_point> DeadNodeTracker::next_due() const {
  std::optional<Clock::time_point> next;
  const auto consider = [&next](Clock::time_point due) {
    if (!next || due < *next) next = due;
  };
  for (const auto& [node, due] : deleted_) consider(due);
  for (const auto& [node, known] : nodes_)
    if (!known.ready && !known.reported) consider(not_ready_due(node, known));
  return next;
}

Clock::time_point DeadNodeTracker::not_ready_due(const std::string& node,
                                                 const Known& known) const {
  return known.not_ready_since + grace_ + stagger(node);
}

Clock::duration DeadNodeTracker::stagger(const std::string& node) const {
  if (spread_ <= Clock::duration::zero()) return Clock::duration::zero();
  // std::hash of a string is the same in every agent built alike; agents
  // differ in agent_, so their staggers for one node spread out.
  const uint64_t hash = std::hash<std::string>{}(agent_ + '\n' + node);
  return spread_ * static_cast<int64_t>(hash % 1024) / 1024;
}

}  // namespace dowser::node_cleanup
