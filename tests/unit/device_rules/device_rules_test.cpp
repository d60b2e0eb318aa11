// The device rules of handler.h (V3, O4, D1-D6), on raw records built here
// and broken on purpose, one rule at a time, at and past each limit.
#include "device_rules.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

using dowser::host::check_report;
using dowser::host::device_problems;
using Problems = std::vector<std::string>;

// One device record and the records and strings it points to, owned here.
class RawDevice {
 public:
  explicit RawDevice(std::string_view id = "cam-1") {
    record_.struct_size = sizeof record_;
    record_.id = keep(id);
  }
  RawDevice(const RawDevice&) = delete;  // its views point into its own strings
  RawDevice& operator=(const RawDevice&) = delete;

  RawDevice& property(std::string_view key, std::optional<std::string_view> value = "v") {
    dowser_property property{};
    property.struct_size = sizeof property;
    property.key = keep(key);
    if (value) property.value = keep(*value);
    property.has_value = value ? 1 : 0;
    properties.push_back(property);
    return *this;
  }
  RawDevice& mount(std::string_view container_path, std::string_view host_path) {
    mounts.push_back({sizeof(dowser_mount), keep(container_path), keep(host_path), 0});
    return *this;
  }
  RawDevice& node(std::string_view container_path, std::string_view host_path,
                  std::string_view permissions) {
    nodes.push_back(
        {sizeof(dowser_device_node), keep(container_path), keep(host_path), keep(permissions)});
    return *this;
  }

  // The record, pointing at the arrays as they are now.
  dowser_device& record() {
    record_.properties = properties.empty() ? nullptr : properties.data();
    record_.properties_len = properties.size();
    record_.mounts = mounts.empty() ? nullptr : mounts.data();
    record_.mounts_len = mounts.size();
    record_.device_nodes = nodes.empty() ? nullptr : nodes.data();
    record_.device_nodes_len = nodes.size();
    return record_;
  }

  Problems problems() {
    const dowser_device& raw = record();
    return device_problems(&raw, 1, raw.struct_size);
  }

  std::vector<dowser_property> properties;
  std::vector<dowser_mount> mounts;
  std::vector<dowser_device_node> nodes;

 private:
  dowser_str keep(std::string_view text) {
    return dowser::abi::view(strings_.emplace_back(text));  // a deque: views stay valid
  }

  dowser_device record_{};
  std::deque<std::string> strings_;
};

template <typename Device>  // a RawDevice, a temporary one too
Problems problems_of(Device&& device) {
  return device.problems();
}

// ---- a valid device -------------------------------------------------------------

TEST(DeviceRules, ADeviceWithEveryKindOfFieldDoneRightHasNoProblem) {
  RawDevice device("usb/1-1:1.0 \xc3\xa9\xf0\x9f\x93\xb7");  // UTF-8 beyond ASCII is fine
  device.property("UDEV_DEVNODE", "/dev/video0")
      .property("a.b-c_D9", "line 1\nline 2\ttab \xe2\x82\xac")
      .property("_NO_VALUE", std::nullopt)
      .property("EMPTY", "")
      .mount("/data", "/var/lib/data")
      .node("/dev/video0", "", "rw")
      .node("/dev/video1", "/dev/video1", "mrw")
      .node("/dev/video2", "/dev/video2", "r");
  device.record().sharing = DOWSER_SHARING_SHARED;
  EXPECT_EQ(device.problems(), Problems{});
}

TEST(DeviceRules, The1Point0RecordSizesAreWhereTheirLastMembersEnd) {
#if defined(__LP64__)
  EXPECT_EQ(dowser::host::kDeviceRecord_1_0, 76u);
  EXPECT_EQ(dowser::host::kPropertyRecord_1_0, 44u);
  EXPECT_EQ(dowser::host::kMountRecord_1_0, 44u);
  EXPECT_EQ(dowser::host::kDeviceNodeRecord_1_0, 56u);
#endif
  static_assert(dowser::host::kDeviceRecord_1_0 <= sizeof(dowser_device));
}

// ---- ids (D1) --------------------------------------------------------------------

