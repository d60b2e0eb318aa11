#include "device_rules.hpp"

#include <dowser/handler.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace dowser::host {
namespace {

using std::to_string;

// ---- text --------------------------------------------------------------------

unsigned char byte_at(std::string_view text, size_t at) {
  return static_cast<unsigned char>(text[at]);
}

bool is_nul(unsigned char c) { return c == 0; }
bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

std::string hex_byte(unsigned char c) {
  char text[8];
  std::snprintf(text, sizeof text, "%02x", c);
  return text;
}

// Text as a problem quotes it: in double quotes, cut after kQuotedBytes
// (then "..." follows), control characters, quotes, backslashes and bytes
// that are not UTF-8 written as \xNN. Reads no further than the cut.
std::string quoted(std::string_view text) {
  std::string result = "\"";
  size_t at = 0;
  while (at < text.size()) {
    const unsigned char c = byte_at(text, at);
    const size_t length = std::max<size_t>(utf8_length_at(text, at), 1);
    if (at + length > kQuotedBytes) break;
    if (length == 1 && (c >= 0x80 || is_control(c) || c == '"' || c == '\\'))
      result += "\\x" + hex_byte(c);
    else
      result.append(text.substr(at, length));
    at += length;
  }
  result += '"';
  if (at < text.size()) result += "...";
  return result;
}

// Where text is not UTF-8, or holds a byte `banned` refuses: "is not valid
// UTF-8 (byte 4)", "contains a NUL byte (byte 2)". Bytes count from 0.
std::optional<std::string> encoding_problem(std::string_view text, bool (*banned)(unsigned char)) {
  for (size_t at = 0; at < text.size();) {
    const size_t length = utf8_length_at(text, at);
    const unsigned char c = byte_at(text, at);
    if (length == 0) return "is not valid UTF-8 (byte " + to_string(at) + ")";
    if (length == 1 && banned(c)) {
      const std::string what = c == 0 ? "a NUL byte" : "control character 0x" + hex_byte(c);
      return "contains " + what + " (byte " + to_string(at) + ")";
    }
    at += length;
  }
  return std::nullopt;
}

std::string too_long(std::string_view name, size_t length, size_t limit) {
  return std::string(name) + " is " + to_string(length) + " bytes, more than the " +
         to_string(limit) + " allowed";
}

// A string a handler passed may be read: its data is not NULL unless it is
// empty (rule O4).
bool readable(dowser_str text) { return text.data != nullptr || text.len == 0; }

std::string_view view_of(dowser_str text) {
  return text.len == 0 ? std::string_view() : std::string_view(text.data, text.len);
}

// What is wrong with a string of a device, named `name`: unreadable, longer
// than limit, or not UTF-8 without the bytes `banned` refuses.
std::optional<std::string> string_problem(std::string_view name, dowser_str text, size_t limit,
                                          bool (*banned)(unsigned char)) {
  if (auto problem = unreadable_problem(name, text)) return problem;
  if (text.len > limit) return too_long(name, text.len, limit);
  if (auto problem = encoding_problem(view_of(text), banned))
    return std::string(name) + " " + *problem;
  return std::nullopt;
}

// ---- names -------------------------------------------------------------------

constexpr std::string_view kAllPermissions = "rwm";

// A non-empty subset of kAllPermissions, each letter at most once.
bool is_permission_set(std::string_view permissions) {
  if (permissions.empty() || permissions.size() > kAllPermissions.size()) return false;
  for (size_t i = 0; i < permissions.size(); ++i) {
    if (kAllPermissions.find(permissions[i]) == std::string_view::npos) return false;
    if (permissions.find(permissions[i], i + 1) != std::string_view::npos) return false;
  }
  return true;
}

// ---- records -----------------------------------------------------------------

uint32_t struct_size_of(const void* record) {
  uint32_t size = 0;
  std::memcpy(&size, record, sizeof size);
  return size;
}

// Whether an array can be walked with this stride, its first record's
// struct_size (rule V3): no smaller than the 1.0 record, no larger than any.
bool walkable_stride(uint32_t stride, uint32_t minimum) {
  return stride >= minimum && stride <= DOWSER_MAX_RECORD_SIZE;
}

// What is wrong with a record's struct_size (rule V3): `kind` names the
// record ("device"), minimum is what its 1.0 members need.
std::optional<std::string> struct_size_problem(uint32_t size, uint32_t stride, uint32_t minimum,
                                               std::string_view kind) {
  if (size < minimum) {
    return "struct_size " + to_string(size) + " is smaller than the 1.0 " + std::string(kind) +
           " record (" + to_string(minimum) + " bytes): rule V3";
  }
  if (size > DOWSER_MAX_RECORD_SIZE) {
    return "struct_size " + to_string(size) + " is larger than any " + std::string(kind) +
           " record of ABI 1.x (at most " + to_string(DOWSER_MAX_RECORD_SIZE) + " bytes): rule V3";
  }
  if (size != stride) {
    return "struct_size " + to_string(size) + " differs from the " + to_string(stride) +
           " of the first in its array: rule V3";
  }
  return std::nullopt;
}

// One device's problems as they are found, each prefixed with the device's
// name, and the bytes of its strings (each counted up to its own limit).
class DeviceProblems {
 public:
  explicit DeviceProblems(std::string device) : device_(std::move(device)) {}

