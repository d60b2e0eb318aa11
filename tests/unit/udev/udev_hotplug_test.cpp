// Hot-plug under umockdev: a device added, changed and removed is reported
// each time, from the udev monitor. The periodic rescan is set to a day, so
// whatever a test sees within its deadline came through an event; one test
// changes a device without a uevent to show the rescan safety net.
#include "testbed.hpp"

#include <dowser/testkit.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace udev_handler::testing {
namespace {

using namespace std::chrono_literals;
using dowser::testkit::FakeHost;
using dowser::testkit::SessionId;
using dowser::testkit::Snapshot;

constexpr auto kDeadline = 10s;
const dowser::Properties kEventsOnly = {{"rescanIntervalSeconds", "86400"}};

bool has(const Snapshot& snapshot, const std::string& id) {
  return std::any_of(snapshot.begin(), snapshot.end(),
                     [&](const dowser::Device& d) { return d.id == id; });
}

class UdevHotplug : public ::testing::Test {
 protected:
  UdevHotplug() { testbed.load_lab(); }
  ~UdevHotplug() override {
    for (auto session : sessions_) host.stop(session);
    EXPECT_TRUE(host.violations().empty()) << host.violations().front();
  }

  SessionId start(const std::string& rule, const dowser::Properties& properties = kEventsOnly) {
    sessions_.push_back(host.start({"udevRules: ['" + rule + "']", properties}));
    EXPECT_TRUE(host.wait_for_snapshot(
        sessions_.back(), [](const Snapshot&) { return true; }, kDeadline))
        << "no first snapshot";
    return sessions_.back();
  }

  bool eventually_present(SessionId session, const std::string& id) {
    return host.wait_for_snapshot(
        session, [&](const Snapshot& s) { return has(s, id); }, kDeadline);
  }
  bool eventually_absent(SessionId session, const std::string& id) {
    return host.wait_for_snapshot(
        session, [&](const Snapshot& s) { return !has(s, id); }, kDeadline);
  }

  // A capture node below camera 10's interface, added with its uevent.
  std::string add_camera_node(const std::string& name) {
    return testbed.add("video4linux", name, kCamera10 + "/1-10:1.0", {{"name", "Hotplug Cam"}},
                       {{"DEVNAME", "/dev/" + name}, {"ID_V4L_CAPABILITIES", ":capture:"}});
  }

  Testbed testbed;  // first: the handler's libudev must see it
  FakeHost host{UDEV_HANDLER_SO};

 private:
  std::vector<SessionId> sessions_;
};

TEST_F(UdevHotplug, AddedChangedAndRemovedDevicesAreReportedEachTime) {
  auto session = start(R"(SUBSYSTEM=="video4linux", ATTR{name}=="Hotplug Cam")");
  ASSERT_TRUE(host.latest_snapshot(session)->empty());

  std::string video9 = add_camera_node("video9");
  ASSERT_TRUE(eventually_present(session, video9));
  auto added = *host.latest_snapshot(session);
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0].properties.at("UDEV_DEVNODE"), "/dev/video9");

  // A change that stops the rule matching, then one that makes it match again.
  testbed.set_attribute(video9, "name", "Renamed Cam");
  testbed.uevent(video9, "change");
  ASSERT_TRUE(eventually_absent(session, video9));
  testbed.set_attribute(video9, "name", "Hotplug Cam\n");  // sysfs-style: trailing newline
  testbed.uevent(video9, "change");
  ASSERT_TRUE(eventually_present(session, video9));

  testbed.remove(video9);
  ASSERT_TRUE(eventually_absent(session, video9));
  // Each step was a report of its own: empty, added, gone, back, gone.
  auto history = host.snapshots(session);
  ASSERT_EQ(history.size(), 5u);
  for (size_t i = 0; i < history.size(); ++i) EXPECT_EQ(history[i].size(), i % 2) << i;
}

TEST_F(UdevHotplug, AChangeToAParentReevaluatesTheDevicesBelowIt) {
  auto session = start(R"(SUBSYSTEM=="video4linux", ATTRS{product}=="SimCam*")");
  ASSERT_FALSE(has(*host.latest_snapshot(session), kVideo2));
  testbed.set_attribute(kCamera10, "product", "SimCam B");
  testbed.uevent(kCamera10, "change");
  EXPECT_TRUE(eventually_present(session, kVideo2));
  EXPECT_TRUE(has(*host.latest_snapshot(session), kVideo0)) << "other devices stay";
}

TEST_F(UdevHotplug, RemovingAParentRemovesEverythingBelowIt) {
  auto session = start(R"(SUBSYSTEM=="video4linux")");
  ASSERT_TRUE(has(*host.latest_snapshot(session), kVideo1));
  testbed.uevent(kCamera1, "remove");  // no uevents for the children: still correct
  EXPECT_TRUE(host.wait_for_snapshot(
      session, [](const Snapshot& s) { return s.size() == 1 && s[0].id == kVideo2; }, kDeadline));
}

TEST_F(UdevHotplug, EveryRunningSessionSeesTheEvent) {
  auto videos = start(R"(SUBSYSTEM=="video4linux")");
  auto tenth_port = start(R"(KERNELS=="1-10")");
  std::string video5 = add_camera_node("video5");
  EXPECT_TRUE(eventually_present(videos, video5));
  EXPECT_TRUE(eventually_present(tenth_port, video5));
}

TEST_F(UdevHotplug, TheRescanSeesAChangeWhoseEventWasLost) {
  auto session = start(R"(ATTR{name}=="Lost *")", {{"rescanIntervalSeconds", "1"}});
  ASSERT_TRUE(host.latest_snapshot(session)->empty());
  testbed.set_attribute(kVideo0, "name", "Lost event");  // no uevent follows
  EXPECT_TRUE(eventually_present(session, kVideo0));
}

}  // namespace
}  // namespace udev_handler::testing
