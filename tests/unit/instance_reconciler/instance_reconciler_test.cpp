// instance_for and the InstanceReconciler against a real file store in a
// temp dir: Instances created, left alone, withdrawn, kept offline for a
// shared device's grace. Time is the `now` argument, never a sleep.
#include "instance_reconciler.hpp"
#include "log_capture.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <unordered_map>
#include <vector>

namespace fs = std::filesystem;
using dowser::Device;
using dowser::Sharing;
using dowser::capacity::CapacityManager;
using dowser::capacity::InstanceKey;
using dowser::configuration::Configuration;
using dowser::reconcile::Clock;
using dowser::reconcile::ConfigurationKey;
using dowser::reconcile::instance_for;
using dowser::reconcile::InstanceReconciler;
using dowser::store::FileInstanceStore;

namespace {

Configuration configuration(std::string name, uint32_t capacity = 2) {
  Configuration result;
  result.name = std::move(name);
  result.handler_name = "debugEcho";
  result.capacity = capacity;
  return result;
}

Device device(std::string id, Sharing sharing, dowser::Properties properties = {}) {
  Device result;
  result.id = std::move(id);
  result.sharing = sharing;
  result.properties = std::move(properties);
  return result;
}

// ---- instance_for ------------------------------------------------------------------

TEST(InstanceFor, SharedDeviceIsNamedByItsIdAlone) {
  auto config = configuration("cams", 3);
  config.namespace_name = "edge";
  config.broker_properties = {{"RESOLUTION", "1080p"}, {"SOURCE", "configuration"}};
  auto dev = device("dev_1", Sharing::shared,
                    {{"SOURCE", "device"}, {"DEBUG_ECHO_DESCRIPTION", "dev_1"}, {"BARE", {}}});

  auto instance = instance_for(config, dev, "node-a", "example.com");

  EXPECT_EQ(instance.name, "cams-cb2ad7") << "Akri's digest of a shared device id";
  EXPECT_EQ(instance.namespace_name, "edge");
  EXPECT_EQ(instance.configuration_name, "cams");
  EXPECT_EQ(instance.cdi_name, "example.com/cams=cb2ad7");
  EXPECT_EQ(instance.capacity, 3u);
  EXPECT_TRUE(instance.shared);
  EXPECT_EQ(instance.broker_properties,
            (std::map<std::string, std::string>{{"DEBUG_ECHO_DESCRIPTION", "dev_1"},
                                                {"RESOLUTION", "1080p"},
                                                {"SOURCE", "configuration"}}))
      << "device properties with the Configuration's laid over; one without a value is left out";
  EXPECT_TRUE(instance.nodes.empty()) << "nodes are the caller's";
  EXPECT_TRUE(instance.device_usage.empty());
  EXPECT_EQ(instance_for(config, dev, "node-b", "example.com"), instance)
      << "every node names a shared device alike";
}

TEST(InstanceFor, LocalDeviceIsNamedByIdAndNode) {
  auto config = configuration("usb");
  auto on_a = instance_for(config, device("my_local_device", Sharing::local), "my_node", "akri.sh");
  auto on_b =
      instance_for(config, device("my_local_device", Sharing::local), "my_other_node", "akri.sh");
  EXPECT_EQ(on_a.name, "usb-e77db4");
  EXPECT_EQ(on_b.name, "usb-099763");
  EXPECT_EQ(on_a.cdi_name, "akri.sh/usb=e77db4");
  EXPECT_FALSE(on_a.shared);
}

// ---- the reconciler on a real store ---------------------------------------------------

// A file store whose updates and removals fail while `failing` is set (a
// full disk, an API server out of reach).
class StoreWithFailingWrites : public FileInstanceStore {
 public:
  using FileInstanceStore::FileInstanceStore;
  uint64_t update(const dowser::store::Instance& instance, uint64_t expected_revision) override {
    fail_if_failing();
    return FileInstanceStore::update(instance, expected_revision);
  }
  void remove(const std::string& namespace_name, const std::string& name,
              uint64_t expected_revision) override {
    fail_if_failing();
    FileInstanceStore::remove(namespace_name, name, expected_revision);
  }
  bool failing = false;

 private:
  void fail_if_failing() const {
    if (failing)
      throw dowser::store::StoreError(dowser::store::StoreError::Kind::io, "writes are failing");
  }
};

class InstanceReconcilerTest : public ::testing::Test {
 protected:
  InstanceReconcilerTest() {
    store_ = std::make_unique<StoreWithFailingWrites>(dir_);
    capacity_ = std::make_unique<CapacityManager>(*store_, "node-a");
    reconciler_ = std::make_unique<InstanceReconciler>(*store_, *capacity_, "node-a", "akri.sh");
  }

  std::optional<dowser::store::StoredInstance> stored(const InstanceKey& key) {
    return store_->get(key.first, key.second);
  }