  void add(const std::string& problem) { problems_.push_back(device_ + ": " + problem); }
  void add_if(const std::optional<std::string>& problem) {
    if (problem) add(*problem);
  }
  // A string of the device, for rule D5.
  void count(dowser_str text, size_t limit) { string_bytes_ += std::min(text.len, limit); }
  size_t string_bytes() const { return string_bytes_; }
  InvalidDevice take() && { return {std::move(device_), std::move(problems_)}; }

 private:
  std::string device_;
  std::vector<std::string> problems_;
  size_t string_bytes_ = 0;
};

// How an array of a device's records is named and checked.
struct ArrayKind {
  std::string_view element;  // "property"
  std::string_view array;    // "properties"
  uint32_t minimum;          // what a 1.0 element needs (rule V3)
};

// Calls check(element, number from 1) for each element of the array whose
// struct_size is sound. Reads nothing of an array that is NULL with a
// length or longer than the limit, and nothing after a first element too
// small to be the stride.
template <typename Record, typename Check>
void for_each_sound_record(DeviceProblems& problems, const Record* records, size_t count,
                           const ArrayKind& kind, Check&& check) {
  const std::string array(kind.array);
  if (count == 0) return;
  if (records == nullptr)
    return problems.add(array + ": NULL but " + array + "_len is " + to_string(count));
  if (count > DOWSER_MAX_DEVICE_ENTRIES) {
    return problems.add(to_string(count) + " " + array + ", more than the " +
                        to_string(DOWSER_MAX_DEVICE_ENTRIES) + " allowed");
  }
  const uint32_t stride = struct_size_of(records);
  const auto* bytes = reinterpret_cast<const unsigned char*>(records);
  for (size_t i = 0; i < count; ++i) {
    const unsigned char* element = bytes + i * stride;
    auto problem = struct_size_problem(struct_size_of(element), stride, kind.minimum, kind.element);
    if (!problem) {
      check(abi::read_record<Record>(element), i + 1);
      continue;
    }
    problems.add(std::string(kind.element) + " " + to_string(i + 1) + ": " + *problem);
    if (!walkable_stride(stride, kind.minimum)) return;
  }
}

// ---- fields ------------------------------------------------------------------

std::string property_name(const dowser_property& property, size_t number) {
  if (property.key.len == 0 || !readable(property.key)) return "property " + to_string(number);
  return "property " + quoted(view_of(property.key));
}

std::optional<std::string> key_problem(dowser_str key) {
  if (auto problem = unreadable_problem("key", key)) return problem;
  if (key.len == 0) return "key is empty";
  if (key.len > DOWSER_MAX_PROPERTY_KEY_LEN)
    return too_long("key", key.len, DOWSER_MAX_PROPERTY_KEY_LEN);
  if (!is_environment_variable_name(view_of(key))) return "not a valid environment variable name";
  return std::nullopt;
}

// keys: how often each key came so far, to say once that one came twice.
void check_property(DeviceProblems& problems, const dowser_property& property, size_t number,
                    std::map<std::string, size_t, std::less<>>& keys) {
  const std::string name = property_name(property, number);
  problems.count(property.key, DOWSER_MAX_PROPERTY_KEY_LEN);
  if (auto problem = key_problem(property.key))
    problems.add(name + ": " + *problem);
  else if (++keys[std::string(view_of(property.key))] == 2)
    problems.add(name + ": given more than once");
  if (property.has_value == 0) return;
  problems.count(property.value, DOWSER_MAX_PROPERTY_VALUE_LEN);
  if (auto problem = string_problem("value", property.value, DOWSER_MAX_PROPERTY_VALUE_LEN, is_nul))
    problems.add(name + ": " + *problem);
}

// A path of a mount or device node (rule D3); an empty one is fine only
// where may_be_empty.
void check_path(DeviceProblems& problems, const std::string& owner, std::string_view name,
                dowser_str path, bool may_be_empty = false) {
  problems.count(path, DOWSER_MAX_PATH_LEN);
  if (may_be_empty && path.len == 0) return;
  if (auto problem = string_problem(name, path, DOWSER_MAX_PATH_LEN, is_nul))
    return problems.add(owner + ": " + *problem);
  const std::string_view text = view_of(path);
  if (text.empty() || text.front() != '/')
    problems.add(owner + ": " + std::string(name) + " " + quoted(text) + " is not absolute");
}

void check_mount(DeviceProblems& problems, const dowser_mount& mount, size_t number) {
  const std::string owner = "mount " + to_string(number);
  check_path(problems, owner, "container path", mount.container_path);
  check_path(problems, owner, "host path", mount.host_path);
}

void check_device_node(DeviceProblems& problems, const dowser_device_node& node, size_t number) {
  const std::string owner = "device node " + to_string(number);
  check_path(problems, owner, "container path", node.container_path);
  check_path(problems, owner, "host path", node.host_path, /*may_be_empty=*/true);
  problems.count(node.permissions, kAllPermissions.size());
  if (auto problem = unreadable_problem("permissions", node.permissions)) {
    problems.add(owner + ": " + *problem);
  } else if (!is_permission_set(view_of(node.permissions))) {
    problems.add(owner + ": permissions " + quoted(view_of(node.permissions)) +
                 " must be a non-empty subset of " + quoted(kAllPermissions));
  }
}

std::optional<std::string> sharing_problem(int32_t sharing) {
  if (sharing == DOWSER_SHARING_HANDLER_DEFAULT || sharing == DOWSER_SHARING_LOCAL ||
      sharing == DOWSER_SHARING_SHARED)
    return std::nullopt;
  return "sharing " + to_string(sharing) + " is not 0 (handler default), 1 (local) or 2 (shared)";
}

std::string device_name(const dowser_device& device, size_t position) {
  if (device.id.len == 0 || !readable(device.id)) return "device " + to_string(position);
  return "device " + quoted(view_of(device.id));
}

void check_id(DeviceProblems& problems, dowser_str id) {
  problems.count(id, DOWSER_MAX_DEVICE_ID_LEN);
  if (id.len == 0)
    problems.add("id is empty");
  else
    problems.add_if(string_problem("id", id, DOWSER_MAX_DEVICE_ID_LEN, is_control));
}

void check_records(DeviceProblems& problems, const dowser_device& device) {
  std::map<std::string, size_t, std::less<>> keys;
  for_each_sound_record(problems, device.properties, device.properties_len,
                        {"property", "properties", kPropertyRecord_1_0},
                        [&](const dowser_property& property, size_t number) {
                          check_property(problems, property, number, keys);
                        });
  for_each_sound_record(
      problems, device.mounts, device.mounts_len, {"mount", "mounts", kMountRecord_1_0},
      [&](const dowser_mount& mount, size_t number) { check_mount(problems, mount, number); });
  for_each_sound_record(problems, device.device_nodes, device.device_nodes_len,
                        {"device node", "device_nodes", kDeviceNodeRecord_1_0},
                        [&](const dowser_device_node& node, size_t number) {
                          check_device_node(problems, node, number);
                        });
}

void check_contents(DeviceProblems& problems, const dowser_device& device) {
  check_id(problems, device.id);
  problems.add_if(sharing_problem(device.sharing));
  check_records(problems, device);
  if (problems.string_bytes() > DOWSER_MAX_DEVICE_LEN) {
    problems.add("its strings are " + to_string(problems.string_bytes()) +
                 " bytes in all, more than the " + to_string(DOWSER_MAX_DEVICE_LEN) + " allowed");
  }
}

InvalidDevice check_device(const dowser_device* record, size_t position,
                           uint32_t array_struct_size) {
  const uint32_t size = struct_size_of(record);
  if (auto problem = struct_size_problem(size, array_struct_size, kDeviceRecord_1_0, "device")) {
    DeviceProblems problems("device " + to_string(position));
    problems.add(*problem);
    return std::move(problems).take();
  }
  const auto device = abi::read_record<dowser_device>(record);
  DeviceProblems problems(device_name(device, position));
  check_contents(problems, device);
  return std::move(problems).take();
}

}  // namespace

