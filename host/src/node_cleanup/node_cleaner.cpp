// NodeCleaner: a Node reflector feeding a DeadNodeTracker, and a thread that
// scrubs the nodes it reports from the store.
#include "kube_client.hpp"
#include "node_cleanup.hpp"
#include "thread_names.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

namespace dowser::node_cleanup {
namespace {

using kube::resources::kNodes;
constexpr int kMaxRemoveAttempts = 16;

std::string name_of(const nlohmann::json& node) {
  return node.value("/metadata/name"_json_pointer, std::string());
}

// Scrubs one Instance; the last node out deletes it, conditioned on the
// revision it read, so a node joining meanwhile keeps it.
void scrub_instance(store::InstanceStore& store, const store::Instance& instance,
                    const std::string& node) {
  for (int attempt = 0; attempt < kMaxRemoveAttempts; ++attempt) {
    auto after = store::update_with_retry(
        store, instance.namespace_name, instance.name,
        [&node](const store::Instance& current) { return scrub_node(current, node); });
    if (!after || !after->instance.nodes.empty()) return;
    try {
      store.remove(instance.namespace_name, instance.name, after->revision);
      spdlog::info("Instance {}/{}: deleted; dead node {} was the last to see it",
                   instance.namespace_name, instance.name, node);
      return;
    } catch (const store::StoreError& error) {
      if (error.kind() == store::StoreError::Kind::not_found) return;
      if (error.kind() != store::StoreError::Kind::conflict) throw;
    }
  }
  throw store::StoreError(store::StoreError::Kind::conflict,
                          "Instance " + instance.namespace_name + "/" + instance.name +
                              " keeps changing under the cleanup of node " + node);
}

}  // namespace

void scrub_everywhere(store::InstanceStore& store, const std::string& node) {
  for (const auto& stored : store.list()) {
    if (!scrub_node(stored.instance, node)) continue;
    spdlog::info("Instance {}/{}: scrubbing dead node {}", stored.instance.namespace_name,
                 stored.instance.name, node);
    scrub_instance(store, stored.instance, node);
  }
}

struct NodeCleaner::State {
  State(kube::KubeClient& client_in, store::InstanceStore& store_in, NodeCleanerOptions options_in)
      : client(client_in),
        store(store_in),
        options(std::move(options_in)),
        tracker(options.grace, options.spread, options.self) {}

  void listed(const std::vector<nlohmann::json>& nodes);
  void changed(const std::string& type, const nlohmann::json& node);
  void failed(const kube::ApiError& error);
  void current();
  void run();
  void check_store(std::unique_lock<std::mutex>& lock);
  void keep_pending(const std::string& node, const char* because);
  void scrub_pending(std::unique_lock<std::mutex>& lock);

  kube::KubeClient& client;
  store::InstanceStore& store;
  const NodeCleanerOptions options;