  const dowser::test::TempDir temp_dir_{"dowser-reconciler"};  // outlives what follows
  const fs::path dir_ = temp_dir_.path();
  std::unique_ptr<StoreWithFailingWrites> store_;
  std::unique_ptr<CapacityManager> capacity_;
  std::unique_ptr<InstanceReconciler> reconciler_;
  const Clock::time_point start_ = Clock::now();
};

const InstanceKey kShared{"default", "cams-cb2ad7"};  // dev_1, shared

TEST_F(InstanceReconcilerTest, NewDeviceCreatesAnInstanceListingThisNode) {
  auto config = configuration("cams", 3);
  config.broker_properties = {{"RESOLUTION", "1080p"}};
  auto dev = device("dev_1", Sharing::shared, {{"DEBUG_ECHO_DESCRIPTION", "dev_1"}});

  EXPECT_EQ(reconciler_->reconcile(config, {dev}, start_), std::set<InstanceKey>{kShared});

  auto in_store = stored(kShared);
  ASSERT_TRUE(in_store);
  EXPECT_EQ(in_store->instance.nodes, std::set<std::string>{"node-a"});
  EXPECT_EQ(in_store->instance.capacity, 3u);
  EXPECT_EQ(in_store->instance.broker_properties,
            (std::map<std::string, std::string>{{"DEBUG_ECHO_DESCRIPTION", "dev_1"},
                                                {"RESOLUTION", "1080p"}}));
  ASSERT_NE(capacity_->find(kShared), nullptr) << "the pool's cache knows it at once";
  EXPECT_EQ(capacity_->find(kShared)->revision, in_store->revision);
  ASSERT_NE(reconciler_->device(kShared), nullptr);
  EXPECT_EQ(*reconciler_->device(kShared), dev);
  EXPECT_FALSE(reconciler_->offline(kShared));
  EXPECT_EQ(reconciler_->instances_of("default", "cams"), std::vector<InstanceKey>{kShared});
  EXPECT_TRUE(reconciler_->is_instance_of(kShared, "cams"));
  EXPECT_FALSE(reconciler_->is_instance_of(kShared, "other"));
}

TEST_F(InstanceReconcilerTest, UnchangedSnapshotWritesNothing) {
  auto config = configuration("cams");
  auto dev = device("dev_1", Sharing::shared, {{"DEBUG_ECHO_DESCRIPTION", "dev_1"}});
  reconciler_->reconcile(config, {dev}, start_);
  auto first = stored(kShared);
  ASSERT_TRUE(first);

  EXPECT_TRUE(reconciler_->reconcile(config, {dev}, start_).empty());
  EXPECT_EQ(stored(kShared)->revision, first->revision);

  // A changed property is written, under the same name and to the same node.
  dev.properties["DEBUG_ECHO_DESCRIPTION"] = "renamed";
  EXPECT_TRUE(reconciler_->reconcile(config, {dev}, start_).empty()) << "visibility did not change";
  auto second = stored(kShared);
  EXPECT_GT(second->revision, first->revision);
  EXPECT_EQ(second->instance.broker_properties.at("DEBUG_ECHO_DESCRIPTION"), "renamed");
  EXPECT_EQ(second->instance.nodes, std::set<std::string>{"node-a"});
}

TEST_F(InstanceReconcilerTest, ChangedCapacityRewritesTheInstance) {
  auto config = configuration("cams", 2);
  auto dev = device("dev_1", Sharing::shared);
  reconciler_->reconcile(config, {dev}, start_);
  config.capacity = 5;
  reconciler_->reconcile(config, {dev}, start_);
  EXPECT_EQ(stored(kShared)->instance.capacity, 5u);
}

// A shrunk capacity drops the claims beyond it, and says so once per claim
// (the decision is made on the cached copy, then again on the stored one).
TEST_F(InstanceReconcilerTest, AShrunkCapacityDropsTheClaimsBeyondItAndSaysSoOnce) {
  auto config = configuration("cams", 3);
  auto dev = device("dev_1", Sharing::shared);
  reconciler_->reconcile(config, {dev}, start_);
  auto claimed = *stored(kShared);
  claimed.instance.device_usage = {{"cams-cb2ad7-0", "node-a"}, {"cams-cb2ad7-2", "node-b"}};
  claimed.revision = store_->update(claimed.instance, claimed.revision);
  capacity_->apply(claimed);

  const dowser::test::LogCapture log;
  config.capacity = 2;
  reconciler_->reconcile(config, {dev}, start_);
  EXPECT_EQ(stored(kShared)->instance.device_usage,
            (std::map<std::string, std::string>{{"cams-cb2ad7-0", "node-a"}}));
  const std::string line = "cams-cb2ad7: dropping claim cams-cb2ad7-2=node-b beyond capacity 2";
  const std::string text = log.text();
  ASSERT_NE(text.find(line), std::string::npos) << text;
  EXPECT_EQ(text.find(line, text.find(line) + 1), std::string::npos) << "said twice: " << text;
}

TEST_F(InstanceReconcilerTest, VanishedLocalDeviceIsWithdrawnAtOnce) {
  auto config = configuration("usb");
  auto dev = device("my_local_device", Sharing::local);
  InstanceKey key{"default", "usb-" + dowser::naming::device_digest(dev.id, false, "node-a")};
  reconciler_->reconcile(config, {dev}, start_);
  ASSERT_TRUE(stored(key));

  EXPECT_EQ(reconciler_->reconcile(config, {}, start_), std::set<InstanceKey>{key});
  EXPECT_FALSE(stored(key)) << "the last node out deletes the Instance";
  EXPECT_EQ(capacity_->find(key), nullptr);
  EXPECT_EQ(reconciler_->device(key), nullptr);
  EXPECT_FALSE(reconciler_->next_expiry());
}

// A withdrawal the store refused is tried again until it is written; not
// once the device is back (this node belongs in the Instance again).
TEST_F(InstanceReconcilerTest, AWithdrawalTheStoreRefusedIsTriedAgainUnlessTheDeviceIsBack) {
  auto config = configuration("usb");
  auto dev = device("my_local_device", Sharing::local);
  InstanceKey key{"default", "usb-" + dowser::naming::device_digest(dev.id, false, "node-a")};
  reconciler_->reconcile(config, {dev}, start_);

  store_->failing = true;
  reconciler_->reconcile(config, {}, start_);
  ASSERT_TRUE(stored(key)) << "the store refused";
  EXPECT_TRUE(reconciler_->withdrawals_failed());
  EXPECT_EQ(reconciler_->retry_withdrawals(), std::set<InstanceKey>{key});
  EXPECT_TRUE(reconciler_->withdrawals_failed()) << "refused again";
  store_->failing = false;
  EXPECT_EQ(reconciler_->retry_withdrawals(), std::set<InstanceKey>{key});
  EXPECT_FALSE(stored(key)) << "the last node out deletes the Instance";
  EXPECT_FALSE(reconciler_->withdrawals_failed());

  reconciler_->reconcile(config, {dev}, start_);
  store_->failing = true;
  reconciler_->reconcile(config, {}, start_);
  store_->failing = false;
  reconciler_->reconcile(config, {dev}, start_);  // back before the retry
  EXPECT_TRUE(reconciler_->retry_withdrawals().empty());
  EXPECT_FALSE(reconciler_->withdrawals_failed());
  ASSERT_TRUE(stored(key));
  EXPECT_EQ(stored(key)->instance.nodes, std::set<std::string>{"node-a"});
}

TEST_F(InstanceReconcilerTest, VanishedSharedDeviceStaysOfflineForItsGrace) {
  auto config = configuration("cams");
  config.shared_offline_grace = std::chrono::seconds(300);
  reconciler_->reconcile(config, {device("dev_1", Sharing::shared)}, start_);

  EXPECT_EQ(reconciler_->reconcile(config, {}, start_), std::set<InstanceKey>{kShared});
  EXPECT_TRUE(stored(kShared));
  EXPECT_TRUE(reconciler_->offline(kShared));
  EXPECT_EQ(reconciler_->next_expiry(), start_ + std::chrono::seconds(300));
  EXPECT_TRUE(reconciler_->reconcile(config, {}, start_ + std::chrono::seconds(10)).empty())
      << "still missing: nothing new, and the grace does not restart";
  EXPECT_EQ(reconciler_->next_expiry(), start_ + std::chrono::seconds(300));

  EXPECT_TRUE(reconciler_->expire(start_ + std::chrono::seconds(299)).empty());
  EXPECT_TRUE(stored(kShared));
  EXPECT_EQ(reconciler_->expire(start_ + std::chrono::seconds(300)),
            std::set<InstanceKey>{kShared});
  EXPECT_FALSE(stored(kShared));
  EXPECT_FALSE(reconciler_->offline(kShared));
  EXPECT_FALSE(reconciler_->next_expiry());
}

TEST_F(InstanceReconcilerTest, SharedDeviceBackWithinItsGraceIsOnlineAgain) {
  const dowser::test::LogCapture log;
  auto config = configuration("cams");
  auto dev = device("dev_1", Sharing::shared);
  reconciler_->reconcile(config, {dev}, start_);
  reconciler_->reconcile(config, {}, start_);
  ASSERT_TRUE(reconciler_->offline(kShared));

  EXPECT_EQ(reconciler_->reconcile(config, {dev}, start_ + std::chrono::seconds(5)),
            std::set<InstanceKey>{kShared});
  EXPECT_FALSE(reconciler_->offline(kShared));
  EXPECT_NE(log.text().find(kShared.second + ": device dev_1 is back; online again"),
            std::string::npos)
      << log.text();
  EXPECT_FALSE(reconciler_->next_expiry());
  EXPECT_TRUE(reconciler_->expire(start_ + std::chrono::hours(1)).empty());
  EXPECT_TRUE(stored(kShared));
}

TEST_F(InstanceReconcilerTest, ClaimedSharedDeviceOutlastsItsGraceUntilReleased) {
  auto config = configuration("cams");
  config.shared_offline_grace = std::chrono::seconds(60);
  reconciler_->reconcile(config, {device("dev_1", Sharing::shared)}, start_);
  capacity_->allocate_instance_level(kShared, {{"cams-cb2ad7-0"}}, false);
  reconciler_->reconcile(config, {}, start_);

  EXPECT_FALSE(reconciler_->next_expiry()) << "it waits for the release, not for a clock";
  EXPECT_TRUE(reconciler_->expire(start_ + std::chrono::hours(1)).empty());
  ASSERT_TRUE(stored(kShared));

  ASSERT_TRUE(capacity_->release(kShared, 0, dowser::naming::SlotUsage::instance_level("node-a")));
  EXPECT_EQ(reconciler_->expire(start_ + std::chrono::hours(1)), std::set<InstanceKey>{kShared});
  EXPECT_FALSE(stored(kShared));
}

TEST_F(InstanceReconcilerTest, SharedDeviceIsOneInstanceAcrossNodes) {
  // A second node on the same store directory, as two daemons on one machine.
  FileInstanceStore store_b(dir_);
  CapacityManager capacity_b(store_b, "node-b");
  InstanceReconciler node_b(store_b, capacity_b, "node-b", "akri.sh");
  auto config = configuration("cams");
  config.shared_offline_grace = std::chrono::seconds(0);
  auto dev = device("dev_1", Sharing::shared);

  reconciler_->reconcile(config, {dev}, start_);
  node_b.reconcile(config, {dev}, start_);
  EXPECT_EQ(stored(kShared)->instance.nodes, (std::set<std::string>{"node-a", "node-b"}));

  EXPECT_EQ(reconciler_->reconcile(config, {}, start_), std::set<InstanceKey>{kShared})
      << "no grace: node-a leaves at once";
  ASSERT_TRUE(stored(kShared)) << "node-b still sees it";
  EXPECT_EQ(stored(kShared)->instance.nodes, std::set<std::string>{"node-b"});
}

TEST_F(InstanceReconcilerTest, WithdrawAllLeavesEveryInstanceOfTheConfiguration) {
  auto cams = configuration("cams");
  auto usb = configuration("usb");
  reconciler_->reconcile(cams, {device("dev_1", Sharing::shared)}, start_);
  reconciler_->reconcile(usb, {device("dev_2", Sharing::local)}, start_);
  ASSERT_EQ(store_->list().size(), 2u);

  EXPECT_EQ(reconciler_->withdraw_all({"default", "cams"}), std::set<InstanceKey>{kShared});
  auto left = store_->list();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].instance.configuration_name, "usb");
}

