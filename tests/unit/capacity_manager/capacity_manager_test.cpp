// The slot pool: decoding, the IL and CL lists, the CL plan, and claims as
// compare-and-swap writes on a real file store (two managers on one store
// directory stand for two nodes). Ports akri-behaviour.md section 10,
// scenarios 3, 6-8, 11-12, 21-22, with Akri's defects fixed as DESIGN.md says.
#include "capacity_manager.hpp"
#include "capacity_test_support.hpp"
#include "eventually.hpp"

#include <dlfcn.h>
#include <fcntl.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>

using namespace dowser::capacity;
using dowser::naming::SlotUsage;
using dowser::store::Instance;

// What a thread asked of the store's journal: flushes (fdatasync) and writes
// to the disk without a flush (sync_file_range), counted by wrapping the C
// library's (each call still goes to the real one): nothing else tells
// whether an Allocate waited for the disk's flush.
namespace {

thread_local int journal_flushes_here = 0;
thread_local int journal_write_outs_here = 0;

bool is_journal(int fd) {
  std::error_code error;
  auto target = std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd), error);
  return !error && target.filename() == ".journal";
}

template <typename Real>
Real real_function(const char* name) {
  return reinterpret_cast<Real>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" int fdatasync(int fd) {
  static const auto real = real_function<int (*)(int)>("fdatasync");
  if (is_journal(fd)) ++journal_flushes_here;
  return real(fd);
}

extern "C" int sync_file_range(int fd, off64_t offset, off64_t count, unsigned int flags) {
  static const auto real =
      real_function<int (*)(int, off64_t, off64_t, unsigned int)>("sync_file_range");
  if (is_journal(fd)) ++journal_write_outs_here;
  return real(fd, offset, count, flags);
}