TEST(DeviceRules, AnIdIsOneTo1024BytesOfUtf8WithoutControlCharacters) {
  EXPECT_EQ(problems_of(RawDevice("")), Problems{"device 1: id is empty"});
  EXPECT_EQ(problems_of(RawDevice(std::string(DOWSER_MAX_DEVICE_ID_LEN, 'a'))), Problems{});
  EXPECT_EQ(problems_of(RawDevice(std::string(DOWSER_MAX_DEVICE_ID_LEN + 1, 'a'))),
            Problems{"device \"" + std::string(64, 'a') +
                     "\"...: id is 1025 bytes, more than the 1024 allowed"});
  EXPECT_EQ(problems_of(RawDevice("ab\xff")),
            Problems{"device \"ab\\xff\": id is not valid UTF-8 (byte 2)"});
  EXPECT_EQ(problems_of(RawDevice("cam\n1")),
            Problems{"device \"cam\\x0a1\": id contains control character 0x0a (byte 3)"});
  EXPECT_EQ(problems_of(RawDevice(std::string("a\0b", 3))),
            Problems{"device \"a\\x00b\": id contains a NUL byte (byte 1)"});
}

TEST(DeviceRules, AnIdWithoutDataIsNamedByItsPosition) {
  RawDevice device;
  device.record().id = {nullptr, 3};
  EXPECT_EQ(device.problems(), Problems{"device 1: id: data is NULL but len is 3: rule O4"});
}

// ---- properties (D2) -------------------------------------------------------------

TEST(DeviceRules, APropertyKeyIsAnEnvironmentVariableName) {
  EXPECT_EQ(problems_of(RawDevice().property("A=B")),
            Problems{"device \"cam-1\": property \"A=B\": not a valid environment variable name"});
  EXPECT_EQ(
      problems_of(RawDevice().property("9LIVES")),
      Problems{"device \"cam-1\": property \"9LIVES\": not a valid environment variable name"});
  EXPECT_EQ(
      problems_of(RawDevice().property("CAF\xc3\x89")),
      Problems{
          "device \"cam-1\": property \"CAF\xc3\x89\": not a valid environment variable name"});
  EXPECT_EQ(problems_of(RawDevice().property("", "X2")),
            Problems{"device \"cam-1\": property 1: key is empty"});
  EXPECT_EQ(problems_of(RawDevice().property(std::string(DOWSER_MAX_PROPERTY_KEY_LEN, 'K'))),
            Problems{});
  EXPECT_EQ(problems_of(RawDevice().property(std::string(DOWSER_MAX_PROPERTY_KEY_LEN + 1, 'K'))),
            Problems{"device \"cam-1\": property \"" + std::string(64, 'K') +
                     "\"...: key is 257 bytes, more than the 256 allowed"});
}

TEST(DeviceRules, EnvironmentVariableNamesAreKubernetesOnes) {
  for (std::string_view name : {"A", "_", "-x", ".x", "a.b-c_D9", "UDEV_DEVNODE_0"})
    EXPECT_TRUE(dowser::host::is_environment_variable_name(name)) << name;
  for (std::string_view name : {"", "9", "0A", "A=B", "A B", "A:B", "CAF\xc3\x89"})
    EXPECT_FALSE(dowser::host::is_environment_variable_name(name)) << name;
}

TEST(DeviceRules, AKeyGivenTwiceIsSaidOnce) {
  EXPECT_EQ(problems_of(RawDevice().property("K", "1").property("K", "2").property("K", "3")),
            Problems{"device \"cam-1\": property \"K\": given more than once"});
}

