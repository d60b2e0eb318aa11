// Dead-node cleanup: readiness, scrubbing one Instance, when a node is due,
// and scrub_everywhere against a real file store.
#include "node_cleanup.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <set>
#include <string>

namespace dowser::node_cleanup {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

json node_with(const json& conditions) {
  return {{"metadata", {{"name", "n"}}}, {"status", {{"conditions", conditions}}}};
}

TEST(NodeReady, OnlyAReadyConditionWithStatusTrueIsReady) {
  EXPECT_TRUE(node_ready(node_with(json::array({{{"type", "MemoryPressure"}, {"status", "False"}},
                                                {{"type", "Ready"}, {"status", "True"}}}))));
  EXPECT_FALSE(node_ready(node_with(json::array({{{"type", "Ready"}, {"status", "False"}}}))));
  EXPECT_FALSE(node_ready(node_with(json::array({{{"type", "Ready"}, {"status", "Unknown"}}}))));
  EXPECT_FALSE(
      node_ready(node_with(json::array({{{"type", "MemoryPressure"}, {"status", "True"}}}))));
  EXPECT_FALSE(node_ready(json{{"metadata", {{"name", "n"}}}})) << "no status: still joining";
  EXPECT_FALSE(node_ready(node_with("not a list")));
}

store::Instance shared_instance() {
  store::Instance instance;
  instance.name = "cams-abc123";
  instance.configuration_name = "cams";
  instance.capacity = 4;
  instance.shared = true;
  instance.nodes = {"node-a", "node-b"};
  instance.device_usage = {{"cams-abc123-0", "node-a"},
                           {"cams-abc123-1", "C:0:node-a"},
                           {"cams-abc123-2", "node-b"},
                           {"cams-abc123-3", "C:1:node-ab"}};
  return instance;
}

TEST(ScrubNode, RemovesTheNodesEntryAndEveryClaimItHolds) {
  auto scrubbed = scrub_node(shared_instance(), "node-a");
  ASSERT_TRUE(scrubbed);
  EXPECT_EQ(scrubbed->nodes, (std::set<std::string>{"node-b"}));
  EXPECT_EQ(scrubbed->device_usage,
            (std::map<std::string, std::string>{{"cams-abc123-2", "node-b"},
                                                {"cams-abc123-3", "C:1:node-ab"}}))
      << "only node-a's IL and CL claims go; a node whose name extends it stays";
}

TEST(ScrubNode, AClaimAloneIsScrubbedToo) {
  auto instance = shared_instance();
  instance.nodes = {"node-b"};
  auto scrubbed = scrub_node(instance, "node-a");
  ASSERT_TRUE(scrubbed);
  EXPECT_EQ(scrubbed->device_usage.size(), 2u);
}

TEST(ScrubNode, NothingToDoForANodeTheInstanceDoesNotMention) {
  EXPECT_FALSE(scrub_node(shared_instance(), "node-c"));
}

TEST(ScrubNode, KeepsValuesNoAgentWrote) {
  auto instance = shared_instance();
  instance.device_usage["cams-abc123-3"] = "C:::";
  auto scrubbed = scrub_node(instance, "node-b");
  ASSERT_TRUE(scrubbed);
  EXPECT_EQ(scrubbed->device_usage.at("cams-abc123-3"), "C:::");
}

TEST(DeadNodeTracker, ANotReadyNodeIsDueOnceAfterItsGrace) {
  DeadNodeTracker tracker(5min);
  const Clock::time_point t0{};
  tracker.listed({{"node-a", true}, {"node-b", true}}, t0);
  EXPECT_TRUE(tracker.take_due(t0).empty());
  EXPECT_FALSE(tracker.next_due());
  tracker.changed("node-a", false, t0 + 1min);
  EXPECT_EQ(tracker.next_due(), t0 + 6min);
  EXPECT_TRUE(tracker.take_due(t0 + 5min).empty());
  // Still NotReady: an update does not restart the clock.
  tracker.changed("node-a", false, t0 + 3min);
  EXPECT_EQ(tracker.take_due(t0 + 6min), std::vector<std::string>{"node-a"});
  EXPECT_TRUE(tracker.take_due(t0 + 7min).empty()) << "reported once per outage";
  EXPECT_FALSE(tracker.next_due());
}

TEST(DeadNodeTracker, ReadyAgainStartsOver) {
  DeadNodeTracker tracker(1min);
  const Clock::time_point t0{};
  tracker.changed("node-a", false, t0);
  tracker.changed("node-a", true, t0 + 30s);
  EXPECT_TRUE(tracker.take_due(t0 + 2min).empty());
  tracker.changed("node-a", false, t0 + 2min);
  EXPECT_TRUE(tracker.take_due(t0 + 2min + 59s).empty());
  EXPECT_EQ(tracker.take_due(t0 + 3min), std::vector<std::string>{"node-a"});
  tracker.changed("node-a", true, t0 + 4min);
  tracker.changed("node-a", false, t0 + 5min);
  EXPECT_EQ(tracker.take_due(t0 + 6min), std::vector<std::string>{"node-a"})
      << "a second outage is reported again";
}

TEST(DeadNodeTracker, ADeletedNodeIsDueAtOnce) {
  DeadNodeTracker tracker(5min);
  const Clock::time_point t0{};
  tracker.listed({{"node-a", true}, {"node-b", false}}, t0);
  tracker.deleted("node-b", t0);
  EXPECT_EQ(tracker.next_due(), t0);
  EXPECT_EQ(tracker.take_due(t0), std::vector<std::string>{"node-b"});
  EXPECT_TRUE(tracker.take_due(t0 + 10min).empty()) << "a deleted node is forgotten";
}

// Every agent sees a node die at once; each waits its own share of the
// spread, so that one scrubs while the others find nothing left to write.
TEST(DeadNodeTracker, AgentsStaggerTheirScrubsOfOneNodeWithinTheSpread) {
  const Clock::time_point t0{};
  std::set<Clock::time_point> due_times;
  for (int agent = 0; agent < 20; ++agent) {
    DeadNodeTracker tracker(5min, 30s, "agent-" + std::to_string(agent));
    tracker.listed({{"node-b", true}}, t0);
    tracker.changed("node-b", false, t0);
    const std::optional<Clock::time_point> due = tracker.next_due();
    ASSERT_TRUE(due);
    EXPECT_GE(*due, t0 + 5min);
    EXPECT_LT(*due, t0 + 5min + 30s);
    EXPECT_EQ(*due, t0 + 5min + tracker.stagger("node-b"));
    EXPECT_TRUE(tracker.take_due(*due - 1ns).empty());
    EXPECT_EQ(tracker.take_due(*due), std::vector<std::string>{"node-b"});
    due_times.insert(*due);
  }
  EXPECT_GT(due_times.size(), 10u) << "the agents' scrubs are spread out";
}

TEST(DeadNodeTracker, ADeletedNodeIsDueAfterTheStaggerAlone) {
  const Clock::time_point t0{};
  bool staggered = false;
  for (int agent = 0; agent < 20; ++agent) {
    DeadNodeTracker tracker(5min, 30s, "agent-" + std::to_string(agent));
    tracker.listed({{"node-b", false}}, t0);
    tracker.deleted("node-b", t0 + 1min);
    const Clock::time_point due = t0 + 1min + tracker.stagger("node-b");
    EXPECT_LT(due, t0 + 1min + 30s);
    EXPECT_EQ(tracker.next_due(), due);
    if (due > t0 + 1min) {
      staggered = true;
      EXPECT_TRUE(tracker.take_due(due - 1ns).empty());
    }
    EXPECT_EQ(tracker.take_due(due), std::vector<std::string>{"node-b"});
    EXPECT_FALSE(tracker.next_due()) << "reported once";
  }
  EXPECT_TRUE(staggered) << "no agent waits: all scrub at once";
}

TEST(DeadNodeTracker, ANodeMissingFromAReListWasDeleted) {
  DeadNodeTracker tracker(5min);
  const Clock::time_point t0{};
  tracker.listed({{"node-a", true}, {"node-b", true}}, t0);
  tracker.listed({{"node-a", true}}, t0 + 1s);
  EXPECT_EQ(tracker.take_due(t0 + 1s), std::vector<std::string>{"node-b"});
}

TEST(DeadNodeTracker, ANodeReCreatedBeforeItsCleanupIsNotDue) {
  DeadNodeTracker tracker(5min);
  const Clock::time_point t0{};
  tracker.listed({{"node-a", true}}, t0);
  tracker.deleted("node-a", t0);
  tracker.changed("node-a", true, t0 + 1s);
  EXPECT_TRUE(tracker.take_due(t0 + 1s).empty());
}

TEST(NodesNamedIn, NodesEntriesAndClaimHoldersButNotFreeSlotsOrForeignValues) {
  store::Instance instance;
  instance.nodes = {"node-a"};
  instance.device_usage = {{"cams-abc123-0", "node-b"},
                           {"cams-abc123-1", "C:cams-1:node-c"},
                           {"cams-abc123-2", ""},
                           {"cams-abc123-3", "C:::"}};
  EXPECT_EQ(nodes_named_in(instance), (std::set<std::string>{"node-a", "node-b", "node-c"}));
}

// A node deleted while no agent watched shows up only in the Instances.
TEST(DeadNodeTracker, ANodeOnlyInstancesNameIsDueAfterItsGrace) {
  DeadNodeTracker tracker(5min);
  const Clock::time_point t0{};
  tracker.listed({{"node-a", true}}, t0);
  EXPECT_EQ(tracker.named_in_store({"node-a", "node-gone"}, t0 + 1s),
            std::vector<std::string>{"node-gone"});
  EXPECT_TRUE(tracker.named_in_store({"node-gone"}, t0 + 2s).empty()) << "already known";
  EXPECT_EQ(tracker.next_due(), t0 + 1s + 5min) << "the clock runs from the first sight";
  tracker.listed({{"node-a", true}}, t0 + 1min);
  EXPECT_TRUE(tracker.take_due(t0 + 1min).empty())
      << "a relist without it does not make it deleted: it never was listed";
  EXPECT_EQ(tracker.take_due(t0 + 1s + 5min), std::vector<std::string>{"node-gone"});
  EXPECT_TRUE(tracker.take_due(t0 + 10min).empty()) << "reported once";
}

// A deleted node's agent still running writes its claims back after they
// were scrubbed: named again, the node is due again after a fresh grace.
TEST(DeadNodeTracker, ANodeOnlyInstancesNameThatIsWrittenBackIsDueAgain) {
  DeadNodeTracker tracker(5min);
  const Clock::time_point t0{};
  tracker.listed({{"node-a", true}}, t0);
  tracker.named_in_store({"node-gone"}, t0);
  EXPECT_EQ(tracker.take_due(t0 + 5min), std::vector<std::string>{"node-gone"});
  EXPECT_EQ(tracker.named_in_store({"node-gone"}, t0 + 6min),
            std::vector<std::string>{"node-gone"});
  EXPECT_TRUE(tracker.take_due(t0 + 10min).empty());
  EXPECT_EQ(tracker.take_due(t0 + 11min), std::vector<std::string>{"node-gone"});
  // No longer named, it is forgotten: named later, it starts over.
  EXPECT_TRUE(tracker.named_in_store({}, t0 + 12min).empty());
  EXPECT_FALSE(tracker.next_due());
  EXPECT_EQ(tracker.named_in_store({"node-gone"}, t0 + 13min),
            std::vector<std::string>{"node-gone"});
  EXPECT_EQ(tracker.next_due(), t0 + 18min);
}

TEST(DeadNodeTracker, ANodeOnlyInstancesNamedThatRegistersIsNotDue) {
  DeadNodeTracker tracker(5min);
  const Clock::time_point t0{};
  tracker.listed({{"node-a", true}}, t0);
  tracker.named_in_store({"node-late"}, t0);
  tracker.changed("node-late", true, t0 + 1min);
  EXPECT_TRUE(tracker.take_due(t0 + 10min).empty());
  tracker.listed({{"node-a", true}}, t0 + 11min);
  EXPECT_EQ(tracker.take_due(t0 + 11min), std::vector<std::string>{"node-late"})
      << "once listed, missing from a relist means deleted";
}

TEST(DeadNodeTracker, ANodeOnlyInstancesNamedThatRegistersNotReadyGetsAFreshGrace) {
  DeadNodeTracker tracker(5min);
  const Clock::time_point t0{};
  tracker.named_in_store({"node-late"}, t0);
  tracker.changed("node-late", false, t0 + 4min);
  EXPECT_TRUE(tracker.take_due(t0 + 6min).empty());
  EXPECT_EQ(tracker.take_due(t0 + 9min), std::vector<std::string>{"node-late"});
}

TEST(DeadNodeTracker, ADeletedNodeTheInstancesStillNameIsNotCountedTwice) {
  DeadNodeTracker tracker(5min);
  const Clock::time_point t0{};
  tracker.listed({{"node-a", true}}, t0);
  tracker.deleted("node-a", t0);
  EXPECT_TRUE(tracker.named_in_store({"node-a"}, t0).empty());
  EXPECT_EQ(tracker.take_due(t0), std::vector<std::string>{"node-a"});
}

class ScrubEverywhere : public ::testing::Test {
 protected:
  const test::TempDir directory_{"dowser-node-cleanup"};  // outlives the store
  std::unique_ptr<store::FileInstanceStore> store_ =
      std::make_unique<store::FileInstanceStore>(directory_.path());
};

TEST_F(ScrubEverywhere, ScrubsEveryInstanceAndDeletesThoseNoNodeSeesAnyMore) {
  store_->create(shared_instance());
  store::Instance only_a;
  only_a.name = "cams-def456";
  only_a.configuration_name = "cams";
  only_a.nodes = {"node-a"};
  only_a.device_usage = {{"cams-def456-0", "node-a"}};
  store_->create(only_a);
  store::Instance only_b = only_a;
  only_b.name = "cams-fed654";
  only_b.nodes = {"node-b"};
  only_b.device_usage = {{"cams-fed654-0", "node-b"}};
  const uint64_t b_revision = store_->create(only_b);

  scrub_everywhere(*store_, "node-a");

  auto shared = store_->get("default", "cams-abc123");
  ASSERT_TRUE(shared);
  EXPECT_EQ(shared->instance.nodes, (std::set<std::string>{"node-b"}));
  EXPECT_EQ(shared->instance.device_usage.size(), 2u);
  EXPECT_FALSE(store_->get("default", "cams-def456")) << "node-a was the last to see it";
  auto untouched = store_->get("default", "cams-fed654");
  ASSERT_TRUE(untouched);
  EXPECT_EQ(untouched->revision, b_revision) << "an Instance without node-a is not written";

  scrub_everywhere(*store_, "node-a");  // a second agent arriving late changes nothing
  EXPECT_EQ(store_->list().size(), 2u);
}

}  // namespace
}  // namespace dowser::node_cleanup
