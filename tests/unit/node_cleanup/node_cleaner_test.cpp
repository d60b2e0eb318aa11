// The NodeCleaner's thread against the test API server
// (tests/peers/kube-apiserver) and a real file store.
#include "apiserver_peer.hpp"
#include "eventually.hpp"
#include "log_capture.hpp"
#include "node_cleanup.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>

namespace dowser::node_cleanup {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// A file store whose first list() (the cleaner's check of the Instances
// against the Node list) is held until stop() has been asked for, as it is
// told by the cleaner's log.
class StoreListingUntilStop : public store::FileInstanceStore {
 public:
  StoreListingUntilStop(const std::filesystem::path& directory, const test::LogCapture& log)
      : FileInstanceStore(directory), log_(log) {}

  std::vector<store::StoredInstance> list() override {
    if (!std::exchange(held_, true)) {
      entered_.set_value();
      test::eventually(
          [this] { return log_.text().find("dead-node cleanup: stopping") != std::string::npos; });
    }
    return FileInstanceStore::list();
  }

  std::future<void> entered() { return entered_.get_future(); }

 private:
  const test::LogCapture& log_;
  bool held_ = false;  // the cleaner's thread only
  std::promise<void> entered_;
};

// stop() that comes while the cleaner's thread has released its lock for
// store I/O must still end that thread: it once waited for a wake-up that
// had come and gone, and dowserd hung on SIGTERM.
TEST(NodeCleaner, AStopDuringTheStoreCheckEndsTheThread) {
  kube::testing::TestApiServer server({"--no-crds"});
  kube::KubeClient client(server.access());
  client.create(kube::resources::kNodes, "",
                {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node-a"}}}});
  test::LogCapture log;
  spdlog::default_logger()->set_level(spdlog::level::debug);
  const test::TempDir directory{"dowser-node-cleaner"};
  StoreListingUntilStop store(directory.path(), log);
  auto entered = store.entered();
  NodeCleaner cleaner(client, store, {"node-a"});
  cleaner.start();
  ASSERT_EQ(entered.wait_for(20s), std::future_status::ready)
      << "a listing that shows this node checks the store";

  auto stopped = std::async(std::launch::async, [&] { cleaner.stop(); });
  if (stopped.wait_for(20s) != std::future_status::ready) {
    // The stop cannot be abandoned: its thread is joining the cleaner's.
    std::fputs("NodeCleaner::stop() did not return: its thread missed the stop\n", stderr);
    std::_Exit(EXIT_FAILURE);
  }
}

// A file store whose writes fail while `failing` is set (a struggling disk,
// or API server), and that counts its listings.
class StoreWithFailingWrites : public store::FileInstanceStore {
 public:
  using FileInstanceStore::FileInstanceStore;
  uint64_t update(const store::Instance& instance, uint64_t expected_revision) override {
    if (failing) throw store::StoreError(store::StoreError::Kind::io, "writes are failing");
    return FileInstanceStore::update(instance, expected_revision);
  }
  std::vector<store::StoredInstance> list() override {
    ++listings;
    return FileInstanceStore::list();
  }
  std::atomic<bool> failing{true};
  std::atomic<int> listings{0};
};

json node_named(const std::string& name) {
  return {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}};
}

store::Instance instance_held_by(const std::string& name, const std::string& node) {
  store::Instance instance;
  instance.name = name;
  instance.configuration_name = "cams";
  instance.capacity = 2;
  instance.shared = true;
  instance.nodes = {"node-a", node};
  instance.device_usage = {{name + "-0", node}};
  return instance;
}

// A node deleted, whose scrub failed, then created again before the retry:
// its agent is back, so the retry must leave its claims alone (it used to
// scrub them once the store answered again).
TEST(NodeCleaner, ANodeBackBeforeItsFailedScrubIsRetriedKeepsItsClaims) {
  kube::testing::TestApiServer server({"--no-crds"});
  kube::KubeClient client(server.access());
  for (const char* node : {"node-a", "node-b", "node-c"})
    client.create(kube::resources::kNodes, "", node_named(node));
  test::LogCapture log;
  const test::TempDir directory{"dowser-node-cleaner"};
  StoreWithFailingWrites store(directory.path());
  store.create(instance_held_by("cams-bbbbbb", "node-b"));
  store.create(instance_held_by("cams-cccccc", "node-c"));
  // Nodes without a Ready condition are NotReady: the long grace keeps them
  // from being due; a deleted node is due at once.
  NodeCleaner cleaner(client, store, {"node-a", std::chrono::minutes(10), 50ms});
  cleaner.start();
  // The cleaner checks the store once a listing showed its node: from then
  // on a Node that goes is deleted, not one it never saw.
  ASSERT_TRUE(test::eventually([&] { return store.listings > 0; }));

  client.remove(kube::resources::kNodes, "", "node-b");
  ASSERT_TRUE(test::eventually([&] {
    return log.text().find("cleanup of dead node node-b: writes are failing (retrying)") !=
           std::string::npos;
  })) << log.text();
  client.create(kube::resources::kNodes, "", node_named("node-b"));
  ASSERT_TRUE(test::eventually([&] {
    return log.text().find(
               "node node-b was created again before its failed cleanup was "
               "retried: its claims are kept") != std::string::npos;
  })) << log.text();

  // A round that scrubs node-c would have scrubbed node-b too, had it kept it.
  store.failing = false;
  client.remove(kube::resources::kNodes, "", "node-c");
  ASSERT_TRUE(test::eventually([&] {
    return store.get("default", "cams-cccccc")->instance.nodes == std::set<std::string>{"node-a"};
  })) << log.text();
  const auto kept = store.get("default", "cams-bbbbbb");
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->instance.nodes, (std::set<std::string>{"node-a", "node-b"}));
  EXPECT_EQ(kept->instance.device_usage,
            (std::map<std::string, std::string>{{"cams-bbbbbb-0", "node-b"}}));
  cleaner.stop();
}

// A Node deleted while its agent still runs: the agent writes its claims
// back after every other agent scrubbed them. The periodic check of the
// Instances finds the node again and scrubs it again, so nothing it held
// stays claimed once it is gone for good.
TEST(NodeCleaner, ADeletedNodeWrittenBackIsScrubbedAgain) {
  kube::testing::TestApiServer server({"--no-crds"});
  kube::KubeClient client(server.access());
  for (const char* node : {"node-a", "node-b"})
    client.create(kube::resources::kNodes, "", node_named(node));
  test::LogCapture log;
  const test::TempDir directory{"dowser-node-cleaner"};
  StoreWithFailingWrites store(directory.path());
  store.failing = false;
  store.create(instance_held_by("cams-bbbbbb", "node-b"));
  // Nodes without a Ready condition are NotReady: the grace outlasts the test
  // up to node-b's deletion.
  NodeCleaner cleaner(client, store,
                      {.self = "node-a", .grace = 2s, .retry = 50ms, .store_check = 100ms});
  cleaner.start();
  ASSERT_TRUE(test::eventually([&] { return store.listings > 0; }));
  const auto scrubbed = [&] {
    const store::Instance instance = store.get("default", "cams-bbbbbb")->instance;
    return instance.nodes == std::set<std::string>{"node-a"} && instance.device_usage.empty();
  };

  client.remove(kube::resources::kNodes, "", "node-b");
  ASSERT_TRUE(test::eventually(scrubbed)) << log.text();
  const auto current = store.get("default", "cams-bbbbbb");
  store.update(instance_held_by("cams-bbbbbb", "node-b"), current->revision);  // node-b's agent
  ASSERT_TRUE(test::eventually(scrubbed)) << "scrubbed once only: " << log.text();
  EXPECT_NE(log.text().find("node node-b is named in Instances but has no Node object"),
            std::string::npos)
      << log.text();
  cleaner.stop();
}

// node-a's cleaner with a grace of 200 ms and a check of the Instances every
// 50 ms, over a file store whose writes succeed, started.
struct QuickCleaner {
  explicit QuickCleaner(kube::KubeClient& client)
      : cleaner(client, store,
                {.self = "node-a", .grace = 200ms, .retry = 50ms, .store_check = 50ms}) {
    store.failing = false;
    cleaner.start();
  }
  bool checked_once() const {
    return test::eventually([&] { return store.listings > 0; });
  }

