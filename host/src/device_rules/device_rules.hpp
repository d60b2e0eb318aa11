// DeviceRules: what a device a handler reports must be for dowserd to make
// an Instance of it and hand it to the kubelet: rules V3, O4 and D1-D6 of
// sdk/include/dowser/handler.h, with the limits defined there.
//
// The one place these rules are checked: the host's report_devices (in
// handler_registry, which dowserd, FakeHost and dowser-handler-check all
// use) reads every report through check_report, so a device is judged, and
// its problems worded, the same everywhere.
#pragma once

#include <dowser/handler.h>
#include <dowser/handler.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dowser::host {

// The bytes the 1.0 members of each record need: a smaller struct_size is
// refused (rule V3). Fixed at 1.0: later minors append members, and a record
// of theirs is larger, which is accepted.
inline constexpr uint32_t kDeviceRecord_1_0 = offsetof(dowser_device, sharing) + sizeof(int32_t);
inline constexpr uint32_t kPropertyRecord_1_0 =
    offsetof(dowser_property, has_value) + sizeof(dowser_bool);
inline constexpr uint32_t kMountRecord_1_0 =
    offsetof(dowser_mount, read_only) + sizeof(dowser_bool);
inline constexpr uint32_t kDeviceNodeRecord_1_0 =
    offsetof(dowser_device_node, permissions) + sizeof(dowser_str);

// How many bytes of an id, key or path a problem quotes before "...".
inline constexpr size_t kQuotedBytes = 64;

// Everything wrong with one reported device record; empty when it is valid.
// Each problem names the device (`device "cam-1"`, its id quoted and cut
// after kQuotedBytes, or `device 3`, its position in the report from 1, when
// the id cannot be shown) and the field:
//   device "cam-1": property "A=B": not a valid environment variable name
//   device 3: struct_size 4 is smaller than the 1.0 device record (76 bytes): rule V3
// record is read by its struct_size (rule V3), never further; so are the
// arrays and strings it points to, and only once their lengths are within
// the limits. array_struct_size is the stride of the array it is in: the
// first element's struct_size.
std::vector<std::string> device_problems(const dowser_device* record, size_t position,
                                         uint32_t array_struct_size);

// A reported device left out of its snapshot, and why.
struct InvalidDevice {
  std::string device;                 // as its problems name it: `device "cam-1"`, `device 3`
  std::vector<std::string> problems;  // from device_problems, in order
  friend bool operator==(const InvalidDevice& a, const InvalidDevice& b) {
    return a.device == b.device && a.problems == b.problems;
  }
};

// A report split into the devices that keep to the rules (copied, rule O2)
// and those that do not.
struct CheckedReport {
  std::vector<Device> devices;
  std::vector<InvalidDevice> invalid;
};

// Checks and copies what report_devices received. Throws
// std::invalid_argument when the array itself cannot be read: NULL with a
// length, or a first struct_size too small or too large to be its stride
// (rule V3); or when it holds more devices than a snapshot may (rule D7).
// Duplicate ids are the caller's to find, among the devices kept.
CheckedReport check_report(const dowser_device* devices, size_t count);

// Whether name is a container environment variable name as Kubernetes
// defines one: [-._a-zA-Z][-._a-zA-Z0-9]* (rule D2; brokerProperties too).
bool is_environment_variable_name(std::string_view name);

// A device's problems on one line: "; " between them.
std::string joined_problems(const InvalidDevice& device);

// The problem of a string a handler passed, named `name`, if it cannot be
// read: its data is NULL but its len is not 0 (rule O4).
std::optional<std::string> unreadable_problem(std::string_view name, dowser_str text);

}  // namespace dowser::host