  std::mutex mutex;
  std::condition_variable wake;
  DeadNodeTracker tracker;             // under mutex
  std::atomic<bool> stopping = false;  // set under mutex (the waits check it)
  // Under mutex: when to check the Instances against the Node list, set
  // once a listing shows this node (so that it is the cluster's whole list).
  std::optional<Clock::time_point> store_check_at;
  bool self_missing = false;  // under mutex: the last listing did not show this node
  // Under mutex: the Node reflector's last request succeeded. While it fails
  // a node that joined meanwhile is unknown here, so its Instances prove
  // nothing: no store check runs.
  bool nodes_current = false;
  std::set<std::string> pending;  // under mutex: due, not yet scrubbed
  std::unique_ptr<kube::Reflector> reflector;
  std::thread worker;
};

void NodeCleaner::State::listed(const std::vector<nlohmann::json>& nodes) {
  std::map<std::string, bool> ready_by_node;
  for (const auto& node : nodes) ready_by_node[name_of(node)] = node_ready(node);
  {
    std::lock_guard lock(mutex);
    tracker.listed(ready_by_node, Clock::now());
    nodes_current = true;
    for (const auto& [name, ready] : ready_by_node)
      if (ready) keep_pending(name, "is Ready again");
    // Without its own Node in the list (RBAC, or a node not registered yet)
    // a list proves nothing about the nodes missing from it.
    const bool was_missing = std::exchange(self_missing, ready_by_node.count(options.self) == 0);
    if (!self_missing) {
      store_check_at = Clock::now();
    } else {
      store_check_at.reset();  // not even one already due
      if (!was_missing) {
        spdlog::warn(
            "Kubernetes nodes: this node ({}) is not among the {} listed; nodes that Instances "
            "name but that have no Node object are left alone until it shows",
            options.self, ready_by_node.size());
      }
    }
  }
  wake.notify_all();
}

// The nodes Instances name that no listing showed: deleted while no agent
// watched (or never registered). They get the NotReady grace from now.
void NodeCleaner::State::check_store(std::unique_lock<std::mutex>& lock) {
  store_check_at.reset();
  if (!nodes_current) return;  // listed() or current() asks again
  std::set<std::string> named;
  lock.unlock();
  try {
    for (const auto& stored : store.list()) named.merge(nodes_named_in(stored.instance));
  } catch (const store::StoreError& error) {
    if (!stopping)
      spdlog::warn("dead-node cleanup: cannot list Instances: {} (retrying)", error.what());
    lock.lock();
    if (!store_check_at) store_check_at = Clock::now() + options.retry;
    return;
  }
  lock.lock();
  // The Nodes failed, or a listing without this node came, while it listed.
  if (!nodes_current || self_missing) return;
  if (!store_check_at) store_check_at = Clock::now() + options.store_check;
  // Named still because its scrub failed: not written back, nor new.
  for (const auto& node : pending) named.erase(node);
  for (const auto& node : tracker.named_in_store(named, Clock::now())) {
    spdlog::info(
        "node {} is named in Instances but has no Node object: its claims are scrubbed in {} s "
        "unless it registers",
        node,
        std::chrono::duration_cast<std::chrono::seconds>(options.grace + tracker.stagger(node))
            .count());
  }
}

void NodeCleaner::State::changed(const std::string& type, const nlohmann::json& node) {
  {
    std::lock_guard lock(mutex);
    const std::string name = name_of(node);
    if (type == "DELETED") {
      tracker.deleted(name, Clock::now());
    } else {
      const bool ready = node_ready(node);
      tracker.changed(name, ready, Clock::now());
      // Created again, it has a fresh grace (DeadNodeTracker) like any new node.
      if (ready || type == "ADDED")
        keep_pending(name, ready ? "is Ready again" : "was created again");
      if (name == options.self && std::exchange(self_missing, false)) store_check_at = Clock::now();
    }
  }
  wake.notify_all();
}

// Back after failures (the reflector watches on without a new list, and on
// a quiet cluster only bookmarks come): the Instances are checked again.
void NodeCleaner::State::current() {
  {
    std::lock_guard lock(mutex);
    if (std::exchange(nodes_current, true) || self_missing || store_check_at) return;
    store_check_at = Clock::now();
  }
  wake.notify_all();
}

void NodeCleaner::State::failed(const kube::ApiError& error) {
  {
    const std::lock_guard lock(mutex);
    nodes_current = false;
  }
  spdlog::warn("Kubernetes nodes: {} (retrying)", error.what());
}

// A node whose scrub failed and is retried may come back meanwhile (a
// struggling API server goes with nodes turning NotReady): its agent's new
// claims must not be scrubbed when the retry succeeds. Under mutex.
void NodeCleaner::State::keep_pending(const std::string& node, const char* because) {
  if (pending.erase(node) > 0)
    spdlog::info("node {} {} before its failed cleanup was retried: its claims are kept", node,
                 because);
}

// Store I/O without the lock, so the reflector keeps going; a node that
// came back while its scrub ran is scrubbed all the same (once).
void NodeCleaner::State::scrub_pending(std::unique_lock<std::mutex>& lock) {
  const std::set<std::string> due = pending;
  lock.unlock();
  std::set<std::string> scrubbed;
  for (const auto& node : due) {
    try {
      scrub_everywhere(store, node);
      scrubbed.insert(node);
    } catch (const store::StoreError& error) {
      if (!stopping) spdlog::warn("cleanup of dead node {}: {} (retrying)", node, error.what());
    }
  }
  lock.lock();
  for (const auto& node : scrubbed) pending.erase(node);
}

void NodeCleaner::State::run() {
  std::unique_lock lock(mutex);
  while (!stopping) {
    if (store_check_at && *store_check_at <= Clock::now()) check_store(lock);
    for (auto& node : tracker.take_due(Clock::now())) {
      if (node == options.self) continue;  // alive enough to run this: it withdraws by itself
      spdlog::info("node {} is gone or NotReady past its grace: scrubbing its claims", node);
      pending.insert(std::move(node));
    }
    if (!pending.empty()) scrub_pending(lock);
    auto next = tracker.next_due();
    if (!pending.empty()) {
      Clock::time_point retry = Clock::now() + options.retry;
      next = next ? std::min(*next, retry) : retry;
    }
    if (store_check_at) next = next ? std::min(*next, *store_check_at) : *store_check_at;
    // stop() may have come while check_store or scrub_pending had the lock
    // released: its notify is gone, and waiting would outlast the process.
    if (stopping) break;
    if (next)
      wake.wait_until(lock, *next);
    else
      wake.wait(lock);
  }
}

NodeCleaner::NodeCleaner(kube::KubeClient& client, store::InstanceStore& store,
                         NodeCleanerOptions options)
    : state_(std::make_unique<State>(client, store, std::move(options))) {}

NodeCleaner::~NodeCleaner() { stop(); }

void NodeCleaner::start() {
  State& state = *state_;
  if (state.reflector) throw std::logic_error("NodeCleaner already started");
  state.reflector = std::make_unique<kube::Reflector>(
      state.client, kNodes, "",
      kube::Reflector::Handlers{
          [&state](const kube::Reflector::Listing& listing) { state.listed(listing.objects); },
          [&state](const std::string& type, const nlohmann::json& node) {
            state.changed(type, node);
          },
          [&state](const kube::ApiError& error) { state.failed(error); },
          [&state] { state.current(); }});
  state.worker = std::thread([&state] {
    name_this_thread("node-cleaner");
    state.run();
  });
  state.reflector->start();
}

void NodeCleaner::stop_soon() {
  State& state = *state_;
  {
    std::lock_guard lock(state.mutex);
    state.stopping = true;
  }
  state.wake.notify_all();
}

void NodeCleaner::stop() {
  State& state = *state_;
  stop_soon();
  if (state.worker.joinable()) spdlog::debug("dead-node cleanup: stopping");
  if (state.reflector) state.reflector->stop();
  if (state.worker.joinable()) state.worker.join();
}

}  // namespace dowser::node_cleanup