namespace {

// ---- decoding and lists ----------------------------------------------------------

TEST(InstanceSlots, DecodesUsageAsAkriScenarioThree) {
  auto slots = InstanceSlots::decode(
      instance("inst", 4, {{"inst-1", "node-a"}, {"inst-3", "C:vdev1:node-a"}}));
  ASSERT_EQ(slots.slots.size(), 4u);
  EXPECT_TRUE(slots.is_free(0));
  EXPECT_EQ(slots.slots[1], SlotUsage::instance_level("node-a"));
  EXPECT_TRUE(slots.is_free(2));
  EXPECT_EQ(slots.slots[3], SlotUsage::configuration_level("vdev1", "node-a"));
  EXPECT_EQ(slots.free_count(), 2u);
  EXPECT_TRUE(slots.problems.empty());
}

TEST(InstanceSlots, UnreadableEntriesAreReportedAndNeverFree) {
  auto slots = InstanceSlots::decode(
      instance("inst", 2, {{"inst-0", "C:broken"}, {"inst-5", "node-a"}, {"other-1", "node-a"}}));
  EXPECT_FALSE(slots.is_free(0)) << "an unreadable holder is still a holder";
  EXPECT_TRUE(slots.is_free(1));
  EXPECT_EQ(slots.problems.size(), 3u);
  EXPECT_EQ(slots.first_free(), 1u);
}

TEST(InstanceLevelDevices, HealthAsAkriScenariosSixAndSeven) {
  auto first = InstanceSlots::decode(instance("instance-a", 3, {{"instance-a-1", "node-b"}}));
  EXPECT_EQ(instance_level_devices(first, "node-a"),
            devices({{"instance-a-0", true}, {"instance-a-1", false}, {"instance-a-2", true}}));
  auto second = InstanceSlots::decode(instance(
      "instance-a", 3,
      {{"instance-a-0", "C:0:node-a"}, {"instance-a-1", "node-b"}, {"instance-a-2", "node-a"}}));
  EXPECT_EQ(instance_level_devices(second, "node-a"),
            devices({{"instance-a-0", false}, {"instance-a-1", false}, {"instance-a-2", true}}));
  second.offline = true;
  EXPECT_EQ(instance_level_devices(second, "node-a"),
            devices({{"instance-a-0", false}, {"instance-a-1", false}, {"instance-a-2", false}}));
}

TEST(SlotTally, CountsEachSlotByWhoHoldsItAndFreeOnesByTheirDevice) {
  SlotTally tally;
  tally.add(InstanceSlots::decode(instance("inst-a", 5,
                                           {{"inst-a-0", "node-a"},
                                            {"inst-a-1", "C:3:node-a"},
                                            {"inst-a-2", "C:1:node-b"},
                                            {"inst-a-3", "C:broken"}})),
            "node-a");
  tally.add(InstanceSlots::decode(instance("inst-b", 2, {{"inst-b-0", "node-b"}}), true), "node-a");
  EXPECT_EQ(tally.instance_level, 1u);
  EXPECT_EQ(tally.configuration_level, 1u);
  EXPECT_EQ(tally.other_nodes, 2u);
  EXPECT_EQ(tally.unreadable, 1u);
  EXPECT_EQ(tally.free, 1u) << "inst-a-4";
  EXPECT_EQ(tally.offline, 1u) << "inst-b-1: free, but its device is offline";
  EXPECT_EQ(tally.total(), 7u);
}

// ---- the CL table ----------------------------------------------------------------

std::vector<PluginDevice> table_for(const std::vector<Instance>& instances,
                                    UniqueInstances policy = UniqueInstances::required) {
  VirtualDeviceTable table("node-a", policy);
  for (const auto& i : instances) table.put(InstanceSlots::decode(i));
  return table.devices();
}

TEST(VdevOrder, DecimalIdsByValueThenOthersByText) {
  std::vector<std::string> ids = {"akri.sh/cam-1", "10", "9", "0", "100", "07", "7", "b", "a"};
  std::sort(ids.begin(), ids.end(), VdevOrder{});
  EXPECT_EQ(
      ids, (std::vector<std::string>{"0", "07", "7", "9", "10", "100", "a", "akri.sh/cam-1", "b"}));
  EXPECT_FALSE(VdevOrder{}("5", "5"));
  EXPECT_TRUE(VdevOrder{}("99999999999999999999", "100000000000000000000"))
      << "ids longer than 64 bits still order by value";
}

TEST(VirtualDeviceTable, CountsAsAkriScenarioTwentyOne) {
  auto all = [](const char* value) {
    std::map<std::string, std::string> usage;
    for (int i = 0; i < 5; ++i) usage["inst-" + std::to_string(i)] = value;
    return usage;
  };
  EXPECT_EQ(table_for({instance("inst", 5)}).size(), 1u) << "all free: one placeholder";
  EXPECT_EQ(table_for({instance("inst", 5, all("node-a"))}).size(), 0u);
  EXPECT_EQ(table_for({instance("inst", 5, all("node-b"))}).size(), 0u);
  EXPECT_EQ(table_for({instance("inst", 5, all("C:0:node-b"))}).size(), 0u)
      << "another node's CL claims are not ours";
  EXPECT_EQ(table_for({instance("inst", 5,
                                {{"inst-0", "C:10:node-a"},
                                 {"inst-1", "C:11:node-a"},
                                 {"inst-2", "C:12:node-a"},
                                 {"inst-3", "C:13:node-a"},
                                 {"inst-4", "C:14:node-a"}})})
                .size(),
            5u);
  EXPECT_EQ(table_for({instance("inst", 5, {{"inst-0", "C:7:node-a"}, {"inst-1", "C:8:node-a"}})}),
            devices({{"0", true}, {"7", true}, {"8", true}}))
      << "3 free slots, one Instance: claimed ones plus one placeholder";
  EXPECT_TRUE(table_for({}).empty());
}

TEST(VirtualDeviceTable, TwoDevicesOfCapacityTwoAdvertiseTwoIds) {
  EXPECT_EQ(table_for({instance("cam-1", 2), instance("cam-2", 2)}),
            devices({{"0", true}, {"1", true}}));
  EXPECT_EQ(
      table_for({instance("cam-1", 2), instance("cam-2", 2)}, UniqueInstances::preferred).size(),
      4u)
      << "Preferred advertises one virtual device per free slot";
}

TEST(VirtualDeviceTable, PlaceholdersKeepTheirIdsUntilConsumed) {
  VirtualDeviceTable table("node-a", UniqueInstances::required);
  auto cam1 = instance("cam-1", 1), cam2 = instance("cam-2", 1), cam3 = instance("cam-3", 1);
  for (const auto& i : {cam1, cam2, cam3}) table.put(InstanceSlots::decode(i));
  EXPECT_EQ(table.devices(), devices({{"0", true}, {"1", true}, {"2", true}}));
  // The kubelet allocated vdev "1": cam-2 is now held for it.
  cam2.device_usage["cam-2-0"] = "C:1:node-a";
  table.put(InstanceSlots::decode(cam2));
  EXPECT_EQ(table.devices(), devices({{"0", true}, {"1", true}, {"2", true}}))
      << "same ids: the consumed placeholder is now a claim";
  EXPECT_EQ(table.claimed().at("1"), (ClaimedSlot{"cam-2", 0}));
  // An IL claim elsewhere takes cam-3's last slot: one placeholder goes, ids 0 and 1 stay.
  cam3.device_usage["cam-3-0"] = "node-b";
  table.put(InstanceSlots::decode(cam3));
  EXPECT_EQ(table.devices(), devices({{"0", true}, {"1", true}}));
  EXPECT_TRUE(table.is_placeholder("0"));
  EXPECT_FALSE(table.is_placeholder("1"));
}

TEST(VirtualDeviceTable, NewPlaceholdersTakeTheSmallestUnusedId) {
  VirtualDeviceTable table("node-a", UniqueInstances::required);
  table.put(InstanceSlots::decode(instance("cam-1", 2, {{"cam-1-0", "C:0:node-a"}})));
  table.put(InstanceSlots::decode(instance("cam-2", 2, {{"cam-2-0", "C:2:node-a"}})));
  EXPECT_EQ(table.devices(), devices({{"0", true}, {"1", true}, {"2", true}, {"3", true}}))
      << "placeholders fill the hole at 1, then go above the claims";
  table.remove("cam-1");
  EXPECT_EQ(table.devices(), devices({{"1", true}, {"2", true}}))
      << "a removed Instance takes its claim and one placeholder (the highest) with it";
  table.put(InstanceSlots::decode(instance("cam-3", 1)));
  EXPECT_EQ(table.devices(), devices({{"0", true}, {"1", true}, {"2", true}}));
  table.remove("no-such-instance");
  EXPECT_EQ(table.devices().size(), 3u);
}

// A claim gone while a pod still holds its vdev (taken out of the store, or
// dropped by a smaller capacity): the kubelet counts the id as allocated, so
// it must not come back as a free placeholder.
TEST(VirtualDeviceTable, IdsTheKubeletHoldsWithoutAClaimAreNotOfferedAsPlaceholders) {
  VirtualDeviceTable table("node-a", UniqueInstances::required);
  auto cam1 = instance("cam-1", 1, {{"cam-1-0", "C:0:node-a"}});
  table.put(InstanceSlots::decode(cam1));
  table.put(InstanceSlots::decode(instance("cam-2", 1)));
  EXPECT_EQ(table.devices(), devices({{"0", true}, {"1", true}}));
  cam1.device_usage.clear();
  table.put(InstanceSlots::decode(cam1));
  EXPECT_TRUE(table.is_placeholder("0")) << "the freed slot takes the smallest unused id";

  // The kubelet reports "0" in use: withdrawn, and replaced under a fresh id.
  table.set_held_without_claim({"0"});
  EXPECT_EQ(table.devices(), devices({{"1", true}, {"2", true}}));
  table.put(InstanceSlots::decode(instance("cam-3", 1)));
  EXPECT_EQ(table.devices(), devices({{"1", true}, {"2", true}, {"3", true}}))
      << "new placeholders skip it too";

  // A claim on a held id (the pod's vdev claimed again) takes the id over.
  table.put(InstanceSlots::decode(instance("cam-4", 2, {{"cam-4-0", "C:0:node-a"}})));
  table.set_held_without_claim({});
  EXPECT_EQ(table.claimed().at("0"), (ClaimedSlot{"cam-4", 0}));
  table.remove("cam-4");
  table.put(InstanceSlots::decode(instance("cam-5", 1)));
  EXPECT_EQ(table.devices(), devices({{"0", true}, {"1", true}, {"2", true}, {"3", true}}))
      << "once neither holds it, the id is free again";
}

TEST(VirtualDeviceTable, OfflineInstancesKeepTheirClaimsUnhealthyAndOfferNothing) {
  VirtualDeviceTable table("node-a", UniqueInstances::required);
  auto cam = instance("cam-1", 3, {{"cam-1-0", "C:0:node-a"}});
  table.put(InstanceSlots::decode(cam));
  EXPECT_EQ(table.devices(), devices({{"0", true}, {"1", true}}));
  table.put(InstanceSlots::decode(cam, /*offline=*/true));
  EXPECT_EQ(table.devices(), devices({{"0", false}}));
  EXPECT_TRUE(table.candidates().empty());
  table.put(InstanceSlots::decode(cam));
  EXPECT_EQ(table.devices(), devices({{"0", true}, {"1", true}}));
}

TEST(VirtualDeviceTable, SharedListStaysWhileTheListDoes) {
  VirtualDeviceTable table("node-a", UniqueInstances::required);
  auto cam = instance("cam-1", 3);
  table.put(InstanceSlots::decode(cam));
  auto before = table.shared_devices();
  cam.device_usage["cam-1-0"] = "node-b";
  table.put(InstanceSlots::decode(cam));
  EXPECT_EQ(table.shared_devices(), before) << "an IL claim leaving free slots changes no vdev";
  cam.device_usage["cam-1-1"] = "C:0:node-a";
  table.put(InstanceSlots::decode(cam));
  EXPECT_NE(table.shared_devices(), before) << "vdev 0 is claimed and a new placeholder is due";
  EXPECT_EQ(*before, devices({{"0", true}})) << "a list someone holds does not change under them";
  EXPECT_EQ(table.devices(), devices({{"0", true}, {"1", true}}));
}

TEST(VirtualDeviceTable, PolicyChangeRecountsPlaceholders) {
  VirtualDeviceTable table("node-a", UniqueInstances::required);
  table.put(InstanceSlots::decode(instance("cam-1", 3)));
  EXPECT_EQ(table.devices().size(), 1u);
  table.set_policy(UniqueInstances::preferred);
  EXPECT_EQ(table.devices().size(), 3u);
  table.set_policy(UniqueInstances::required);
  EXPECT_EQ(table.devices(), devices({{"0", true}}));
}

// The list must be what the table holds: every claimed vdev (Unhealthy when
// its device is offline) and every placeholder, in VdevOrder, nothing else.
void expect_list_matches_table(const VirtualDeviceTable& table,
                               const std::set<std::string>& offline, int step) {
  const auto& list = table.devices();
  ASSERT_TRUE(std::is_sorted(list.begin(), list.end(),
                             [](const auto& a, const auto& b) { return VdevOrder{}(a.id, b.id); }))
      << "step " << step;
  size_t claimed_listed = 0;
  for (const auto& device : list) {
    auto claimed = table.claimed().find(device.id);
    if (claimed == table.claimed().end()) {
      ASSERT_TRUE(table.is_placeholder(device.id)) << device.id << ", step " << step;
      ASSERT_TRUE(device.healthy) << device.id << ", step " << step;
      continue;
    }
    ++claimed_listed;
    ASSERT_EQ(device.healthy, !offline.count(claimed->second.instance))
        << device.id << ", step " << step;
  }
  ASSERT_EQ(claimed_listed, table.claimed().size()) << "step " << step;
}

// The incremental table must end where a table built from scratch ends,
// whatever order the changes came in.
TEST(VirtualDeviceTable, IncrementalChangesMatchATableBuiltAfresh) {
  std::vector<Instance> cams;
  cams.reserve(8);
  for (int i = 0; i < 8; ++i) cams.push_back(instance("cam-" + std::to_string(i), 3));
  std::set<std::string> offline;
  VirtualDeviceTable table("node-a", UniqueInstances::required);
  for (const auto& cam : cams) table.put(InstanceSlots::decode(cam));
  std::mt19937 random(7);
  for (int step = 0; step < 600; ++step) {
    auto& cam = cams[random() % cams.size()];
    auto slot = cam.name + "-" + std::to_string(random() % 3);
    const std::array<std::string, 4> usages = {"", "node-b", "C:x:node-a", "offline"};
    std::string usage = usages.at(random() % usages.size());
    if (usage.empty()) {
      cam.device_usage.erase(slot);
    } else if (usage == "offline") {
      if (!offline.erase(cam.name)) offline.insert(cam.name);
    } else {
      if (usage == "C:x:node-a") {
        auto placeholders = table.devices();
        std::erase_if(placeholders, [&](const auto& d) { return !table.is_placeholder(d.id); });
        if (placeholders.empty()) continue;
        usage = "C:" + placeholders.front().id + ":node-a";
      }
      cam.device_usage[slot] = usage;
    }
    auto shared_before = table.shared_devices();
    const std::vector<PluginDevice> list_before(shared_before->begin(), shared_before->end());
    table.put(InstanceSlots::decode(cam, offline.count(cam.name) > 0));
    ASSERT_EQ(*shared_before, list_before) << "a held list changed, step " << step;
    if (table.shared_devices() == shared_before) {
      ASSERT_EQ(table.devices(), list_before) << "the list changed but stayed the same object";
    }
    expect_list_matches_table(table, offline, step);
    VirtualDeviceTable fresh("node-a", UniqueInstances::required);
    for (const auto& c : cams) fresh.put(InstanceSlots::decode(c, offline.count(c.name) > 0));
    ASSERT_EQ(table.claimed(), fresh.claimed()) << "step " << step;
    ASSERT_EQ(table.devices().size(), fresh.devices().size()) << "step " << step;
    ASSERT_EQ(table.candidates().size(), fresh.candidates().size()) << "step " << step;
  }
}

TEST(VirtualDeviceTable, ForeignVdevIdsSortAfterOurs) {
  EXPECT_EQ(table_for({instance("instance-a", 4,
                                {{"instance-a-0", "C:akri.sh/config-a-1:node-a"},
                                 {"instance-a-1", "node-a"},
                                 {"instance-a-2", "node-b"}})}),
            devices({{"0", true}, {"akri.sh/config-a-1", true}}))
      << "Akri scenario 11: the claimed vdev plus one placeholder";
}

// ---- planning --------------------------------------------------------------------

TEST(PlanContainer, ReusesHeldVdevsAndRanksCandidatesByFreeSlots) {
  VirtualDeviceTable table("node-a", UniqueInstances::required);
  table.put(InstanceSlots::decode(instance("b", 3)));
  table.put(InstanceSlots::decode(instance("a", 3)));
  table.put(InstanceSlots::decode(instance("c", 2, {{"c-0", "C:5:node-a"}})));
  auto plan = plan_container({"5", "0"}, table);
  ASSERT_EQ(plan.reused.size(), 1u);
  EXPECT_EQ(plan.reused[0].second, (ClaimedSlot{"c", 0}));
  EXPECT_EQ(plan.new_vdevs, std::vector<std::string>{"0"});
  std::vector<std::string> ranked;
  for (const auto& candidate : table.candidates()) ranked.push_back(candidate.instance);
  EXPECT_EQ(ranked, (std::vector<std::string>{"a", "b", "c"}))
      << "most free slots first, ties by name";
  EXPECT_EQ(plan_container({"42"}, table).new_vdevs, std::vector<std::string>{"42"})
      << "an id of ours the table no longer lists is a placeholder";
  EXPECT_THROW(plan_container({"cam"}, table), std::invalid_argument);
  EXPECT_THROW(plan_container({"042"}, table), std::invalid_argument);
  EXPECT_THROW(plan_container({"0", "0"}, table), std::invalid_argument);
}

// ---- claims against a real store ----------------------------------------------------

class CapacityManagerTest : public TwoNodesOneStore {
 protected:
  void refresh(CapacityManager& manager) {
    for (const auto& stored : store_a_->list()) manager.apply(stored);
  }
  std::map<std::string, std::string> usage(const std::string& name) {
    return store_a_->get("default", name)->instance.device_usage;
  }
  VirtualDeviceTable table_of(CapacityManager& manager, const std::vector<std::string>& names,
                              UniqueInstances policy = UniqueInstances::required) {
    refresh(manager);
    VirtualDeviceTable table(manager.node(), policy);
    for (const auto& name : names)
      if (const auto* stored = manager.find({"default", name}))
        table.put(InstanceSlots::decode(stored->instance));
    return table;
  }
};

TEST_F(CapacityManagerTest, InstanceLevelClaimsAsAkriScenarioEight) {
  add(instance("instance-a", 4,
               {{"instance-a-0", "C:akri.sh/config-a-1:node-a"},
                {"instance-a-1", "node-a"},
                {"instance-a-2", "node-b"}}));
  EXPECT_THROW(
      node_a_->allocate_instance_level({"default", "instance-a"}, {{"instance-a-0"}}, false),
      AllocationError)
      << "a CL-held slot is refused to IL";
  auto claims =
      node_a_->allocate_instance_level({"default", "instance-a"}, {{"instance-a-3"}}, false);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(claims[0], (ContainerClaims{{"instance-a", 3}}));
  EXPECT_EQ(usage("instance-a"),
            (std::map<std::string, std::string>{{"instance-a-0", "C:akri.sh/config-a-1:node-a"},
                                                {"instance-a-1", "node-a"},
                                                {"instance-a-2", "node-b"},
                                                {"instance-a-3", "node-a"}}));
  // Re-allocating a slot this node already holds succeeds (pod restart).
  EXPECT_NO_THROW(
      node_a_->allocate_instance_level({"default", "instance-a"}, {{"instance-a-1"}}, false));
  EXPECT_THROW(
      node_a_->allocate_instance_level({"default", "instance-a"}, {{"instance-a-9"}}, false),
      AllocationError);
}

// Another node lowered the capacity; this node's cache still has the old
// one, so only the stored Instance can refuse the slot.
TEST_F(CapacityManagerTest, AnInstanceLevelSlotBeyondAShrunkCapacityIsRefused) {
  add(instance("cam-1", 3));
  auto smaller = store_b_->get("default", "cam-1").value();
  smaller.instance.capacity = 1;
  store_b_->update(smaller.instance, smaller.revision);
  try {
    node_a_->allocate_instance_level({"default", "cam-1"}, {{"cam-1-2"}}, false);
    ADD_FAILURE() << "slot 2 of a capacity-1 Instance was granted";
  } catch (const AllocationError& e) {
    EXPECT_NE(std::string(e.what()).find("cam-1 has only 1 slots now"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(usage("cam-1").empty()) << "nothing written beyond the capacity";
}

TEST_F(CapacityManagerTest, ConfigurationLevelClaimTakesTheFirstFreeSlotAsAkriScenarioTwelve) {
  add(instance("instance-a", 4,
               {{"instance-a-0", "C:akri.sh/config-a-1:node-a"},
                {"instance-a-1", "node-a"},
                {"instance-a-2", "node-b"}}));
  auto table = table_of(*node_a_, {"instance-a"});
  ASSERT_TRUE(table.is_placeholder("0"));
  auto claims =
      node_a_->allocate_configuration_level("default", {{"0"}}, table, UniqueInstances::required);
  ASSERT_EQ(claims.size(), 1u) << "one response per container request";
  EXPECT_EQ(claims[0], (ContainerClaims{{"instance-a", 3}}));
  EXPECT_EQ(usage("instance-a").at("instance-a-3"), "C:0:node-a");
}

TEST_F(CapacityManagerTest, AFailedInstanceLevelCallClaimsNothing) {
  add(instance("inst", 3, {{"inst-2", "node-b"}}));
  EXPECT_THROW(node_a_->allocate_instance_level({"default", "inst"},
                                                {{"inst-0"}, {"inst-1", "inst-2"}}, false),
               AllocationError);
  EXPECT_EQ(usage("inst"), (std::map<std::string, std::string>{{"inst-2", "node-b"}}));
  EXPECT_THROW(node_a_->allocate_instance_level({"default", "inst"}, {{"inst-0"}}, true),
               AllocationError)
      << "an offline device is not allocated";
}

// Not a StoreError nor an AllocationError (here: thrown by the listener the
// daemon hands its grants to): the call still fails whole, as a failed
// Allocate the daemon answers, instead of leaving the core thread.
TEST_F(CapacityManagerTest, AnUnexpectedFailureWhileClaimingRollsTheCallBack) {
  add(instance("inst", 3));
  node_a_->set_grant_listener(
      [](const InstanceKey&, uint32_t) { throw std::runtime_error("out of something"); });
  try {
    node_a_->allocate_instance_level({"default", "inst"}, {{"inst-0"}, {"inst-1"}}, false);
    ADD_FAILURE() << "granted";
  } catch (const AllocationError& e) {
    EXPECT_EQ(std::string(e.what()), "claiming failed: out of something");
  }
  EXPECT_TRUE(usage("inst").empty());
}

// One slot named twice in one call, in one container or in two, would be
// granted twice; IL and CL refuse it alike, and claim nothing.
TEST_F(CapacityManagerTest, AnIdRequestedTwiceInOneCallIsRefused) {
  add(instance("inst", 3));
  for (const auto& call : std::vector<std::vector<std::vector<std::string>>>{
           {{"inst-0", "inst-0"}}, {{"inst-1"}, {"inst-0", "inst-1"}}}) {
    try {
      node_a_->allocate_instance_level({"default", "inst"}, call, false);
      ADD_FAILURE() << "granted " << call.back().back() << " twice";
    } catch (const AllocationError& e) {
      EXPECT_EQ(std::string(e.what()), "device id " + call.back().back() + " is requested twice");
    }
  }
  EXPECT_TRUE(usage("inst").empty());
  auto table = table_of(*node_a_, {"inst"});
  EXPECT_THROW(node_a_->allocate_configuration_level("default", {{"0"}, {"0"}}, table,
                                                     UniqueInstances::required),
               AllocationError);
  EXPECT_TRUE(usage("inst").empty());
}

// The claims of an Allocate are on the disk before it returns; the flush
// that makes them durable is the store's thread's, after the answer.
TEST_F(CapacityManagerTest, AnAllocateWaitsForItsClaimsToReachTheDiskNotForTheFlush) {
  add(instance("cam-1", 2));
  add(instance("cam-2", 2));
  const int flushes = journal_flushes_here;
  const int write_outs = journal_write_outs_here;
  const uint64_t synced = store_a_->journal_syncs().value();
  node_a_->allocate_instance_level({"default", "cam-1"}, {{"cam-1-0"}}, false);
  node_a_->allocate_configuration_level(
      "default", {{"0", "1"}}, table_of(*node_a_, {"cam-1", "cam-2"}), UniqueInstances::required);
  EXPECT_EQ(journal_flushes_here - flushes, 0) << "an Allocate waited for the disk's flush";
  EXPECT_EQ(journal_write_outs_here - write_outs, 3) << "a claim was not on the disk";
  EXPECT_TRUE(dowser::test::eventually([&] { return store_a_->journal_syncs().value() > synced; }))
      << "the claims were never flushed";
}

TEST_F(CapacityManagerTest, TwoCameraRequestGetsTwoDistinctDevicesAndThreeFails) {
  add(instance("cam-1", 2));
  add(instance("cam-2", 2));
  auto table = table_of(*node_a_, {"cam-1", "cam-2"});
  ASSERT_EQ(table.devices().size(), 2u);
  EXPECT_THROW(node_a_->allocate_configuration_level("default", {{"0", "1", "2"}}, table,
                                                     UniqueInstances::required),
               AllocationError)
      << "vdev 2 is not advertised";
  auto claims = node_a_->allocate_configuration_level("default", {{"0", "1"}}, table,
                                                      UniqueInstances::required);
  ASSERT_EQ(claims.at(0).size(), 2u);
  EXPECT_NE(claims[0][0].first, claims[0][1].first) << "two distinct Instances";
  EXPECT_EQ(usage("cam-1"), (std::map<std::string, std::string>{{"cam-1-0", "C:0:node-a"}}));
  EXPECT_EQ(usage("cam-2"), (std::map<std::string, std::string>{{"cam-2-0", "C:1:node-a"}}));

  // Now 0 and 1 are held, and each camera still has a free slot: two new placeholders.
  table = table_of(*node_a_, {"cam-1", "cam-2"});
  EXPECT_EQ(table.devices(), devices({{"0", true}, {"1", true}, {"2", true}, {"3", true}}));
  // Three distinct cameras cannot be had.
  EXPECT_THROW(node_a_->allocate_configuration_level("default", {{"2", "3", "0"}}, table,
                                                     UniqueInstances::required),
               AllocationError);
  EXPECT_EQ(usage("cam-1").size(), 1u) << "the failed call rolled back its claims";
  EXPECT_EQ(usage("cam-2").size(), 1u);
}

// A file store whose next update lands and is then refused as a conflict,
// as the Kubernetes store's is when the client sends a write again whose
// answer was lost (a dropped connection, a 504).
class StoreLosingAnAnswer : public dowser::store::FileInstanceStore {
 public:
  using FileInstanceStore::FileInstanceStore;
  uint64_t update(const dowser::store::Instance& instance, uint64_t expected_revision) override {
    const uint64_t written = FileInstanceStore::update(instance, expected_revision);
    if (std::exchange(lose_next_answer, false))
      throw dowser::store::StoreError(dowser::store::StoreError::Kind::conflict,
                                      "the write sent again found it written");
    return written;
  }
  bool lose_next_answer = false;
};

// The claim reads the Instance again and finds its own write there: that
// slot is the claim. Taking the next free one too would hold two slots for
// one virtual device, the second never rolled back nor freed.
TEST_F(CapacityManagerTest, AConfigurationLevelClaimWhoseAnswerWasLostHoldsOneSlot) {
  add(instance("cam-1", 2));
  StoreLosingAnAnswer store(dir_.path());
  CapacityManager node(store, "node-a");
  auto table = table_of(node, {"cam-1"});
  store.lose_next_answer = true;
  auto claims =
      node.allocate_configuration_level("default", {{"0"}}, table, UniqueInstances::required);
  EXPECT_FALSE(store.lose_next_answer) << "the claim made no write";
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(claims[0], (ContainerClaims{{"cam-1", 0}}));
  EXPECT_EQ(usage("cam-1"), (std::map<std::string, std::string>{{"cam-1-0", "C:0:node-a"}}));
}

// Another node took the last free slot of one device, so dowserd withdrew a
// placeholder; the kubelet, whose list lags, still offered it. The pod gets
// the device that is free rather than a refusal that fails its admission.
TEST_F(CapacityManagerTest, APlaceholderWithdrawnWhileTheKubeletStillOfferedItIsGranted) {
  add(instance("cam-1", 1));
  add(instance("cam-2", 1));
  ASSERT_EQ(table_of(*node_a_, {"cam-1", "cam-2"}).devices(), devices({{"0", true}, {"1", true}}));
  node_b_->allocate_instance_level({"default", "cam-1"}, {{"cam-1-0"}}, false);
  auto table = table_of(*node_a_, {"cam-1", "cam-2"});
  ASSERT_EQ(table.devices(), devices({{"0", true}})) << "1 was withdrawn";
  auto claims =
      node_a_->allocate_configuration_level("default", {{"1"}}, table, UniqueInstances::required);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(claims[0], (ContainerClaims{{"cam-2", 0}}));
  EXPECT_EQ(usage("cam-2"), (std::map<std::string, std::string>{{"cam-2-0", "C:1:node-a"}}));
}

TEST_F(CapacityManagerTest, ReallocatingAHeldVdevReusesItsSlot) {
  add(instance("cam-1", 1));
  auto table = table_of(*node_a_, {"cam-1"});
  node_a_->allocate_configuration_level("default", {{"0"}}, table, UniqueInstances::required);
  table = table_of(*node_a_, {"cam-1"});
  auto again =
      node_a_->allocate_configuration_level("default", {{"0"}}, table, UniqueInstances::required);
  EXPECT_EQ(again.at(0), (ContainerClaims{{"cam-1", 0}}));
  EXPECT_EQ(usage("cam-1"), (std::map<std::string, std::string>{{"cam-1-0", "C:0:node-a"}}));
}

// A pod restarted while its device is offline: its held vdev is listed
// Unhealthy, and an Allocate of it is refused (as IL refuses), not granted
// without the device; the claim stays for when the device is back.
TEST_F(CapacityManagerTest, AHeldVdevOnAnOfflineDeviceIsRefusedAndKept) {
  add(instance("cam-1", 1));
  node_a_->allocate_configuration_level("default", {{"0"}}, table_of(*node_a_, {"cam-1"}),
                                        UniqueInstances::required);
  VirtualDeviceTable offline(node_a_->node(), UniqueInstances::required);
  offline.put(InstanceSlots::decode(node_a_->find({"default", "cam-1"})->instance, true));
  ASSERT_TRUE(offline.is_offline("0"));
  try {
    node_a_->allocate_configuration_level("default", {{"0"}}, offline, UniqueInstances::required);
    ADD_FAILURE() << "vdev 0 was granted while cam-1 is offline";
  } catch (const AllocationError& e) {
    EXPECT_NE(std::string(e.what()).find("virtual device 0: device cam-1 is offline"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(usage("cam-1"), (std::map<std::string, std::string>{{"cam-1-0", "C:0:node-a"}}));
}

// Two vdevs held from earlier pods, both on cam-1: the kubelet may give
// them to one container (nothing else is free), which Required forbids.
TEST_F(CapacityManagerTest, TwoHeldVdevsOfOneDeviceAreNotGivenToOneContainerUnderRequired) {
  add(instance("cam-1", 2));
  node_a_->allocate_configuration_level("default", {{"0"}}, table_of(*node_a_, {"cam-1"}),
                                        UniqueInstances::required);
  node_a_->allocate_configuration_level("default", {{"1"}}, table_of(*node_a_, {"cam-1"}),
                                        UniqueInstances::required);
  try {
    node_a_->allocate_configuration_level("default", {{"0", "1"}}, table_of(*node_a_, {"cam-1"}),
                                          UniqueInstances::required);
    ADD_FAILURE() << "one container got two slots of cam-1";
  } catch (const AllocationError& e) {
    EXPECT_NE(std::string(e.what()).find("virtual devices 0 and 1 are both slots of cam-1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(usage("cam-1").size(), 2u) << "the earlier claims stay";
  auto claims = node_a_->allocate_configuration_level(
      "default", {{"0", "1"}}, table_of(*node_a_, {"cam-1"}, UniqueInstances::preferred),
      UniqueInstances::preferred);
  EXPECT_EQ(claims.at(0), (ContainerClaims{{"cam-1", 0}, {"cam-1", 1}})) << "Preferred allows it";
}

// The table says vdev 0 is held, but its claim was freed since (by the slot
// reclaimer) before the table was refreshed: the store decides.
TEST_F(CapacityManagerTest, AHeldVdevIsConfirmedOnTheStoreBeforeItIsReused) {
  add(instance("cam-1", 1));
  node_a_->allocate_configuration_level("default", {{"0"}}, table_of(*node_a_, {"cam-1"}),
                                        UniqueInstances::required);
  const auto stale = table_of(*node_a_, {"cam-1"});
  const auto held = SlotUsage::configuration_level("0", "node-a");

  ASSERT_TRUE(node_a_->release({"default", "cam-1"}, 0, held));
  node_a_->allocate_configuration_level("default", {{"0"}}, stale, UniqueInstances::required);
  EXPECT_EQ(usage("cam-1").at("cam-1-0"), "C:0:node-a") << "freed meanwhile: claimed again";

  ASSERT_TRUE(node_a_->release({"default", "cam-1"}, 0, held));
  node_b_->allocate_instance_level({"default", "cam-1"}, {{"cam-1-0"}}, false);
  try {
    node_a_->allocate_configuration_level("default", {{"0"}}, stale, UniqueInstances::required);
    ADD_FAILURE() << "vdev 0 was granted on a slot node-b holds";
  } catch (const AllocationError& e) {
    EXPECT_NE(std::string(e.what()).find("slot 0 of cam-1 is no longer this node's"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(usage("cam-1").at("cam-1-0"), "node-b");
}

TEST_F(CapacityManagerTest, PreferredLetsOneContainerTakeTwoSlotsOfOneDevice) {
  add(instance("cam-1", 2));
  auto table = table_of(*node_a_, {"cam-1"}, UniqueInstances::preferred);
  ASSERT_EQ(table.devices().size(), 2u);
  EXPECT_THROW(
      node_a_->allocate_configuration_level("default", {{"0", "1"}}, table_of(*node_a_, {"cam-1"}),
                                            UniqueInstances::required),
      AllocationError);
  auto claims = node_a_->allocate_configuration_level("default", {{"0", "1"}}, table,
                                                      UniqueInstances::preferred);
  EXPECT_EQ(claims.at(0), (ContainerClaims{{"cam-1", 0}, {"cam-1", 1}}));
}

TEST_F(CapacityManagerTest, InstanceAndConfigurationLevelShareTheSlots) {
  add(instance("cam-1", 1));
  auto table = table_of(*node_a_, {"cam-1"});
  node_b_->allocate_instance_level({"default", "cam-1"}, {{"cam-1-0"}}, false);
  EXPECT_THROW(
      node_a_->allocate_configuration_level("default", {{"0"}}, table, UniqueInstances::required),
      AllocationError)
      << "node-a's view was stale; the store's compare-and-swap refuses the claim";
  EXPECT_EQ(usage("cam-1"), (std::map<std::string, std::string>{{"cam-1-0", "node-b"}}));
  EXPECT_TRUE(table_of(*node_a_, {"cam-1"}).devices().empty()) << "nothing free is advertised";
}

TEST_F(CapacityManagerTest, ReleaseOnlyFreesWhatItExpects) {
  add(instance("cam-1", 1, {{"cam-1-0", "node-b"}}));
  EXPECT_FALSE(node_a_->release({"default", "cam-1"}, 0, SlotUsage::instance_level("node-a")));
  EXPECT_TRUE(node_a_->release({"default", "cam-1"}, 0, SlotUsage::instance_level("node-b")));
  EXPECT_TRUE(usage("cam-1").empty());
}

// Two nodes allocating concurrently through both plugin kinds never hold a
// slot twice, and never exceed capacity.
TEST_F(CapacityManagerTest, ConcurrentClaimsFromTwoNodesNeverOversubscribe) {
  add(instance("cam-1", 3));
  add(instance("cam-2", 3));
  std::atomic<int> granted{0};
  auto worker = [&](CapacityManager& manager, bool instance_level) {
    for (int i = 0; i < 60; ++i) {
      try {
        if (instance_level) {
          std::string name = i % 2 ? "cam-1" : "cam-2";
          manager.allocate_instance_level({"default", name}, {{name + "-" + std::to_string(i % 3)}},
                                          false);
        } else {
          auto table = table_of(manager, {"cam-1", "cam-2"});
          auto ids = table.devices();
          std::vector<std::string> wanted;
          for (const auto& d : ids)
            if (table.is_placeholder(d.id) && wanted.size() < 2) wanted.push_back(d.id);
          if (wanted.empty()) continue;
          manager.allocate_configuration_level("default", {wanted}, table,
                                               UniqueInstances::required);
        }
        ++granted;
      } catch (const AllocationError&) {
      }
    }
  };
  std::thread a([&] { worker(*node_a_, false); });
  std::thread b([&] { worker(*node_b_, true); });
  a.join();
  b.join();
  for (const char* name : {"cam-1", "cam-2"}) {
    auto used = usage(name);
    EXPECT_LE(used.size(), 3u);
    for (const auto& [slot, value] : used) EXPECT_FALSE(value.empty()) << slot;
  }
  EXPECT_GT(granted.load(), 0);
}

}  // namespace
