#include "slot_reclaimer.hpp"

#include <gtest/gtest.h>

namespace dowser::reclaim {
namespace {

using namespace std::chrono_literals;
using Clock = StaleSlotTracker::Clock;

const capacity::InstanceKey kCamera{"default", "camera-a1b2c3"};

HeldSlot il_slot(uint32_t index) {
  return instance_level_slot("akri.sh", kCamera, index, "node-a");
}

HeldSlot cl_slot(const std::string& vdev, uint32_t index) {
  return configuration_level_slot("akri.sh", "camera", vdev, kCamera, index, "node-a");
}

class StaleSlotTrackerTest : public ::testing::Test {
 protected:
  StaleSlotTracker tracker{20s};
  Clock::time_point t0 = Clock::now();
};

TEST(HeldSlotTest, InstanceLevelSlotIsNamedLikeTheKubeletReportsIt) {
  HeldSlot slot = il_slot(1);
  EXPECT_EQ(slot.resource, "akri.sh/camera-a1b2c3");
  EXPECT_EQ(slot.device_id, "camera-a1b2c3-1");  // no domain: Akri's defect
  EXPECT_EQ(slot.instance, kCamera);
  EXPECT_EQ(slot.slot, 1u);
  EXPECT_EQ(slot.usage, naming::SlotUsage::instance_level("node-a"));
}

TEST(HeldSlotTest, ConfigurationLevelSlotIsNamedByItsVirtualDevice) {
  HeldSlot slot = cl_slot("3", 0);
  EXPECT_EQ(slot.resource, "akri.sh/camera");
  EXPECT_EQ(slot.device_id, "3");
  EXPECT_EQ(slot.usage, naming::SlotUsage::configuration_level("3", "node-a"));
}

// What pods use that no claim names: IL and CL alike, in in_use order.
TEST(UnclaimedInUseTest, NamesWhatIsInUseWithoutAHeldSlot) {
  const std::vector<HeldSlot> held = {il_slot(1), cl_slot("3", 0)};
  const DevicesInUse in_use = {{"akri.sh/camera-a1b2c3", "camera-a1b2c3-1"},
                               {"akri.sh/camera-a1b2c3", "camera-a1b2c3-2"},
                               {"akri.sh/camera", "3"},
                               {"akri.sh/camera", "4"}};
  EXPECT_EQ(unclaimed_in_use(held, in_use),
            (std::vector<DeviceRef>{{"akri.sh/camera", "4"},
                                    {"akri.sh/camera-a1b2c3", "camera-a1b2c3-2"}}));
  EXPECT_TRUE(unclaimed_in_use(held, {}).empty());
}

// Akri section 10 item 9 (get_used_slots): what this node holds, in the
// kubelet's id space. Akri keeps the domain on the IL id, so its IL slots
// never match what the kubelet reports; dowser's do.
TEST(HeldSlotsTest, AkriItemNineNoInstancesHoldNothing) {
  EXPECT_TRUE(held_slots("akri.sh", "node-a", {}).empty());
}

TEST(HeldSlotsTest, AkriItemNineEveryClaimOfThisNodeAndNoOtherNodes) {
  store::StoredInstance stored;
  stored.instance.name = "instance-a";
  stored.instance.configuration_name = "config-a";
  stored.instance.capacity = 4;
  // The slots of item 8: [C(config-a-1, node-a), Node(node-a), Node(node-b), Unused].
  stored.instance.device_usage = {{"instance-a-0", "C:config-a-1:node-a"},
                                  {"instance-a-1", "node-a"},
                                  {"instance-a-2", "node-b"}};
  const capacity::InstanceKey key{"default", "instance-a"};
  auto held = held_slots("akri.sh", "node-a", {{key, stored}});
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0],
            configuration_level_slot("akri.sh", "config-a", "config-a-1", key, 0, "node-a"));
  EXPECT_EQ(held[0].resource, "akri.sh/config-a");
  EXPECT_EQ(held[0].device_id, "config-a-1");
  EXPECT_EQ(held[1], instance_level_slot("akri.sh", key, 1, "node-a"));
  EXPECT_EQ(held[1].device_id, "instance-a-1") << "no domain, as the kubelet reports it";
  EXPECT_EQ(held_slots("akri.sh", "node-b", {{key, stored}}),
            std::vector<HeldSlot>{instance_level_slot("akri.sh", key, 2, "node-b")});
}