// ---- changes instead of snapshots --------------------------------------------------

dowser::host::DeviceChanges complete(std::vector<Device> devices) {
  dowser::host::DeviceChanges changes;
  changes.complete = true;
  changes.devices = devices.size();
  changes.reported = std::move(devices);
  return changes;
}

dowser::host::DeviceChanges changes(std::vector<Device> reported, std::vector<Device> gone = {}) {
  dowser::host::DeviceChanges result;
  result.reported = std::move(reported);
  result.gone = std::move(gone);
  return result;
}

InstanceKey key_of(const std::string& configuration, const Device& dev) {
  return {"default",
          configuration + "-" +
              dowser::naming::device_digest(dev.id, dev.sharing == Sharing::shared, "node-a")};
}

TEST_F(InstanceReconcilerTest, ChangesDoWhatTheSnapshotTheyDescribeWouldDo) {
  auto config = configuration("usb");
  auto one = device("one", Sharing::local, {{"P", "1"}});
  auto two = device("two", Sharing::local);
  auto three = device("three", Sharing::local);
  EXPECT_EQ(reconciler_->apply(config, complete({one, two}), start_),
            (std::set<InstanceKey>{key_of("usb", one), key_of("usb", two)}));
  auto one_before = stored(key_of("usb", one));
  ASSERT_TRUE(one_before);

  auto renamed = device("one", Sharing::local, {{"P", "2"}});
  EXPECT_EQ(reconciler_->apply(config, changes({renamed, three}, {two}), start_),
            (std::set<InstanceKey>{key_of("usb", two), key_of("usb", three)}));
  EXPECT_FALSE(stored(key_of("usb", two))) << "a gone local device is withdrawn at once";
  EXPECT_TRUE(stored(key_of("usb", three)));
  EXPECT_EQ(stored(key_of("usb", one))->instance.broker_properties.at("P"), "2");
  EXPECT_EQ(*reconciler_->device(key_of("usb", one)), renamed);

  auto three_revision = stored(key_of("usb", three))->revision;
  EXPECT_TRUE(reconciler_->apply(config, changes({}), start_).empty());
  EXPECT_TRUE(
      reconciler_->apply(config, changes({}, {device("never", Sharing::local)}), start_).empty())
      << "a device it never knew";
  EXPECT_EQ(stored(key_of("usb", three))->revision, three_revision) << "nothing written";
}

