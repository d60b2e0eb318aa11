// The scenarios of akri-behaviour.md section 10 that capacity_manager_test.cpp
// does not spell out: 5, the CL halves of 6 and 7, 10, the second half of 11,
// and every case of 21 and 22. Vdev ids are dowser's ("0", "1", ...) and
// Akri's defects are fixed as DESIGN.md says (the CL list never starts empty;
// a release frees only the claim it names). Claims go through a real file store.
#include "capacity_manager.hpp"
#include "capacity_test_support.hpp"

#include <gtest/gtest.h>

using namespace dowser::capacity;
using dowser::naming::SlotUsage;
using dowser::store::FileInstanceStore;
using dowser::store::Instance;
using dowser::store::StoredInstance;
using Usage = std::map<std::string, std::string>;

namespace {

std::vector<PluginDevice> table_for(const std::vector<Instance>& instances) {
  VirtualDeviceTable table("node-a", UniqueInstances::required);
  for (const auto& i : instances) table.put(InstanceSlots::decode(i));
  return table.devices();
}

// Scenario 11's Instance: the slots of scenario 8.
Instance scenario_eight_instance() {
  return instance("instance-a", 4,
                  {{"instance-a-0", "C:akri.sh/config-a-1:node-a"},
                   {"instance-a-1", "node-a"},
                   {"instance-a-2", "node-b"}});
}

TEST(AkriScenarios, SixAndSevenConfigurationLevelLists) {
  // 6: capacity 3, slot 1 held by node-b's IL plugin: one placeholder at once
  // (Akri's CL stream sent [] first: its watcher had not run yet).
  EXPECT_EQ(table_for({instance("instance-a", 3, {{"instance-a-1", "node-b"}})}),
            devices({{"0", true}}));
  // 7: no slot is free; vdev 0 is claimed by this node and still listed,
  // with no placeholder beside it.
  VirtualDeviceTable table("node-a", UniqueInstances::required);
  table.put(InstanceSlots::decode(instance(
      "instance-a", 3,
      {{"instance-a-0", "C:0:node-a"}, {"instance-a-1", "node-b"}, {"instance-a-2", "node-a"}})));
  EXPECT_EQ(table.devices(), devices({{"0", true}}));
  EXPECT_FALSE(table.is_placeholder("0"));
  EXPECT_EQ(table.claimed().at("0"), (ClaimedSlot{"instance-a", 0}));
  EXPECT_TRUE(table.candidates().empty());
}

TEST(AkriScenarios, ElevenAnInstanceLevelClaimTakesTheLastPlaceholderAndRemovalEmptiesTheTable) {
  VirtualDeviceTable table("node-a", UniqueInstances::required);
  auto instance_a = scenario_eight_instance();
  table.put(InstanceSlots::decode(instance_a));
  EXPECT_EQ(table.devices(), devices({{"0", true}, {"akri.sh/config-a-1", true}}));
  // Slot 3 goes to this node's IL plugin: no slot is free, only the claim stays.
  instance_a.device_usage["instance-a-3"] = "node-a";
  table.put(InstanceSlots::decode(instance_a));
  EXPECT_EQ(table.devices(), devices({{"akri.sh/config-a-1", true}}));
  EXPECT_EQ(table.claimed().at("akri.sh/config-a-1"), (ClaimedSlot{"instance-a", 0}));
  // The Instance goes: nothing is left.
  table.remove("instance-a");
  EXPECT_TRUE(table.devices().empty());
  EXPECT_TRUE(table.claimed().empty());
  EXPECT_TRUE(table.candidates().empty());
  EXPECT_TRUE(table.instance_names().empty());
}

TEST(AkriScenarios, TwentyOneOneVdevHoldingEverySlotIsOneDevice) {
  Usage usage;
  for (int i = 0; i < 5; ++i) usage["inst-" + std::to_string(i)] = "C:vdev-a:node-a";
  EXPECT_EQ(table_for({instance("inst", 5, usage)}), devices({{"vdev-a", true}}));
  EXPECT_EQ(table_for({instance("inst", 5, {{"inst-0", "C:vdev-a:node-b"}})}).size(), 1u)
      << "another node's claim leaves free slots: one placeholder";
}

class AkriClaimScenarios : public TwoNodesOneStore {
 protected:
  Usage usage(const std::string& name) {
    return store_a_->get("default", name)->instance.device_usage;
  }
  VirtualDeviceTable table(const std::vector<std::string>& names) {
    VirtualDeviceTable result("node-a", UniqueInstances::required);
    for (const auto& name : names)
      result.put(InstanceSlots::decode(store_a_->get("default", name)->instance));
    return result;
  }
  std::vector<ContainerClaims> allocate(const std::vector<std::string>& vdevs,
                                        const VirtualDeviceTable& table) {
    return node_a_->allocate_configuration_level("default", {vdevs}, table,
                                                 UniqueInstances::required);
  }
};

TEST_F(AkriClaimScenarios, FiveAnUpdatedInstanceReplacesTheCachedSlots) {
  add(instance("instance-a", 3));
  std::vector<StoredInstance> heard;
  node_a_->set_change_listener([&](const StoredInstance& now) { heard.push_back(now); });
  auto updated = instance("instance-a", 3, {{"instance-a-1", "node-a"}});
  uint64_t revision = store_a_->update(updated, store_a_->get("default", "instance-a")->revision);
  ASSERT_TRUE(node_a_->apply({updated, revision}));
  auto slots = InstanceSlots::decode(node_a_->find({"default", "instance-a"})->instance);
  EXPECT_TRUE(slots.is_free(0));
  EXPECT_EQ(slots.slots[1], SlotUsage::instance_level("node-a"));
  EXPECT_TRUE(slots.is_free(2));
  ASSERT_EQ(heard.size(), 1u) << "the plugins of the Instance hear of it";
  EXPECT_FALSE(node_a_->apply({instance("instance-a", 3), revision - 1}))
      << "an older revision changes nothing";
  EXPECT_EQ(node_a_->find({"default", "instance-a"})->instance.device_usage, updated.device_usage);
  ASSERT_TRUE(node_a_->apply({updated, revision + 1}));
  EXPECT_EQ(node_a_->find({"default", "instance-a"})->revision, revision + 1);
  EXPECT_EQ(heard.size(), 1u) << "a new revision of the same content changes no plugin";
}

TEST_F(AkriClaimScenarios, TenFreeingAConfigurationLevelSlotLeavesOtherNodesAlone) {
  add(instance("instance-a", 2,
               {{"instance-a-0", "C:config-a-1:node-a"}, {"instance-a-1", "node-b"}}));
  EXPECT_FALSE(node_a_->release({"default", "config-b"}, 2,
                                SlotUsage::configuration_level("config-b-2", "node-a")))
      << "no such Instance";
  EXPECT_FALSE(node_a_->release({"default", "instance-a"}, 1, SlotUsage::instance_level("node-a")))
      << "node-b's slot is not ours";
  EXPECT_TRUE(node_a_->release({"default", "instance-a"}, 0,
                               SlotUsage::configuration_level("config-a-1", "node-a")));
  EXPECT_EQ(usage("instance-a"), (Usage{{"instance-a-1", "node-b"}}));
}

// 22: two Instances with one slot each, a container asking for two vdevs.
TEST_F(AkriClaimScenarios, TwentyTwoBothFreeGivesTwo) {
  add(instance("instance-1", 1));
  add(instance("instance-2", 1));
  auto claims = allocate({"0", "1"}, table({"instance-1", "instance-2"}));
  EXPECT_EQ(claims.at(0), (ContainerClaims{{"instance-1", 0}, {"instance-2", 0}}));
  EXPECT_EQ(usage("instance-1"), (Usage{{"instance-1-0", "C:0:node-a"}}));
  EXPECT_EQ(usage("instance-2"), (Usage{{"instance-2-0", "C:1:node-a"}}));
}

TEST_F(AkriClaimScenarios, TwentyTwoBothHeldForTheRequestedVdevsAreReused) {
  add(instance("instance-1", 1, {{"instance-1-0", "C:0:node-a"}}));
  add(instance("instance-2", 1, {{"instance-2-0", "C:1:node-a"}}));
  auto claims = allocate({"0", "1"}, table({"instance-1", "instance-2"}));
  EXPECT_EQ(claims.at(0), (ContainerClaims{{"instance-1", 0}, {"instance-2", 0}}));
  EXPECT_EQ(usage("instance-1"), (Usage{{"instance-1-0", "C:0:node-a"}}));
  EXPECT_EQ(usage("instance-2"), (Usage{{"instance-2-0", "C:1:node-a"}}));
}

TEST_F(AkriClaimScenarios, TwentyTwoOneFreeAndOneHeldGivesTwo) {
  add(instance("instance-1", 1));
  add(instance("instance-2", 1, {{"instance-2-0", "C:1:node-a"}}));
  auto vdevs = table({"instance-1", "instance-2"});
  ASSERT_TRUE(vdevs.is_placeholder("0"));
  auto claims = allocate({"0", "1"}, vdevs);
  ASSERT_EQ(claims.at(0).size(), 2u);
  EXPECT_EQ(usage("instance-1"), (Usage{{"instance-1-0", "C:0:node-a"}}));
  EXPECT_EQ(usage("instance-2"), (Usage{{"instance-2-0", "C:1:node-a"}}));
}

TEST_F(AkriClaimScenarios, TwentyTwoASlotHeldForAnotherVdevCannotCoverTheRequest) {
  add(instance("instance-1", 1, {{"instance-1-0", "C:7:node-a"}}));
  add(instance("instance-2", 1));
  auto vdevs = table({"instance-1", "instance-2"});
  EXPECT_THROW(allocate({"0", "1"}, vdevs), AllocationError) << "vdev 1 is not advertised";
  // Both advertised, but another node took one of the two slots meanwhile.
  Usage before_1 = usage("instance-1");
  auto stale = table({"instance-2"});
  add(instance("instance-3", 1));
  stale.put(InstanceSlots::decode(store_a_->get("default", "instance-3")->instance));
  ASSERT_EQ(stale.devices().size(), 2u);
  node_b_->allocate_instance_level({"default", "instance-3"}, {{"instance-3-0"}}, false);
  EXPECT_THROW(allocate({"0", "1"}, stale), AllocationError);
  EXPECT_TRUE(usage("instance-2").empty()) << "the call's other claim was rolled back";
  EXPECT_EQ(usage("instance-3"), (Usage{{"instance-3-0", "node-b"}}));
  EXPECT_EQ(usage("instance-1"), before_1);
}

}  // namespace