// An Instance written by hand or by another program may have a name no
// resource can have; its claims are skipped and said, not thrown on (the
// reclaimer runs on the core thread).
TEST(HeldSlotsTest, AClaimUnderANameNoResourceCanHaveIsSkippedAndSaid) {
  store::StoredInstance stored;
  stored.instance.name = std::string(70, 'x');
  stored.instance.configuration_name = "config-a";
  stored.instance.capacity = 2;
  stored.instance.device_usage = {{stored.instance.name + "-0", "node-a"},
                                  {stored.instance.name + "-1", "C:0:node-a"}};
  const capacity::InstanceKey key{"default", stored.instance.name};
  std::vector<std::string> unnamed;
  auto held = held_slots("akri.sh", "node-a", {{key, stored}}, &unnamed);
  EXPECT_EQ(held, std::vector<HeldSlot>{configuration_level_slot("akri.sh", "config-a", "0", key, 1,
                                                                 "node-a")})
      << "the CL claim is named by its Configuration";
  ASSERT_EQ(unnamed.size(), 1u);
  EXPECT_NE(unnamed[0].find("Instance default/" + stored.instance.name + " slot 0"),
            std::string::npos)
      << unnamed[0];
  EXPECT_NE(unnamed[0].find("is not valid"), std::string::npos) << unnamed[0];
}

TEST_F(StaleSlotTrackerTest, NotDueBeforeGrace) {
  EXPECT_TRUE(tracker.due({il_slot(0)}, {}, t0).empty());
  EXPECT_TRUE(tracker.due({il_slot(0)}, {}, t0 + 19s).empty());
}

TEST_F(StaleSlotTrackerTest, DueOnceGraceHasPassed) {
  tracker.due({il_slot(0)}, {}, t0);
  EXPECT_EQ(tracker.due({il_slot(0)}, {}, t0 + 20s), std::vector<HeldSlot>{il_slot(0)});
}

TEST_F(StaleSlotTrackerTest, ReturnedOnlyOnce) {
  tracker.due({il_slot(0)}, {}, t0);
  ASSERT_EQ(tracker.due({il_slot(0)}, {}, t0 + 20s).size(), 1u);
  // Still held (the release may not have landed yet): a fresh grace starts.
  EXPECT_TRUE(tracker.due({il_slot(0)}, {}, t0 + 30s).empty());
  EXPECT_TRUE(tracker.due({il_slot(0)}, {}, t0 + 49s).empty());
}

TEST_F(StaleSlotTrackerTest, UseAgainRestartsTheGrace) {
  const DevicesInUse in_use{{"akri.sh/camera-a1b2c3", "camera-a1b2c3-0"}};
  tracker.due({il_slot(0)}, {}, t0);
  tracker.due({il_slot(0)}, in_use, t0 + 10s);
  EXPECT_TRUE(tracker.due({il_slot(0)}, {}, t0 + 20s).empty());
  EXPECT_TRUE(tracker.due({il_slot(0)}, {}, t0 + 39s).empty());
  EXPECT_EQ(tracker.due({il_slot(0)}, {}, t0 + 40s).size(), 1u);
}

