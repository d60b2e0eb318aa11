// Turns matched devices into the devices a session reports: grouping,
// properties, device nodes and vfio passthrough. Pure: no libudev here.
#ifndef DOWSER_HANDLERS_UDEV_REPORT_HPP
#define DOWSER_HANDLERS_UDEV_REPORT_HPP

#include <dowser/handler.hpp>

#include "udev_details.hpp"

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace udev_handler {

inline constexpr const char* kDevpathProperty = "UDEV_DEVPATH";
inline constexpr const char* kDevnodeProperty = "UDEV_DEVNODE";
inline constexpr const char* kUsbResourcePrefix = "USB_RESOURCE_";
inline constexpr const char* kPciResourcePrefix = "PCI_RESOURCE_";

// A device to report: the matched device, or its nearest ancestor with a
// device node. devpath is the sysfs path without "/sys".
struct Member {
  std::string devpath;
  std::optional<std::string> devnode;
  friend bool operator==(const Member&, const Member&) = default;
};

// The IOMMU group of the device at devpath (e.g. "12"), if it has one.
using IommuGroupLookup = std::function<std::optional<std::string>(const std::string& devpath)>;

// The devices to report, sorted by id. Members with the same devpath count
// once. With group_recursive, a member below another one (at a '/' boundary)
// joins the group of its topmost matched ancestor; group members are ordered
// by devpath, so UDEV_DEVNODE_<i> is stable.
std::vector<dowser::Device> make_devices(const std::vector<Member>& members,
                                         const ReportSettings& settings,
                                         const IommuGroupLookup& iommu_group);

// True when path is ancestor itself or lies below it ("/a/b" is below "/a",
// "/ab" is not).
bool is_same_or_below(std::string_view path, std::string_view ancestor);

// "/dev/bus/usb/001/010" -> "1:10"; anything else -> nullopt.
std::optional<std::string> usb_address(std::string_view devnode);

// The last PCI address segment (dddd:bb:dd.f, all hex) of a devpath that has
// no usb* segment; "/devices/pci0000:00/0000:00:01.0/0000:01:00.0" -> "0000:01:00.0".
std::optional<std::string> pci_address(std::string_view devpath);

// The environment-variable form of a resource name: '.' and '/' become '_',
// letters are upper-cased ("akri.sh/udev-cam" -> "AKRI_SH_UDEV-CAM").
std::string resource_env_suffix(std::string_view resource_name);

}  // namespace udev_handler

#endif  // DOWSER_HANDLERS_UDEV_REPORT_HPP