TEST_F(InstanceReconcilerTest, ACompleteChangeWithdrawsWhatItLacks) {
  auto config = configuration("usb");
  auto one = device("one", Sharing::local);
  auto two = device("two", Sharing::local);
  reconciler_->apply(config, complete({one, two}), start_);

  EXPECT_EQ(reconciler_->apply(config, complete({two}), start_),
            std::set<InstanceKey>{key_of("usb", one)})
      << "a restarted session's first snapshot";
  EXPECT_FALSE(stored(key_of("usb", one)));
  EXPECT_TRUE(stored(key_of("usb", two)));
}

TEST_F(InstanceReconcilerTest, AGoneSharedDeviceStaysOfflineForItsGraceAndMayComeBack) {
  auto config = configuration("cams");
  config.shared_offline_grace = std::chrono::seconds(300);
  auto dev = device("dev_1", Sharing::shared);
  reconciler_->apply(config, complete({dev}), start_);

  EXPECT_EQ(reconciler_->apply(config, changes({}, {dev}), start_), std::set<InstanceKey>{kShared});
  EXPECT_TRUE(reconciler_->offline(kShared));
  EXPECT_EQ(reconciler_->next_expiry(), start_ + std::chrono::seconds(300));

  EXPECT_EQ(reconciler_->apply(config, changes({dev}), start_ + std::chrono::seconds(5)),
            std::set<InstanceKey>{kShared});
  EXPECT_FALSE(reconciler_->offline(kShared));
  EXPECT_FALSE(reconciler_->next_expiry());
}

