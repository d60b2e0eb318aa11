// node_cleanup: dead-node cleanup without a controller. Every agent watches
// the cluster's Node objects; when a node is deleted, or stays NotReady longer
// than a grace period, whichever agent gets there first scrubs that node's
// claims and `nodes` entry from every Instance (compare-and-swap makes the
// race between agents safe), and deletes an Instance no node sees any more.
#pragma once

#include "instance_store.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dowser::kube {
class KubeClient;
}

namespace dowser::node_cleanup {

using Clock = std::chrono::steady_clock;

// A core v1 Node is Ready when its condition of type Ready has status "True";
// no such condition (a node still joining) counts as not Ready.
bool node_ready(const nlohmann::json& node);

// The Instance without node: its `nodes` entry and the deviceUsage slots it
// holds ("<node>" or "C:<vdev>:<node>") removed. nullopt when node has
// neither.
std::optional<store::Instance> scrub_node(const store::Instance& instance, const std::string& node);

// Every node an Instance names: its `nodes` entries and the holders of its
// deviceUsage slots (values no agent could have written are skipped).
std::set<std::string> nodes_named_in(const store::Instance& instance);

// Decides when a node is dead (pure: time comes in as arguments). A node is
// due once per outage: when deleted, or when NotReady for grace since first
// seen so; turning Ready again starts over. Every agent sees a node die at
// the same moment, so each waits a further stagger in [0, spread), fixed per
// (agent, node): the first to scrub leaves the others nothing to write,
// instead of every agent reading and writing every Instance at once.
class DeadNodeTracker {
 public:
  explicit DeadNodeTracker(Clock::duration grace, Clock::duration spread = {},
                           std::string agent = {})
      : grace_(grace), spread_(spread), agent_(std::move(agent)) {}

  // Every node and whether it is Ready: listed nodes missing from it were deleted.
  void listed(const std::map<std::string, bool>& ready_by_node, Clock::time_point now);
  void changed(const std::string& node, bool ready, Clock::time_point now);
  void deleted(const std::string& node, Clock::time_point now);
  // Every node the Instances name. One that no listing or watch event has
  // shown (deleted while no agent watched, or whose agent wrote it back after
  // its Node was deleted) is treated as NotReady from now: due after the
  // grace unless it turns up meanwhile. One such node named again after it
  // was reported is due again, after a fresh grace; one no longer named is
  // forgotten. Returns the nodes whose grace starts now.
  std::vector<std::string> named_in_store(const std::set<std::string>& nodes,
                                          Clock::time_point now);

  // The nodes whose time has come, each reported once.
  std::vector<std::string> take_due(Clock::time_point now);
  // When the next node becomes due.
  std::optional<Clock::time_point> next_due() const;
  // This agent's extra wait for node.
  Clock::duration stagger(const std::string& node) const;

 private:
  struct Known {
    bool ready = true;
    Clock::time_point not_ready_since{};
    bool reported = false;
    bool listed = true;  // false: known only from the Instances that name it
  };
  Clock::time_point not_ready_due(const std::string& node, const Known& known) const;

  Clock::duration grace_;
  Clock::duration spread_;
  std::string agent_;
  std::map<std::string, Known> nodes_;
  std::map<std::string, Clock::time_point> deleted_;  // node, when due
};

// Scrubs node from every Instance in store. Throws store::StoreError when the
// store cannot be read or an Instance keeps changing under it.
void scrub_everywhere(store::InstanceStore& store, const std::string& node);

struct NodeCleanerOptions {
  std::string self;                                 // this agent's node: never scrubbed by itself
  Clock::duration grace = std::chrono::minutes(5);  // NotReady this long, a node is dead
  Clock::duration retry = std::chrono::seconds(5);  // after a failed scrub
  // How often the Instances are checked for nodes no Node object has (also
  // after every listing of the Nodes): a deleted node's agent still running
  // writes its claims back after they were scrubbed.
  Clock::duration store_check = std::chrono::minutes(5);
  // Each agent scrubs a dead node (NotReady past the grace, or deleted) up to
  // this much later (DeadNodeTracker's stagger). dowserd: a tenth of grace.
  Clock::duration spread{};
};

// Watches Nodes with a kube::Reflector and scrubs dead ones on its own thread.
class NodeCleaner {
 public:
  NodeCleaner(kube::KubeClient& client, store::InstanceStore& store, NodeCleanerOptions options);
  ~NodeCleaner();  // stops
  NodeCleaner(const NodeCleaner&) = delete;
  NodeCleaner& operator=(const NodeCleaner&) = delete;

  void start();
  // Tells its threads to end, without waiting: a request cut off after this
  // (its client stopped at a shutdown) is not warned of.
  void stop_soon();
  void stop();  // idempotent; stop_soon, then joins its threads

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dowser::node_cleanup