TEST(DeviceRules, AValueIsUtf8WithoutNulBytes) {
  EXPECT_EQ(problems_of(RawDevice().property("X", "abcd\xff")),
            Problems{"device \"cam-1\": property \"X\": value is not valid UTF-8 (byte 4)"});
  EXPECT_EQ(problems_of(RawDevice().property("X", std::string_view("a\0b", 3))),
            Problems{"device \"cam-1\": property \"X\": value contains a NUL byte (byte 1)"});
  // What JSON writers and protobuf refuse: overlong forms, surrogates, code
  // points past U+10FFFF, a character cut short.
  for (std::string_view bad : {"\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                               "\xf8\x88\x80\x80\x80", "ok\xe2\x82", "\x80"}) {
    auto problems = problems_of(RawDevice().property("X", bad));
    ASSERT_EQ(problems.size(), 1u) << bad;
    EXPECT_NE(problems[0].find("value is not valid UTF-8 (byte "), std::string::npos)
        << problems[0];
  }
  EXPECT_EQ(problems_of(RawDevice().property("X", "\xf4\x8f\xbf\xbf \xed\x9f\xbf")), Problems{})
      << "U+10FFFF and U+D7FF are fine";
}

TEST(DeviceRules, AValueIsAtMost64KiB) {
  const std::string at_limit(DOWSER_MAX_PROPERTY_VALUE_LEN, 'v');
  EXPECT_EQ(problems_of(RawDevice().property("X", at_limit)), Problems{});
  EXPECT_EQ(problems_of(RawDevice().property("X", at_limit + "v")),
            Problems{"device \"cam-1\": property \"X\": value is 65537 bytes, more than the "
                     "65536 allowed"});
  // It counts up to its own limit towards the device's total: one problem.
  const std::string eight_mib(8 << 20, 'v');
  EXPECT_EQ(problems_of(RawDevice().property("X", eight_mib)),
            Problems{"device \"cam-1\": property \"X\": value is 8388608 bytes, more than the "
                     "65536 allowed"});
}

TEST(DeviceRules, AValueIsOnlyReadWhenThePropertyHasOne) {
  RawDevice device;
  device.property("X", std::nullopt);
  device.properties[0].value = {nullptr, 99};  // not meaningful without has_value
  EXPECT_EQ(device.problems(), Problems{});
  device.properties[0].has_value = 1;
  EXPECT_EQ(
      device.problems(),
      Problems{"device \"cam-1\": property \"X\": value: data is NULL but len is 99: rule O4"});
}

// ---- mounts and device nodes (D3) ---------------------------------------------------

TEST(DeviceRules, MountPathsAreAbsolute) {
  EXPECT_EQ(problems_of(RawDevice().mount("/a", "/b").mount("data", "../etc")),
            (Problems{"device \"cam-1\": mount 2: container path \"data\" is not absolute",
                      "device \"cam-1\": mount 2: host path \"../etc\" is not absolute"}));
  EXPECT_EQ(problems_of(RawDevice().mount("", "/b")),
            Problems{"device \"cam-1\": mount 1: container path \"\" is not absolute"});
}

TEST(DeviceRules, PathsAreAtMost4096BytesOfUtf8WithoutNulBytes) {
  const std::string at_limit = "/" + std::string(DOWSER_MAX_PATH_LEN - 1, 'p');
  EXPECT_EQ(problems_of(RawDevice().mount(at_limit, "/b")), Problems{});
  EXPECT_EQ(problems_of(RawDevice().mount(at_limit + "p", "/b")),
            Problems{"device \"cam-1\": mount 1: container path is 4097 bytes, more than the "
                     "4096 allowed"});
  EXPECT_EQ(
      problems_of(RawDevice().node(std::string_view("/dev/a\0", 7), "", "rw")),
      Problems{"device \"cam-1\": device node 1: container path contains a NUL byte (byte 6)"});
  EXPECT_EQ(problems_of(RawDevice().mount("/a", "/\xff")),
            Problems{"device \"cam-1\": mount 1: host path is not valid UTF-8 (byte 1)"});
}

TEST(DeviceRules, ADeviceNodeNeedsAnAbsoluteContainerPathAndMayLeaveItsHostPathEmpty) {
  EXPECT_EQ(problems_of(RawDevice().node("/dev/video0", "", "rw")), Problems{});
  EXPECT_EQ(
      problems_of(RawDevice().node("video0", "dev/video0", "rw")),
      (Problems{"device \"cam-1\": device node 1: container path \"video0\" is not absolute",
                "device \"cam-1\": device node 1: host path \"dev/video0\" is not absolute"}));
}

TEST(DeviceRules, PermissionsAreANonEmptySubsetOfRwm) {
  for (std::string_view good : {"r", "w", "m", "rw", "wr", "rwm", "mwr"})
    EXPECT_EQ(problems_of(RawDevice().node("/dev/a", "", good)), Problems{}) << good;
  for (std::string_view bad : {"", "xyz", "rr", "rwmr", "RW", "r w"}) {
    EXPECT_EQ(problems_of(RawDevice().node("/dev/a", "", bad)),
              Problems{"device \"cam-1\": device node 1: permissions \"" + std::string(bad) +
                       "\" must be a non-empty subset of \"rwm\""})
        << bad;
  }
}

TEST(DeviceRules, AKeyOrPermissionsWithoutDataAreProblemsNotEmptyStrings) {
  RawDevice device;
  device.property("K").node("/dev/a", "", "rw");
  device.properties[0].key = {nullptr, 2};
  device.nodes[0].permissions = {nullptr, 2};
  EXPECT_EQ(device.problems(),
            (Problems{"device \"cam-1\": property 1: key: data is NULL but len is 2: rule O4",
                      "device \"cam-1\": device node 1: permissions: data is NULL but len is 2: "
                      "rule O4"}));
}

// ---- sharing (D4) ------------------------------------------------------------------

TEST(DeviceRules, SharingIsOneOfTheThreeValues) {
  RawDevice device;
  for (int32_t sharing :
       {DOWSER_SHARING_HANDLER_DEFAULT, DOWSER_SHARING_LOCAL, DOWSER_SHARING_SHARED}) {
    device.record().sharing = sharing;
    EXPECT_EQ(device.problems(), Problems{}) << sharing;
  }
  device.record().sharing = 3;
  EXPECT_EQ(
      device.problems(),
      Problems{"device \"cam-1\": sharing 3 is not 0 (handler default), 1 (local) or 2 (shared)"});
}

// ---- sizes (D5) --------------------------------------------------------------------

TEST(DeviceRules, ADeviceHasAtMost1024EntriesOfEachKind) {
  RawDevice properties;
  for (int i = 0; i < DOWSER_MAX_DEVICE_ENTRIES; ++i) properties.property("P" + std::to_string(i));
  EXPECT_EQ(properties.problems(), Problems{});
  properties.property("ONE_MORE");
  EXPECT_EQ(properties.problems(),
            Problems{"device \"cam-1\": 1025 properties, more than the 1024 allowed"});

  RawDevice mounts;
  for (int i = 0; i <= DOWSER_MAX_DEVICE_ENTRIES; ++i) mounts.mount("/a", "/b");
  EXPECT_EQ(mounts.problems(),
            Problems{"device \"cam-1\": 1025 mounts, more than the 1024 allowed"});
}

TEST(DeviceRules, ADevicesStringsAreAtMost128KiBInAll) {
  // id 1 + key 1 + value 65536 + key 1 + value 65533 bytes: the limit exactly.
  const std::string full(DOWSER_MAX_PROPERTY_VALUE_LEN, 'v');
  const std::string rest(DOWSER_MAX_DEVICE_LEN - 1 - 1 - DOWSER_MAX_PROPERTY_VALUE_LEN - 1, 'v');
  EXPECT_EQ(problems_of(RawDevice("d").property("A", full).property("B", rest)), Problems{});
  EXPECT_EQ(problems_of(RawDevice("d").property("A", full).property("B", rest + "v")),
            Problems{"device \"d\": its strings are 131073 bytes in all, more than the 131072 "
                     "allowed"});
}

// ---- record sizes (V3) and NULL arrays (O4) -------------------------------------------

TEST(DeviceRules, ADeviceRecordTooSmallForThe1Point0MembersIsNamedByPosition) {
  RawDevice device;
  device.record().struct_size = 4;
  EXPECT_EQ(device_problems(&device.record(), 3, sizeof(dowser_device)),
            Problems{"device 3: struct_size 4 is smaller than the 1.0 device record (76 bytes): "
                     "rule V3"});
  device.record().struct_size = dowser::host::kDeviceRecord_1_0;
  EXPECT_EQ(device_problems(&device.record(), 3, dowser::host::kDeviceRecord_1_0), Problems{});
}

TEST(DeviceRules, ARecordOfADifferentSizeThanItsArraysStrideIsRefused) {
  RawDevice device;
  EXPECT_EQ(device_problems(&device.record(), 2, sizeof(dowser_device) + 8),
            Problems{"device 2: struct_size 80 differs from the 88 of the first in its array: "
                     "rule V3"});
  device.property("A").property("B");
  device.properties[1].struct_size = dowser::host::kPropertyRecord_1_0;
  EXPECT_EQ(device.problems(),
            Problems{"device \"cam-1\": property 2: struct_size 44 differs from the 48 of the "
                     "first in its array: rule V3"});
}

TEST(DeviceRules, ANestedArrayWhoseStrideIsImpossibleIsNotReadPastItsFirstRecord) {
  const auto problems_with_first_size = [](uint32_t size) {
    RawDevice device;
    device.property("A").property("B");
    device.properties[0].struct_size = size;
    return device.problems();
  };
  EXPECT_EQ(problems_with_first_size(4),
            Problems{"device \"cam-1\": property 1: struct_size 4 is smaller than the 1.0 "
                     "property record (44 bytes): rule V3"});
  EXPECT_EQ(problems_with_first_size(0x7fffffff),
            Problems{"device \"cam-1\": property 1: struct_size 2147483647 is larger than any "
                     "property record of ABI 1.x (at most 65536 bytes): rule V3"});
}

// A newer minor appends members: its records are larger, and accepted.
TEST(DeviceRules, LargerRecordsOfANewerMinorAreAccepted) {
  struct NewerProperty {
    dowser_property v1_0;
    uint64_t appended;
  };
  struct NewerDevice {
    dowser_device v1_0;
    uint64_t appended;
  };
  RawDevice parts;
  parts.property("K", "v");
  NewerProperty properties[2] = {{parts.properties[0], 7}, {parts.properties[0], 7}};
  properties[1].v1_0.key = dowser::abi::view("L");
  for (auto& property : properties) property.v1_0.struct_size = sizeof(NewerProperty);
  NewerDevice devices[1] = {{parts.record(), 9}};
  devices[0].v1_0.struct_size = sizeof(NewerDevice);
  devices[0].v1_0.properties = &properties[0].v1_0;
  devices[0].v1_0.properties_len = 2;

  auto report = check_report(&devices[0].v1_0, 1);
  ASSERT_EQ(report.invalid.size(), 0u) << dowser::host::joined_problems(report.invalid[0]);
  ASSERT_EQ(report.devices.size(), 1u);
  EXPECT_EQ(report.devices[0].properties,
            (dowser::Properties{{"K", std::string("v")}, {"L", std::string("v")}}));
}

TEST(DeviceRules, AnArrayThatIsNullWithALengthIsAProblemOfItsDevice) {
  RawDevice device;
  dowser_device& raw = device.record();
  raw.properties_len = 2;
  raw.device_nodes_len = 1;
  EXPECT_EQ(device_problems(&raw, 1, raw.struct_size),
            (Problems{"device \"cam-1\": properties: NULL but properties_len is 2",
                      "device \"cam-1\": device_nodes: NULL but device_nodes_len is 1"}));
}

// ---- reports ---------------------------------------------------------------------------

TEST(CheckReport, KeepsTheValidDevicesInOrderAndSaysWhyTheOthersWereLeftOut) {
  RawDevice first("a"), second("b"), third("c");
  first.property("K", "1").mount("/in", "/tmp/in").node("/dev/a", "", "r");
  second.property("A=B");
  const dowser_device records[3] = {first.record(), second.record(), third.record()};

  auto report = check_report(records, 3);
  ASSERT_EQ(report.devices.size(), 2u);
  EXPECT_EQ(report.devices[0], (dowser::Device{"a",
                                               {{"K", std::string("1")}},
                                               {{"/in", "/tmp/in", false}},
                                               {{"/dev/a", "", "r"}},
                                               dowser::Sharing::handler_default}));
  EXPECT_EQ(report.devices[1].id, "c");
  ASSERT_EQ(report.invalid.size(), 1u);
  EXPECT_EQ(report.invalid[0].device, "device \"b\"");
  EXPECT_EQ(report.invalid[0].problems,
            Problems{"device \"b\": property \"A=B\": not a valid environment variable name"});
  EXPECT_EQ(dowser::host::joined_problems({"device 2", {"device 2: x", "device 2: y"}}),
            "device 2: x; device 2: y");
}

// Two such records used to read as two devices with an empty id.
TEST(CheckReport, ALaterDeviceRecordTooSmallIsLeftOutByPosition) {
  RawDevice good("good"), small("unread");
  dowser_device records[3] = {good.record(), small.record(), small.record()};
  records[1].struct_size = records[2].struct_size = 4;

  auto report = check_report(records, 3);
  ASSERT_EQ(report.devices.size(), 1u);
  EXPECT_EQ(report.devices[0].id, "good");
  ASSERT_EQ(report.invalid.size(), 2u);
  EXPECT_EQ(report.invalid[1].device, "device 3");
  EXPECT_EQ(report.invalid[1].problems,
            Problems{"device 3: struct_size 4 is smaller than the 1.0 device record (76 bytes): "
                     "rule V3"});
}

// Why check_report refuses the whole array; "(taken)" when it does not.
std::string refusal_of(const dowser_device* records, size_t count) {
  try {
    check_report(records, count);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(taken)";
}

TEST(CheckReport, RefusesAnArrayItCannotRead) {
  EXPECT_TRUE(check_report(nullptr, 0).devices.empty());
  EXPECT_THROW(check_report(nullptr, 2), std::invalid_argument);
  RawDevice device;
  dowser_device records[2] = {device.record(), device.record()};
  records[0].struct_size = 4;
  EXPECT_EQ(refusal_of(records, 2),
            "device 1: struct_size 4 is smaller than the 1.0 device record (76 bytes): rule V3; "
            "it is the array's stride, so no device of it can be read");
  // An uninitialised struct_size: the second record would be read a megabyte on.
  records[0].struct_size = 1u << 20;
  EXPECT_EQ(refusal_of(records, 2),
            "device 1: struct_size 1048576 is larger than any device record of ABI 1.x (at "
            "most 65536 bytes): rule V3; it is the array's stride, so no device of it can be "
            "read");
}

TEST(CheckReport, RefusesASnapshotOfMoreDevicesThanTheLimitWithoutReadingIt) {
  RawDevice device;
  std::vector<dowser_device> records(DOWSER_MAX_SNAPSHOT_DEVICES, device.record());
  EXPECT_EQ(check_report(records.data(), records.size()).devices.size(),
            size_t{DOWSER_MAX_SNAPSHOT_DEVICES})
      << "the limit itself is taken (the ids repeat: duplicates are the caller's to find)";
  // One more than the array holds: refused before a record is read (ASan would see it).
  EXPECT_EQ(refusal_of(records.data(), records.size() + 1),
            "more devices in one snapshot than the 10000 allowed (rule D7): narrow the "
            "discovery details");
}

// ---- how devices and fields are quoted --------------------------------------------------

TEST(DeviceRules, QuotesCutLongTextAtACharacterAndEscapeWhatCouldMislead) {
  // 63 ASCII bytes and a 2-byte character: the character does not fit in 64.
  const std::string id = std::string(63, 'a') + "\xc3\xa9" + "tail\x01";
  EXPECT_EQ(problems_of(RawDevice(id)),
            Problems{"device \"" + std::string(63, 'a') +
                     "\"...: id contains control character 0x01 (byte 69)"});
  EXPECT_EQ(problems_of(RawDevice("say \"hi\" \\o/").property("A=B")),
            Problems{"device \"say \\x22hi\\x22 \\x5co/\": property \"A=B\": not a valid "
                     "environment variable name"});
}

}  // namespace
