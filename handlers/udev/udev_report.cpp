#include "udev_report.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <map>
#include <system_error>

namespace udev_handler {
namespace {

using Group = std::vector<Member>;  // the first member is the group's root

std::vector<std::string_view> segments(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    size_t slash = path.find('/');
    if (slash != 0) parts.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return parts;
}

bool is_hex(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(),
                                      [](unsigned char c) { return std::isxdigit(c) != 0; });
}

bool is_pci_address(std::string_view segment) {
  size_t first = segment.find(':');
  size_t second = segment.find(':', first == std::string_view::npos ? first : first + 1);
  size_t dot = segment.find('.', second == std::string_view::npos ? second : second + 1);
  if (dot == std::string_view::npos) return false;
  return is_hex(segment.substr(0, first)) &&
         is_hex(segment.substr(first + 1, second - first - 1)) &&
         is_hex(segment.substr(second + 1, dot - second - 1)) && is_hex(segment.substr(dot + 1));
}

std::optional<uint32_t> decimal(std::string_view text) {
  uint32_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Members by devpath, one each, in devpath order.
std::map<std::string, Member> unique_members(const std::vector<Member>& members) {
  std::map<std::string, Member> unique;
  for (const auto& member : members) unique.emplace(member.devpath, member);
  return unique;
}

// The topmost member at or above devpath, cutting only at '/' boundaries.
const std::string& group_root(const std::map<std::string, Member>& members,
                              const std::string& devpath) {
  for (size_t slash = devpath.find('/', 1); slash != std::string::npos;
       slash = devpath.find('/', slash + 1)) {
    auto ancestor = members.find(devpath.substr(0, slash));
    if (ancestor != members.end()) return ancestor->first;
  }
  return devpath;
}

std::vector<Group> make_groups(const std::vector<Member>& members, bool recursive) {
  auto unique = unique_members(members);
  std::map<std::string, Group> groups;
  for (const auto& [devpath, member] : unique)
    groups[recursive ? group_root(unique, devpath) : devpath].push_back(member);
  std::vector<Group> result;
  result.reserve(groups.size());
  for (auto& entry : groups) result.push_back(std::move(entry.second));
  return result;
}

// Adds what one member with a device node contributes; suffix is "" or "_<i>".
void add_devnode(dowser::Device& device, const std::string& devnode, const std::string& suffix,
                 const ReportSettings& settings) {
  device.properties[kDevnodeProperty + suffix] = devnode;
  device.device_nodes.push_back({devnode, devnode, settings.permissions});
  auto usb = usb_address(devnode);
  if (usb && settings.resource_name)
    device.properties[kUsbResourcePrefix + resource_env_suffix(*settings.resource_name) + suffix] =
        *usb;
}

void add_vfio(dowser::Device& device, const IommuGroupLookup& iommu_group) {
  auto group = iommu_group(device.id);
  if (!group) return;
  device.device_nodes.push_back({"/dev/vfio/" + *group, "/dev/vfio/" + *group, "rwm"});
  device.device_nodes.push_back({"/dev/vfio/vfio", "/dev/vfio/vfio", "rwm"});
}

dowser::Device make_device(const Group& group, const ReportSettings& settings,
                           const IommuGroupLookup& iommu_group) {
  dowser::Device device;
  device.id = group.front().devpath;
  device.sharing = dowser::Sharing::local;
  device.properties[kDevpathProperty] = device.id;
  size_t index = 0;
  for (const auto& member : group) {
    if (!member.devnode) continue;
    std::string suffix = settings.group_recursive ? "_" + std::to_string(index++) : "";
    add_devnode(device, *member.devnode, suffix, settings);
  }
  auto pci = pci_address(device.id);
  if (pci && settings.resource_name)
    device.properties[kPciResourcePrefix + resource_env_suffix(*settings.resource_name)] = *pci;
  if (settings.vfio_passthrough) add_vfio(device, iommu_group);
  return device;
}

}  // namespace

std::vector<dowser::Device> make_devices(const std::vector<Member>& members,
                                         const ReportSettings& settings,
                                         const IommuGroupLookup& iommu_group) {
  std::vector<dowser::Device> devices;
  for (const auto& group : make_groups(members, settings.group_recursive))
    devices.push_back(make_device(group, settings, iommu_group));
  return devices;  // groups come out of a map: already sorted by id
}

bool is_same_or_below(std::string_view path, std::string_view ancestor) {
  if (path.substr(0, ancestor.size()) != ancestor) return false;
  return path.size() == ancestor.size() || path[ancestor.size()] == '/';
}

std::optional<std::string> usb_address(std::string_view devnode) {
  constexpr std::string_view kPrefix = "/dev/bus/usb/";
  if (devnode.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  std::string_view rest = devnode.substr(kPrefix.size());
  size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  auto bus = decimal(rest.substr(0, slash));
  auto device = decimal(rest.substr(slash + 1));
  if (!bus || !device) return std::nullopt;
  return std::to_string(*bus) + ":" + std::to_string(*device);
}

std::optional<std::string> pci_address(std::string_view devpath) {
  std::optional<std::string> last;
  for (std::string_view segment : segments(devpath)) {
    if (segment.substr(0, 3) == "usb") return std::nullopt;
    if (is_pci_address(segment)) last = std::string(segment);
  }
  return last;
}

std::string resource_env_suffix(std::string_view resource_name) {
  std::string suffix;
  suffix.reserve(resource_name.size());
  for (char c : resource_name) {
    suffix +=
        c == '.' || c == '/' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return suffix;
}

}  // namespace udev_handler