TEST_F(InstanceReconcilerTest, ChangesUnderAChangedConfigurationRewriteEveryDevice) {
  auto config = configuration("cams", 2);
  auto dev = device("dev_1", Sharing::shared);
  auto other = device("dev_2", Sharing::shared);
  reconciler_->apply(config, complete({dev}), start_);

  config.capacity = 5;
  reconciler_->apply(config, changes({other}), start_);
  EXPECT_EQ(stored(kShared)->instance.capacity, 5u) << "a device the changes did not name";
  EXPECT_EQ(stored(key_of("cams", other))->instance.capacity, 5u);
}

TEST_F(InstanceReconcilerTest, ReapplyWritesAChangedConfigurationToTheReportedDevices) {
  auto config = configuration("cams", 2);
  EXPECT_TRUE(reconciler_->reapply(config, start_).empty()) << "no snapshot yet";
  auto dev = device("dev_1", Sharing::shared);
  reconciler_->apply(config, complete({dev}), start_);

  config.capacity = 3;
  EXPECT_TRUE(reconciler_->reapply(config, start_).empty()) << "visibility did not change";
  EXPECT_EQ(stored(kShared)->instance.capacity, 3u);
  EXPECT_FALSE(reconciler_->offline(kShared));
}

// A failed discovery says nothing about the devices: they stay, local ones
// too and past any grace, Unhealthy, until a complete snapshot says again.
TEST_F(InstanceReconcilerTest, AFailedDiscoveryKeepsItsDevicesUnhealthyUntilItReportsAgain) {
  auto cams = configuration("cams");
  cams.shared_offline_grace = std::chrono::seconds(0);
  const auto local = device("cam-usb", Sharing::local);
  const auto shared = device("dev_1", Sharing::shared);
  reconciler_->apply(cams, complete({local, shared}), start_);
  const InstanceKey local_key{"default", instance_for(cams, local, "node-a", "akri.sh").name};
  auto other = configuration("usb");
  reconciler_->apply(other, complete({device("dev_2", Sharing::shared)}), start_);
  const InstanceKey other_key{
      "default", instance_for(other, device("dev_2", Sharing::shared), "node-a", "akri.sh").name};

  EXPECT_EQ(reconciler_->discovery_failed({"default", "cams"}),
            (std::set<InstanceKey>{kShared, local_key}));
  EXPECT_TRUE(reconciler_->offline(kShared));
  EXPECT_TRUE(reconciler_->offline(local_key));
  EXPECT_FALSE(reconciler_->offline(other_key)) << "another Configuration's discovery works";
  EXPECT_TRUE(reconciler_->expire(start_ + std::chrono::hours(1)).empty());
  EXPECT_FALSE(reconciler_->next_expiry()) << "unknown is not gone: no grace runs";
  EXPECT_TRUE(stored(kShared));
  EXPECT_TRUE(stored(local_key));

  // The restarted session reports one of the two: it is Healthy again, the
  // other goes as any device missing from a snapshot does.
  EXPECT_EQ(reconciler_->apply(cams, complete({shared}), start_ + std::chrono::seconds(5)),
            (std::set<InstanceKey>{kShared, local_key}));
  EXPECT_FALSE(reconciler_->offline(kShared));
  EXPECT_FALSE(stored(local_key));
}

// After a restart, a session that fails before its first snapshot leaves
// the stored Instances unknown too: Unhealthy, not withdrawn.
TEST_F(InstanceReconcilerTest, AFailureBeforeTheFirstSnapshotMakesTheStoredInstancesUnhealthy) {
  auto config = configuration("cams");
  reconciler_->apply(config, complete({device("dev_1", Sharing::shared)}), start_);
  InstanceReconciler restarted(*store_, *capacity_, "node-a", "akri.sh");
  ASSERT_FALSE(restarted.offline(kShared));

  EXPECT_EQ(restarted.discovery_failed({"default", "cams"}), std::set<InstanceKey>{kShared});
  EXPECT_TRUE(restarted.offline(kShared));
  EXPECT_TRUE(stored(kShared));
  EXPECT_EQ(restarted.apply(config, complete({device("dev_1", Sharing::shared)}), start_),
            std::set<InstanceKey>{kShared});
  EXPECT_FALSE(restarted.offline(kShared));
}