// A held slot re-allocated (a pod restarted on it) while unused for almost
// the whole grace: the kubelet reports the new container only after the
// Allocate, so a list taken before that must not free the slot under it.
TEST_F(StaleSlotTrackerTest, AGrantRestartsTheGrace) {
  tracker.due({il_slot(0), il_slot(1)}, {}, t0);
  tracker.granted(il_slot(0), t0 + 19s);
  EXPECT_EQ(tracker.due({il_slot(0), il_slot(1)}, {}, t0 + 20s), std::vector<HeldSlot>{il_slot(1)})
      << "only the slot nobody was granted is due";
  EXPECT_TRUE(tracker.due({il_slot(0)}, {}, t0 + 38s).empty());
  EXPECT_EQ(tracker.due({il_slot(0)}, {}, t0 + 39s).size(), 1u)
      << "a grant nobody reports is reclaimed a grace after it";
}

TEST_F(StaleSlotTrackerTest, ForgetsSlotsNoLongerHeld) {
  tracker.due({il_slot(0)}, {}, t0);
  tracker.due({}, {}, t0 + 10s);  // released by someone else meanwhile
  EXPECT_TRUE(tracker.due({il_slot(0)}, {}, t0 + 20s).empty());
  EXPECT_EQ(tracker.due({il_slot(0)}, {}, t0 + 40s).size(), 1u);
}

TEST_F(StaleSlotTrackerTest, InstanceLevelSlotReportedByTheKubeletIsNeverDue) {
  // What the kubelet reports for an IL device: the bare slot name.
  const DevicesInUse kubelet{{"akri.sh/camera-a1b2c3", "camera-a1b2c3-1"}};
  for (auto t = 0s; t <= 60s; t += 10s) {
    EXPECT_TRUE(tracker.due({il_slot(1)}, kubelet, t0 + t).empty()) << "at " << t.count() << " s";
  }
}

TEST_F(StaleSlotTrackerTest, MatchesResourceAndDeviceTogether) {
  // The same vdev id under another Configuration is another device.
  const DevicesInUse elsewhere{{"akri.sh/microphone", "3"}};
  tracker.due({cl_slot("3", 0)}, elsewhere, t0);
  EXPECT_EQ(tracker.due({cl_slot("3", 0)}, elsewhere, t0 + 20s).size(), 1u);
}

// dowserd restarted with another --resource-domain: the pods admitted
// before run on, reported under the old domain, and keep their slots.
TEST_F(StaleSlotTrackerTest, ASlotReportedUnderAnotherDomainIsInUse) {
  const DevicesInUse old_domain{{"example.com/camera-a1b2c3", "camera-a1b2c3-0"},
                                {"example.com/camera", "1"}};
  for (auto t = 0s; t <= 60s; t += 10s) {
    EXPECT_TRUE(tracker.due({il_slot(0), cl_slot("1", 1)}, old_domain, t0 + t).empty())
        << "at " << t.count() << " s";
  }
}

TEST_F(StaleSlotTrackerTest, TracksEachSlotOnItsOwn) {
  const DevicesInUse in_use{{"akri.sh/camera", "1"}};
  tracker.due({il_slot(0), cl_slot("1", 1)}, in_use, t0);
  tracker.due({il_slot(0), cl_slot("1", 1), cl_slot("2", 2)}, in_use, t0 + 10s);
  EXPECT_EQ(tracker.due({il_slot(0), cl_slot("1", 1), cl_slot("2", 2)}, in_use, t0 + 20s),
            std::vector<HeldSlot>{il_slot(0)});
  EXPECT_EQ(tracker.due({cl_slot("1", 1), cl_slot("2", 2)}, in_use, t0 + 30s),
            std::vector<HeldSlot>{cl_slot("2", 2)});
}

TEST_F(StaleSlotTrackerTest, ReclaimingAVirtualDeviceForAnotherSlotStartsAfresh) {
  tracker.due({cl_slot("1", 0)}, {}, t0);
  // vdev 1 was freed and claimed again, now backed by slot 2.
  EXPECT_TRUE(tracker.due({cl_slot("1", 2)}, {}, t0 + 20s).empty());
}

}  // namespace
}  // namespace dowser::reclaim