  test::LogCapture log;
  const test::TempDir directory{"dowser-node-cleaner"};
  StoreWithFailingWrites store{directory.path()};
  NodeCleaner cleaner;
};

// While the Nodes cannot be read, a node that joined meanwhile is unknown
// here: the Instances that name it must not get it scrubbed as gone.
TEST(NodeCleaner, NoNodeIsJudgedByTheInstancesWhileTheNodesCannotBeRead) {
  kube::testing::TestApiServer server({"--no-crds"});
  kube::KubeClient client(server.access());
  client.create(kube::resources::kNodes, "", node_named("node-a"));
  QuickCleaner quick(client);
  ASSERT_TRUE(quick.checked_once());
  auto& [log, directory, store, cleaner] = quick;

  server.stop();
  ASSERT_TRUE(test::eventually([&] {
    return log.text().find("Kubernetes nodes: ") != std::string::npos;
  })) << log.text();
  store.create(instance_held_by("cams-nnnnnn", "node-new"));  // its node joined meanwhile
  // A check every 50 ms and a grace of 200 ms: 1 s is time enough to scrub it.
  EXPECT_FALSE(test::eventually(
      [&] { return store.get("default", "cams-nnnnnn")->instance.nodes.count("node-new") == 0; },
      1s))
      << log.text();
  cleaner.stop();
}

// After a failed Node request the reflector watches on from where it was,
// without a list, and a quiet cluster sends only bookmarks: they must resume
// the checks of the Instances (only a Node change did), or a node that went
// meanwhile keeps its claims until some Node changes.
TEST(NodeCleaner, ChecksResumeOnceTheNodesCanBeReadAgainWithoutANodeChange) {
  kube::testing::TestApiServer server({"--no-crds", "--bookmark-interval-ms", "100"});
  kube::Timeouts timeouts;
  timeouts.watch_duration = 1s;  // the next watch meets the token changed below
  kube::KubeClient client(server.access(), timeouts);
  client.create(kube::resources::kNodes, "", node_named("node-a"));
  QuickCleaner quick(client);
  ASSERT_TRUE(quick.checked_once());
  auto& [log, directory, store, cleaner] = quick;

  const std::string token = kube::testing::read_text(server.token_file());
  kube::testing::write_text(server.token_file(), "not-the-token");  // every request is 401
  ASSERT_TRUE(test::eventually([&] {
    return log.text().find("Kubernetes nodes: ") != std::string::npos;
  })) << log.text();
  store.create(instance_held_by("cams-gggggg", "node-gone"));  // no Node: gone while unread
  kube::testing::write_text(server.token_file(), token);
  EXPECT_TRUE(test::eventually(
      [&] { return store.get("default", "cams-gggggg")->instance.nodes.count("node-gone") == 0; },
      10s))
      << log.text();
  cleaner.stop();
}

}  // namespace
}  // namespace dowser::node_cleanup