bool is_environment_variable_name(std::string_view name) {
  auto is_letter = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); };
  auto may_start = [&](char c) { return is_letter(c) || c == '_' || c == '-' || c == '.'; };
  auto may_follow = [&](char c) { return may_start(c) || (c >= '0' && c <= '9'); };
  return !name.empty() && may_start(name.front()) &&
         std::all_of(name.begin() + 1, name.end(), may_follow);
}

std::vector<std::string> device_problems(const dowser_device* record, size_t position,
                                         uint32_t array_struct_size) {
  return check_device(record, position, array_struct_size).problems;
}

CheckedReport check_report(const dowser_device* devices, size_t count) {
  CheckedReport report;
  if (count == 0) return report;
  if (devices == nullptr)
    throw std::invalid_argument("the device array is NULL but its length is " + to_string(count));
  if (count > DOWSER_MAX_SNAPSHOT_DEVICES) {
    // Without the count: the same refusal of snapshots of changing sizes is
    // one repeated reason, said once.
    throw std::invalid_argument("more devices in one snapshot than the " +
                                to_string(DOWSER_MAX_SNAPSHOT_DEVICES) +
                                " allowed (rule D7): narrow the discovery details");
  }
  const uint32_t stride = struct_size_of(devices);
  if (!walkable_stride(stride, kDeviceRecord_1_0)) {
    throw std::invalid_argument(check_device(devices, 1, stride).problems.front() +
                                "; it is the array's stride, so no device of it can be read");
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(devices);
  for (size_t i = 0; i < count; ++i) {
    const auto* record = reinterpret_cast<const dowser_device*>(bytes + i * stride);
    auto checked = check_device(record, i + 1, stride);
    if (checked.problems.empty())
      report.devices.push_back(abi::read_device(abi::read_record<dowser_device>(record)));
    else
      report.invalid.push_back(std::move(checked));
  }
  return report;
}

std::string joined_problems(const InvalidDevice& device) {
  std::string text;
  for (const auto& problem : device.problems) text += (text.empty() ? "" : "; ") + problem;
  return text;
}

std::optional<std::string> unreadable_problem(std::string_view name, dowser_str text) {
  if (readable(text)) return std::nullopt;
  return std::string(name) + ": data is NULL but len is " + to_string(text.len) + ": rule O4";
}

}  // namespace dowser::host
