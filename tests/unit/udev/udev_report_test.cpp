// From matched devices to reported ones: Akri's vectors for USB and PCI
// addresses and resource names, grouping at path boundaries in a stable
// order, device nodes with the configured permissions, and vfio.
#include "udev_report.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace udev_handler {
namespace {

std::optional<std::string> no_iommu(const std::string&) { return std::nullopt; }

std::vector<std::string> ids(const std::vector<dowser::Device>& devices) {
  std::vector<std::string> result;
  for (const auto& d : devices) result.push_back(d.id);
  return result;
}

std::vector<std::string> node_paths(const dowser::Device& device) {
  std::vector<std::string> result;
  for (const auto& n : device.device_nodes) result.push_back(n.host_path);
  return result;
}

ReportSettings grouped() {
  ReportSettings settings;
  settings.group_recursive = true;
  return settings;
}

TEST(UdevReport, AkriUsbAddressVectors) {
  EXPECT_EQ(usb_address("/dev/bus/usb/001/010"), "1:10");
  EXPECT_EQ(usb_address("/dev/bus/usb/1/5"), "1:5");
  for (const char* none : {"/dev/ttyUSB0", "/dev/bus/usb/abc/def", "/dev/bus/usb/", "", "/",
                           "/dev/bus/usb/1", "/dev/bus/usb/1/2/3", "/dev/bus/usb/99999999999/1"}) {
    EXPECT_EQ(usb_address(none), std::nullopt) << none;
  }
}

TEST(UdevReport, AkriPciAddressVectors) {
  EXPECT_EQ(pci_address("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"), "0000:01:00.0");
  EXPECT_EQ(pci_address("/devices/pci0000:00/0000:00:1f.3/sound/card0"), "0000:00:1f.3");
  EXPECT_EQ(pci_address("/dev/video0"), std::nullopt);
  EXPECT_EQ(pci_address("/devices/pci0000:00"), std::nullopt) << "pci0000:00 is no address";
  EXPECT_EQ(pci_address("/devices/pci0000:00/0000:00:14.0/usb1/1-1"), std::nullopt)
      << "a USB device is not a PCI resource";
  EXPECT_EQ(pci_address("/devices/x/0000:00:01.g"), std::nullopt);
  EXPECT_EQ(pci_address("/devices/x/:00:01.0"), std::nullopt);
}

TEST(UdevReport, AkriResourceNameVectors) {
  EXPECT_EQ(resource_env_suffix("example.com/my-device"), "EXAMPLE_COM_MY-DEVICE");
  EXPECT_EQ(resource_env_suffix("akri.sh/udev-usb-keyboard"), "AKRI_SH_UDEV-USB-KEYBOARD");
  EXPECT_EQ(resource_env_suffix("vendor.io/device"), "VENDOR_IO_DEVICE");
}

TEST(UdevReport, PathBoundaries) {
  EXPECT_TRUE(is_same_or_below("/devices/usb1", "/devices/usb1"));
  EXPECT_TRUE(is_same_or_below("/devices/usb1/1-1", "/devices/usb1"));
  EXPECT_FALSE(is_same_or_below("/devices/usb10", "/devices/usb1"));
  EXPECT_FALSE(is_same_or_below("/devices", "/devices/usb1"));
}

TEST(UdevReport, UngroupedDevicesOnePerMemberWithPlainProperties) {
  ReportSettings settings;
  settings.permissions = "rw";
  auto devices = make_devices({{"/devices/b/video0", "/dev/video0"}, {"/devices/a/card0", {}}},
                              settings, no_iommu);
  ASSERT_EQ(ids(devices), (std::vector<std::string>{"/devices/a/card0", "/devices/b/video0"}));
  EXPECT_EQ(devices[0].properties, (dowser::Properties{{"UDEV_DEVPATH", "/devices/a/card0"}}));
  EXPECT_TRUE(devices[0].device_nodes.empty());
  EXPECT_EQ(devices[1].properties, (dowser::Properties{{"UDEV_DEVPATH", "/devices/b/video0"},
                                                       {"UDEV_DEVNODE", "/dev/video0"}}));
  EXPECT_EQ(devices[1].device_nodes,
            (std::vector<dowser::DeviceNode>{{"/dev/video0", "/dev/video0", "rw"}}));
  EXPECT_EQ(devices[1].sharing, dowser::Sharing::local);
}

TEST(UdevReport, AMemberReportedTwiceIsOneDevice) {
  std::vector<Member> members = {{"/devices/u/1-1", "/dev/bus/usb/001/002"},
                                 {"/devices/u/1-1", "/dev/bus/usb/001/002"}};
  EXPECT_EQ(make_devices(members, {}, no_iommu).size(), 1u);
}

// Akri's insert_device_with_relatives scenario, in any insertion order.
TEST(UdevReport, GroupsJoinTheirTopmostMatchedAncestor) {
  std::vector<Member> members = {{"/sys/device/parent/child1/child2", "/dev/dev2"},
                                 {"/sys/device/other", "/dev/other"},
                                 {"/sys/device/parent", std::nullopt},
                                 {"/sys/device/parent/child1", "/dev/dev1"}};
  auto devices = make_devices(members, grouped(), no_iommu);
  ASSERT_EQ(ids(devices), (std::vector<std::string>{"/sys/device/other", "/sys/device/parent"}));
  const auto& group = devices[1];
  EXPECT_EQ(group.properties, (dowser::Properties{{"UDEV_DEVPATH", "/sys/device/parent"},
                                                  {"UDEV_DEVNODE_0", "/dev/dev1"},
                                                  {"UDEV_DEVNODE_1", "/dev/dev2"}}));
  EXPECT_EQ(node_paths(group), (std::vector<std::string>{"/dev/dev1", "/dev/dev2"}));
  EXPECT_EQ(devices[0].properties.at("UDEV_DEVNODE_0"), "/dev/other") << "grouped: always indexed";
}

TEST(UdevReport, GroupingCutsOnlyAtPathBoundaries) {
  std::vector<Member> members = {{"/devices/usb1", "/dev/bus/usb/001/001"},
                                 {"/devices/usb10", "/dev/bus/usb/010/001"},
                                 {"/devices/usb1/1-1", "/dev/bus/usb/001/002"},
                                 {"/devices/usb1-x", "/dev/x"}};
  auto devices = make_devices(members, grouped(), no_iommu);
  EXPECT_EQ(ids(devices),
            (std::vector<std::string>{"/devices/usb1", "/devices/usb1-x", "/devices/usb10"}));
  EXPECT_EQ(node_paths(devices[0]),
            (std::vector<std::string>{"/dev/bus/usb/001/001", "/dev/bus/usb/001/002"}));
}

TEST(UdevReport, MemberOrderIsTheSameWhateverTheInputOrder) {
  std::vector<Member> members = {{"/d/card0/pcmC0D0p", "/dev/snd/pcmC0D0p"},
                                 {"/d/card0", std::nullopt},
                                 {"/d/card0/controlC0", "/dev/snd/controlC0"},
                                 {"/d/card0/pcmC0D0c", "/dev/snd/pcmC0D0c"}};
  auto first = make_devices(members, grouped(), no_iommu);
  std::reverse(members.begin(), members.end());
  EXPECT_EQ(make_devices(members, grouped(), no_iommu), first);
  EXPECT_EQ(first.at(0).properties.at("UDEV_DEVNODE_0"), "/dev/snd/controlC0");
  EXPECT_EQ(first.at(0).properties.at("UDEV_DEVNODE_2"), "/dev/snd/pcmC0D0p");
}

TEST(UdevReport, ResourcePropertiesNeedAResourceName) {
  std::vector<Member> members = {
      {"/devices/pci0000:00/0000:00:14.0/usb1/1-1", "/dev/bus/usb/001/002"},
      {"/devices/pci0000:00/0000:00:01.0/0000:01:00.0", std::nullopt}};
  auto plain = make_devices(members, {}, no_iommu);
  for (const auto& device : plain) {
    for (const auto& [key, value] : device.properties)
      EXPECT_EQ(key.find("_RESOURCE_"), std::string::npos) << key;
  }
  ReportSettings named;
  named.resource_name = "akri.sh/udev-cam";
  auto devices = make_devices(members, named, no_iommu);
  EXPECT_EQ(devices[0].properties.at("PCI_RESOURCE_AKRI_SH_UDEV-CAM"), "0000:01:00.0");
  EXPECT_EQ(devices[1].properties.at("USB_RESOURCE_AKRI_SH_UDEV-CAM"), "1:2");
  EXPECT_EQ(devices[1].properties.count("PCI_RESOURCE_AKRI_SH_UDEV-CAM"), 0u);
  named.group_recursive = true;
  EXPECT_EQ(
      make_devices(members, named, no_iommu)[1].properties.at("USB_RESOURCE_AKRI_SH_UDEV-CAM_0"),
      "1:2");
}

TEST(UdevReport, VfioPassthroughAddsTheGroupAndContainerNodes) {
  std::vector<Member> members = {{"/devices/pci0000:00/0000:00:01.0/0000:01:00.0", std::nullopt},
                                 {"/devices/other", std::nullopt}};
  std::map<std::string, std::string> groups = {{members[0].devpath, "12"}};
  auto lookup = [&](const std::string& devpath) -> std::optional<std::string> {
    auto it = groups.find(devpath);
    return it == groups.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  ReportSettings settings;
  settings.permissions = "r";
  EXPECT_TRUE(make_devices(members, settings, lookup)[1].device_nodes.empty()) << "off by default";
  settings.vfio_passthrough = true;
  auto devices = make_devices(members, settings, lookup);  // sorted: other, then the GPU
  EXPECT_EQ(devices[1].device_nodes,
            (std::vector<dowser::DeviceNode>{{"/dev/vfio/12", "/dev/vfio/12", "rwm"},
                                             {"/dev/vfio/vfio", "/dev/vfio/vfio", "rwm"}}));
  EXPECT_TRUE(devices[0].device_nodes.empty()) << "no IOMMU group, no vfio nodes";
}

}  // namespace
}  // namespace udev_handler