// The stored Instances a failure adopts stand for devices not reported:
// a reapply (a changed capacity, say) writes no Instance for them.
TEST_F(InstanceReconcilerTest, AReapplyWhileDiscoveryFailsMakesNoInstanceOfAnAdoptedOne) {
  auto config = configuration("cams");
  reconciler_->apply(config, complete({device("dev_1", Sharing::shared)}), start_);
  // Listing this node, unknown to this process (a withdraw that failed).
  auto stray = instance_for(config, device("dev_9", Sharing::shared), "node-a", "akri.sh");
  stray.nodes = {"node-a"};
  capacity_->apply({stray, store_->create(stray)});
  reconciler_->discovery_failed({"default", "cams"});

  config.capacity = 3;
  reconciler_->reapply(config, start_);
  EXPECT_EQ(store_->list().size(), 2u) << "only dev_1's and the stray one";
}

TEST_F(InstanceReconcilerTest, ReapplyBeforeTheFirstSnapshotLeavesStoredInstancesAlone) {
  auto config = configuration("cams");
  config.shared_offline_grace = std::chrono::seconds(0);
  reconciler_->apply(config, complete({device("dev_1", Sharing::shared)}), start_);
  // A restart: a new reconciler over the same store.
  InstanceReconciler restarted(*store_, *capacity_, "node-a", "akri.sh");
  EXPECT_TRUE(restarted.reapply(config, start_).empty());
  EXPECT_TRUE(stored(kShared));
  EXPECT_EQ(restarted.apply(config, complete({}), start_), std::set<InstanceKey>{kShared})
      << "adopted on the first snapshot, and withdrawn as it is not in it";
  EXPECT_FALSE(stored(kShared));
}

TEST_F(InstanceReconcilerTest, AnInstanceThatLostThisNodeIsJoinedAgainOnTheNextChanges) {
  auto config = configuration("cams");
  auto dev = device("dev_1", Sharing::shared);
  reconciler_->apply(config, complete({dev}), start_);
  auto instance = stored(kShared);
  ASSERT_TRUE(instance);
  // Someone else deletes the Instance; the store watch tells the daemon.
  store_->remove(kShared.first, kShared.second, instance->revision);
  capacity_->forget(kShared);
  EXPECT_EQ(reconciler_->stored_instance_changed(kShared), ConfigurationKey("default", "cams"));
  EXPECT_EQ(reconciler_->stored_instance_changed(kShared), std::nullopt) << "told once";

  reconciler_->apply(config, changes({}), start_);
  ASSERT_TRUE(stored(kShared)) << "joined again, as a complete snapshot would";
  EXPECT_EQ(stored(kShared)->instance.nodes, std::set<std::string>{"node-a"});
  EXPECT_EQ(reconciler_->stored_instance_changed(kShared), std::nullopt) << "it lists this node";
}

// The daemon does not wait for the next changes (a handler may report none
// for days): it reapplies the Configuration it was told of.
TEST_F(InstanceReconcilerTest, AnInstanceThatLostThisNodeIsJoinedAgainByAReapply) {
  auto config = configuration("cams");
  reconciler_->apply(config, complete({device("dev_1", Sharing::shared)}), start_);
  auto instance = stored(kShared);
  ASSERT_TRUE(instance);
  store_->remove(kShared.first, kShared.second, instance->revision);
  capacity_->forget(kShared);
  ASSERT_TRUE(reconciler_->stored_instance_changed(kShared));

  reconciler_->reapply(config, start_);
  ASSERT_TRUE(stored(kShared));
  EXPECT_EQ(stored(kShared)->instance.nodes, std::set<std::string>{"node-a"});
}

// ---- staged creates: advertised first, written after ---------------------------------

// ---- two devices, one name -----------------------------------------------------------

