// Matching semantics against the devices of tests/peers/udev under umockdev,
// through the built module loaded as dowserd loads it (FakeHost): globs,
// singular and plural fields, parent fallback, OR-ed rules, grouping,
// properties, permissions and vfio.
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
using dowser::testkit::Snapshot;
using Ids = std::vector<std::string>;

class UdevLab : public ::testing::Test {
 protected:
  UdevLab() { testbed.load_lab(); }

  // The first snapshot of a session: the result of the initial full scan.
  Snapshot discover(const std::string& details, dowser::Properties properties = {}) {
    auto session = host.start({details, std::move(properties)});
    bool reported = host.wait_for_snapshot(
        session, [](const Snapshot&) { return true; }, 10s);
    host.stop(session);
    EXPECT_TRUE(reported) << "no snapshot for " << details;
    EXPECT_TRUE(host.violations().empty()) << host.violations().front();
    auto snapshots = host.snapshots(session);
    return snapshots.empty() ? Snapshot{} : snapshots.front();
  }

  // The ids reported for these rules, sorted.
  Ids ids_for(const std::vector<std::string>& rules) {
    std::string details = "udevRules:\n";
    for (const auto& rule : rules) details += "  - '" + rule + "'\n";
    Ids ids;
    for (const auto& device : discover(details)) ids.push_back(device.id);
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  Ids ids_for(const std::string& rule) { return ids_for(std::vector<std::string>{rule}); }

  static Ids sorted(Ids ids) {
    std::sort(ids.begin(), ids.end());
    return ids;
  }

  Testbed testbed;  // first: the handler's libudev must see it
  FakeHost host{UDEV_HANDLER_SO};
};

dowser::Device only(const Snapshot& snapshot) {
  if (snapshot.size() != 1) throw std::runtime_error("expected one device");
  return snapshot.front();
}

TEST_F(UdevLab, SubsystemKernelAndEnvGlobs) {
  EXPECT_EQ(ids_for(R"(SUBSYSTEM=="video4linux")"), sorted({kVideo0, kVideo1, kVideo2}));
  EXPECT_EQ(ids_for(R"(KERNEL=="video*", ENV{ID_SERIAL}=="?*")"),
            sorted({kVideo0, kVideo1, kVideo2}));
  EXPECT_EQ(ids_for(R"(KERNEL=="video[0-9]*", ENV{ID_V4L_CAPABILITIES}==":capture:")"),
            sorted({kVideo0, kVideo2}));
  EXPECT_EQ(ids_for(R"(KERNEL=="ttyS*|video2")"), sorted({kTtyS0, kVideo2}));
}

TEST_F(UdevLab, InequalityAndAbsentValuesReadAsEmpty) {
  EXPECT_EQ(ids_for(R"(SUBSYSTEM=="video4linux", ENV{ID_V4L_CAPABILITIES}!=":capture:")"),
            Ids{kVideo1});
  // video1 has no ID_V4L_PRODUCT: "?*" (non-empty) fails, its negation holds.
  EXPECT_EQ(ids_for(R"(SUBSYSTEM=="video4linux", ENV{ID_V4L_PRODUCT}=="?*")"),
            sorted({kVideo0, kVideo2}));
  EXPECT_EQ(ids_for(R"(SUBSYSTEM=="video4linux", ENV{ID_V4L_PRODUCT}!="?*")"), Ids{kVideo1});
  EXPECT_EQ(ids_for(R"(SUBSYSTEM=="tty", KERNEL!="ttyUSB*")"), Ids{kTtyS0});
  EXPECT_EQ(ids_for(R"(SUBSYSTEM!="video4linux", ENV{ID_SERIAL}=="PeersLab*")"), Ids{kCamera1});
}

TEST_F(UdevLab, AttributesAndDevpath) {
  EXPECT_EQ(ids_for(R"(SUBSYSTEM=="video4linux", ATTR{name}=="SimCam A: *")"),
            sorted({kVideo0, kVideo1}));
  EXPECT_EQ(ids_for(R"(ATTR{idVendor}=="0c45")"), Ids{kCamera10});
  // "*/1-1/*" must not match below 1-10.
  EXPECT_EQ(ids_for(R"(DEVPATH=="*/usb1/1-1/*", SUBSYSTEM=="video4linux")"),
            sorted({kVideo0, kVideo1}));
  EXPECT_EQ(ids_for(R"(DEVPATH!="*/usb1/1-1/*", SUBSYSTEM=="video4linux")"), Ids{kVideo2});
}

TEST_F(UdevLab, PluralFieldsWalkTheParents) {
  EXPECT_EQ(ids_for(R"(SUBSYSTEM=="video4linux", ATTRS{idVendor}=="046d")"),
            sorted({kVideo0, kVideo1}));
  EXPECT_EQ(ids_for(R"(SUBSYSTEM=="tty", SUBSYSTEMS=="usb")"), Ids{kTtyUsb0});
  EXPECT_EQ(ids_for(R"(SUBSYSTEM=="tty", SUBSYSTEMS!="usb")"), Ids{kTtyS0});
  EXPECT_EQ(ids_for(R"(SUBSYSTEM=="tty", DRIVERS=="ftdi_sio")"), Ids{kTtyUsb0});
  EXPECT_EQ(ids_for(R"(SUBSYSTEM=="video4linux", KERNELS=="1-1?")"), Ids{kVideo2});
  EXPECT_EQ(ids_for(R"(SUBSYSTEM=="video4linux", KERNELS!="1-1?")"), sorted({kVideo0, kVideo1}));
  // TAGS on card0 reaches its children; TAG only looks at the device itself.
  EXPECT_EQ(ids_for(R"(SUBSYSTEM=="sound", TAGS=="seat")"),
            sorted({kCard0, kCard0 + "/controlC0", kCard0 + "/pcmC0D0c", kCard0 + "/pcmC0D0p"}));
  EXPECT_EQ(ids_for(R"(SUBSYSTEM=="sound", TAG=="seat")"), Ids{kCard0});
  EXPECT_EQ(ids_for(R"(SUBSYSTEM=="video4linux", TAG!="uaccess")"), Ids{kVideo2});
}

TEST_F(UdevLab, DriverOfTheDeviceItself) {
  EXPECT_EQ(ids_for(R"(DRIVER=="vfio-pci")"), Ids{kGpu});
  EXPECT_EQ(ids_for(R"(SUBSYSTEM=="pci", DRIVER!="*hcd|pcieport|vfio*")"),
            Ids{"/devices/pci0000:00/0000:00:1f.3"});
  EXPECT_TRUE(ids_for(R"(SUBSYSTEM=="video4linux", DRIVER=="uvcvideo")").empty())
      << "the driver is the interface's, not the video node's";
}

TEST_F(UdevLab, NearestAncestorWithADeviceNodeIsReported) {
  // The USB interfaces have no node: their USB devices are reported instead.
  auto snapshot = discover(R"(udevRules: ['SUBSYSTEM=="usb", ENV{DEVTYPE}=="usb_interface"'])");
  std::vector<std::pair<std::string, std::string>> reported;
  for (const auto& device : snapshot)
    reported.emplace_back(device.id, device.properties.at("UDEV_DEVNODE").value_or(""));
  EXPECT_EQ(reported, (std::vector<std::pair<std::string, std::string>>{
                          {kCamera1, "/dev/bus/usb/001/002"},
                          {kCamera10, "/dev/bus/usb/001/010"},
                          {kSerialAdapter, "/dev/bus/usb/001/004"}}));
  // Nothing above the GPU has a node: it is reported by itself, without one.
  auto gpu = only(discover(R"(udevRules: ['KERNEL=="0000:01:00.0"'])"));
  EXPECT_EQ(gpu.id, kGpu);
  EXPECT_EQ(gpu.properties, (dowser::Properties{{"UDEV_DEVPATH", kGpu}}));
  EXPECT_TRUE(gpu.device_nodes.empty());
}

TEST_F(UdevLab, RulesAreOredAndADeviceIsReportedOnce) {
  EXPECT_EQ(ids_for(std::vector<std::string>{R"(KERNEL=="video0")",
                                             R"(SUBSYSTEM=="video4linux", ATTRS{idVendor}=="046d")",
                                             R"(KERNEL=="ttyS0")"}),
            sorted({kVideo0, kVideo1, kTtyS0}));
  // The three interfaces and the adapter itself all resolve to the adapter.
  EXPECT_EQ(ids_for(std::vector<std::string>{R"(KERNEL=="1-4*")", R"(KERNEL=="ttyUSB0")"}),
            sorted({kSerialAdapter, kTtyUsb0}));
}

TEST_F(UdevLab, DevicePropertiesAndNodesWithPermissions) {
  auto video0 = only(discover("udevRules: ['KERNEL==\"video0\"']\npermissions: wr\n"));
  EXPECT_EQ(video0.id, kVideo0);
  EXPECT_EQ(video0.sharing, dowser::Sharing::local);
  EXPECT_EQ(video0.properties,
            (dowser::Properties{{"UDEV_DEVPATH", kVideo0}, {"UDEV_DEVNODE", "/dev/video0"}}));
  EXPECT_EQ(video0.device_nodes,
            (std::vector<dowser::DeviceNode>{{"/dev/video0", "/dev/video0", "rw"}}));
}

TEST_F(UdevLab, GroupRecursiveGathersASoundCardInAStableOrder) {
  auto card = only(discover("udevRules: ['SUBSYSTEM==\"sound\"']\ngroupRecursive: true\n"));
  EXPECT_EQ(card.id, kCard0);
  EXPECT_EQ(card.properties, (dowser::Properties{{"UDEV_DEVPATH", kCard0},
                                                 {"UDEV_DEVNODE_0", "/dev/snd/controlC0"},
                                                 {"UDEV_DEVNODE_1", "/dev/snd/pcmC0D0c"},
                                                 {"UDEV_DEVNODE_2", "/dev/snd/pcmC0D0p"}}));
  ASSERT_EQ(card.device_nodes.size(), 3u);
  EXPECT_EQ(card.device_nodes[0],
            (dowser::DeviceNode{"/dev/snd/controlC0", "/dev/snd/controlC0", "rwm"}));
  // Without grouping: four devices (card0 itself has no node).
  EXPECT_EQ(ids_for(R"(SUBSYSTEM=="sound")").size(), 4u);
}

TEST_F(UdevLab, GroupsStopAtPathBoundaries) {
  // 1-1 is a string prefix of 1-10 but not its parent: two groups.
  auto snapshot = discover(
      "udevRules: ['KERNEL==\"1-1|1-10\"', 'SUBSYSTEM==\"video4linux\"']\ngroupRecursive: true\n");
  ASSERT_EQ(snapshot.size(), 2u);
  EXPECT_EQ(snapshot[0].id, kCamera1);
  EXPECT_EQ(snapshot[0].properties, (dowser::Properties{{"UDEV_DEVPATH", kCamera1},
                                                        {"UDEV_DEVNODE_0", "/dev/bus/usb/001/002"},
                                                        {"UDEV_DEVNODE_1", "/dev/video0"},
                                                        {"UDEV_DEVNODE_2", "/dev/video1"}}));
  EXPECT_EQ(snapshot[1].id, kCamera10);
  EXPECT_EQ(snapshot[1].device_nodes.size(), 2u);
}

TEST_F(UdevLab, ResourcePropertiesForUsbAndPciDevices) {
  dowser::Properties named = {{"devicePluginResourceName", "akri.sh/udev-cam"}};
  auto camera = only(discover(R"(udevRules: ['ATTR{serial}=="SN0010"'])", named));
  EXPECT_EQ(camera.properties.at("USB_RESOURCE_AKRI_SH_UDEV-CAM"), "1:10");
  EXPECT_EQ(camera.properties.count("PCI_RESOURCE_AKRI_SH_UDEV-CAM"), 0u);
  auto gpu = only(discover(R"(udevRules: ['DRIVER=="vfio-pci"'])", named));
  EXPECT_EQ(gpu.properties.at("PCI_RESOURCE_AKRI_SH_UDEV-CAM"), "0000:01:00.0");
  auto video = only(discover(R"(udevRules: ['KERNEL=="video2"'])", named));
  EXPECT_EQ(video.properties.size(), 2u) << "a video node is neither a USB nor a PCI resource";
}

TEST_F(UdevLab, VfioPassthroughUsesTheIommuGroup) {
  dowser::Properties vfio = {{"vfioPassthrough", "true"}};
  auto gpu = only(discover(R"(udevRules: ['DRIVER=="vfio-pci"'])", vfio));
  EXPECT_EQ(gpu.device_nodes,
            (std::vector<dowser::DeviceNode>{{"/dev/vfio/12", "/dev/vfio/12", "rwm"},
                                             {"/dev/vfio/vfio", "/dev/vfio/vfio", "rwm"}}));
  auto audio = only(discover(R"(udevRules: ['DRIVER=="snd_hda_intel"'])", vfio));
  EXPECT_TRUE(audio.device_nodes.empty()) << "no iommu_group link, no vfio nodes";
}

TEST_F(UdevLab, BadRulesAreRefusedByValidate) {
  try {
    host.validate({"udevRules: ['KERNEL==\"x\"', 'KERNEL==\"video*\" SUBSYSTEM==\"usb\"']", {}});
    ADD_FAILURE() << "a rule without its comma was accepted";
  } catch (const dowser::host::HandlerCallError& e) {
    EXPECT_EQ(e.status(), DOWSER_ERR_INVALID_ARGUMENT);
    EXPECT_NE(e.message().find("udevRules[1]"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("column 18: expected ','"), std::string::npos) << e.message();
  }
  EXPECT_NO_THROW(host.validate({R"(udevRules: ['KERNEL=="?*"'])", {}}));
}

}  // namespace
}  // namespace udev_handler::testing