// `count` device ids whose Instance names clash on node-a: the name keeps 24
// bits of a digest, so a few thousand ids hold a pair, a few hundred thousand
// a triple.
std::vector<std::string> clashing_ids(Sharing sharing, size_t count = 2) {
  std::unordered_map<std::string, std::vector<std::string>> by_digest;
  for (int i = 0;; ++i) {
    std::string id = "clash-" + std::to_string(i);
    auto& ids = by_digest[dowser::naming::device_digest(id, sharing == Sharing::shared, "node-a")];
    ids.push_back(std::move(id));
    if (ids.size() == count) return ids;
  }
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

std::string description(const dowser::store::StoredInstance& stored) {
  return stored.instance.broker_properties.at("DEBUG_ECHO_DESCRIPTION");
}

Device described(const std::string& id, Sharing sharing) {
  return device(id, sharing, {{"DEBUG_ECHO_DESCRIPTION", id}});
}

// `count` devices (described by their ids) whose Instance names clash, and that name.
struct Clash {
  std::vector<Device> devices;
  InstanceKey key;
};

Clash clash(const std::string& configuration, Sharing sharing, size_t count = 2) {
  Clash result;
  for (const auto& id : clashing_ids(sharing, count))
    result.devices.push_back(described(id, sharing));
  result.key = key_of(configuration, result.devices[0]);
  return result;
}

TEST_F(InstanceReconcilerTest, TwoDevicesOfOneNameMakeOneInstanceAndTheOtherIsToldOfOnce) {
  const dowser::test::LogCapture log;
  auto config = configuration("cams");
  const auto [devices, key] = clash("cams", Sharing::shared);
  const Device& first = devices[0];
  const Device& second = devices[1];
  const std::string& first_id = first.id;
  const std::string& second_id = second.id;
  ASSERT_EQ(key, key_of("cams", second));

  EXPECT_EQ(reconciler_->reconcile(config, {first, second}, start_), std::set<InstanceKey>{key});
  auto written = stored(key);
  ASSERT_TRUE(written);
  EXPECT_EQ(description(*written), first_id) << "the first device reported holds the name";
  EXPECT_EQ(*reconciler_->device(key), first);

  // Reported in the other order, the holder keeps its name and nothing is written.
  EXPECT_TRUE(reconciler_->reconcile(config, {second, first}, start_).empty());
  EXPECT_EQ(stored(key)->revision, written->revision);
  EXPECT_EQ(*reconciler_->device(key), first);
  const std::string told =
      "devices " + first_id + " and " + second_id + " both make Instance " + key.second;
  EXPECT_EQ(occurrences(log.text(), told), 1u) << log.text();
  EXPECT_NE(log.text().find(second_id + " is left out while " + first_id + " holds the name"),
            std::string::npos)
      << log.text();
}

TEST_F(InstanceReconcilerTest, ADeviceLeftOutForItsNameTakesItWhenTheHolderGoes) {
  auto config = configuration("usb");
  const auto [devices, key] = clash("usb", Sharing::local);
  const Device& first = devices[0];
  const Device& second = devices[1];
  const std::string& first_id = first.id;
  const std::string& second_id = second.id;
  reconciler_->apply(config, complete({first}), start_);
  EXPECT_TRUE(reconciler_->apply(config, changes({second}), start_).empty())
      << "left out: the holder is still reported";
  EXPECT_EQ(description(*stored(key)), first_id);

  EXPECT_EQ(reconciler_->apply(config, changes({}, {first}), start_), std::set<InstanceKey>{key});
  auto taken = stored(key);
  ASSERT_TRUE(taken) << "the waiting device took the name";
  EXPECT_EQ(description(*taken), second_id);
  EXPECT_EQ(*reconciler_->device(key), second);

  // The first one back now waits; gone while it waits, it is forgotten.
  reconciler_->apply(config, changes({first}), start_);
  EXPECT_EQ(*reconciler_->device(key), second);
  reconciler_->apply(config, changes({}, {first}), start_);
  EXPECT_EQ(*reconciler_->device(key), second) << "the holder is not the device that went";
  reconciler_->apply(config, changes({}, {second}), start_);
  EXPECT_FALSE(stored(key)) << "nothing waits for the name any more";
}

TEST_F(InstanceReconcilerTest, ADeviceLeftOutWaitsForAnOfflineHolderToExpire) {
  auto config = configuration("cams");
  config.shared_offline_grace = std::chrono::seconds(60);
  const auto [devices, key] = clash("cams", Sharing::shared);
  const Device& first = devices[0];
  const Device& second = devices[1];
  const std::string& first_id = first.id;
  const std::string& second_id = second.id;
  reconciler_->reconcile(config, {first, second}, start_);

  reconciler_->reconcile(config, {second}, start_);
  EXPECT_TRUE(reconciler_->offline(key)) << "the holder is kept offline for its grace";
  EXPECT_EQ(description(*stored(key)), first_id);
  reconciler_->reapply(config, start_);
  EXPECT_EQ(*reconciler_->device(key), first) << "a reapply keeps who waits";

  EXPECT_EQ(reconciler_->expire(start_ + std::chrono::seconds(60)), std::set<InstanceKey>{key});
  auto taken = stored(key);
  ASSERT_TRUE(taken);
  EXPECT_EQ(description(*taken), second_id);
  EXPECT_FALSE(reconciler_->offline(key));
}

// After a restart, a stored Instance stands for a device not reported yet:
// the device that comes back under its name is no clash.
TEST_F(InstanceReconcilerTest, ADeviceBackAfterARestartTakesTheNameItsStoredInstanceHeld) {
  const dowser::test::LogCapture log;
  auto config = configuration("cams");
  config.shared_offline_grace = std::chrono::seconds(60);
  auto dev = described("dev_1", Sharing::shared);
  reconciler_->apply(config, complete({dev}), start_);
  InstanceReconciler restarted(*store_, *capacity_, "node-a", "akri.sh");
  restarted.apply(config, complete({}), start_);
  ASSERT_TRUE(restarted.offline(kShared)) << "adopted and kept offline for its grace";

  restarted.apply(config, changes({dev}), start_);
  EXPECT_FALSE(restarted.offline(kShared));
  ASSERT_NE(restarted.device(kShared), nullptr);
  EXPECT_EQ(*restarted.device(kShared), dev);
  EXPECT_EQ(log.text().find("both make Instance"), std::string::npos) << log.text();
}

TEST_F(InstanceReconcilerTest, EveryDeviceLeftOutForOneNameIsKeptUntilItsTurn) {
  auto config = configuration("usb");
  const auto [devices, key] = clash("usb", Sharing::local, 3);
  const std::vector<std::string> ids = {devices[0].id, devices[1].id, devices[2].id};
  reconciler_->apply(config, complete({devices[0]}), start_);
  reconciler_->apply(config, changes({devices[1]}), start_);
  reconciler_->apply(config, changes({devices[2]}), start_);
  ASSERT_EQ(reconciler_->device(key)->id, ids[0]);

  reconciler_->apply(config, changes({}, {devices[0]}), start_);
  ASSERT_NE(reconciler_->device(key), nullptr);
  const std::string next = reconciler_->device(key)->id;
  EXPECT_NE(next, ids[0]);
  reconciler_->apply(config, changes({}, {described(next, Sharing::local)}), start_);
  ASSERT_NE(reconciler_->device(key), nullptr) << "the third device was not kept";
  EXPECT_EQ(reconciler_->device(key)->id, next == ids[1] ? ids[2] : ids[1]);
  EXPECT_EQ(description(*stored(key)), reconciler_->device(key)->id);
}

TEST_F(InstanceReconcilerTest, AStagedNewLocalDeviceIsPooledFirstAndWrittenAfter) {
  auto config = configuration("usb");
  auto local = device("one", Sharing::local);
  auto shared = device("dev_1", Sharing::shared);
  reconciler_->stage_creates();
  reconciler_->apply(config, complete({local, shared}), start_);

  const auto* pooled = capacity_->find(key_of("usb", local));
  ASSERT_NE(pooled, nullptr) << "in the pool, for its plugins to offer";
  EXPECT_EQ(pooled->revision, 0u);
  EXPECT_EQ(pooled->instance.nodes, std::set<std::string>{"node-a"});
  EXPECT_FALSE(stored(key_of("usb", local))) << "not written yet";
  EXPECT_TRUE(stored(key_of("usb", shared))) << "a shared device is written first";

  EXPECT_TRUE(reconciler_->write_staged().empty()) << "written as pooled";
  auto written = stored(key_of("usb", local));
  ASSERT_TRUE(written);
  EXPECT_EQ(written->instance, pooled->instance);
  EXPECT_EQ(capacity_->find(key_of("usb", local))->revision, written->revision);

  reconciler_->apply(config, changes({device("two", Sharing::local)}), start_);
  EXPECT_TRUE(stored(key_of("usb", device("two", Sharing::local))))
      << "staging ends with write_staged";
}

TEST_F(InstanceReconcilerTest, AStagedDeviceGoneBeforeTheWriteIsNeverWritten) {
  auto config = configuration("usb");
  auto local = device("one", Sharing::local);
  reconciler_->apply(config, complete({}), start_);
  reconciler_->stage_creates();
  reconciler_->apply(config, changes({local}), start_);
  reconciler_->apply(config, changes({}, {local}), start_);
  EXPECT_EQ(capacity_->find(key_of("usb", local)), nullptr);

  EXPECT_TRUE(reconciler_->write_staged().empty());
  EXPECT_FALSE(stored(key_of("usb", local)));
}

// A new local device of the usb Configuration reported with creates staged.
class StagedCreateTest : public InstanceReconcilerTest {
 protected:
  StagedCreateTest() {
    reconciler_->stage_creates();
    reconciler_->apply(config_, complete({local_}), start_);
  }
  const Configuration config_ = configuration("usb");
  const Device local_ = device("one", Sharing::local);
  const InstanceKey key_ = key_of("usb", local_);
};

TEST_F(StagedCreateTest, AStagedInstanceAnotherWriterCreatedIsJoinedWithItsClaims) {
  // Written behind the pool's back before the staged write, holding a claim.
  auto other = instance_for(config_, local_, "node-a", "akri.sh");
  other.nodes = {"node-a"};
  other.device_usage[key_.second + "-0"] = "C:0:node-a";
  store_->create(other);

  EXPECT_EQ(reconciler_->write_staged(), std::set<InstanceKey>{key_}) << "its plugins need a look";
  ASSERT_NE(capacity_->find(key_), nullptr);
  EXPECT_EQ(capacity_->find(key_)->instance.device_usage, other.device_usage) << "claims kept";
  EXPECT_EQ(capacity_->find(key_)->revision, stored(key_)->revision);
}

TEST_F(StagedCreateTest, AStagedInstanceThatCannotBeWrittenLeavesThePool) {
  fs::remove_all(dir_ / "default");
  {
    std::ofstream blocker(dir_ / "default");  // a file where its namespace folder goes
  }

  EXPECT_EQ(reconciler_->write_staged(), std::set<InstanceKey>{key_}) << "its plugins need a look";
  EXPECT_EQ(capacity_->find(key_), nullptr) << "not offered any more";
  fs::remove(dir_ / "default");
  reconciler_->apply(config_, changes({}), start_);
  EXPECT_TRUE(stored(key_)) << "the next report writes every device again";
}

}  // namespace
