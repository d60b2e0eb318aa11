// The C++ SDK's conversions between owning types and C views, which the
// host, the test kit and every C++ handler share.
#include <dowser/handler.hpp>

#include <gtest/gtest.h>

#include <cstring>

namespace {

dowser::Device camera() {
  dowser::Device device;
  device.id = "cam-1";
  device.properties = {{"URL", "rtsp://x"}, {"NO_VALUE", std::nullopt}, {"EMPTY", ""}};
  device.mounts = {{"/in", "/host", true}};
  device.device_nodes = {{"/dev/video0", "/dev/video0", "rw"}};
  device.sharing = dowser::Sharing::shared;
  return device;
}

TEST(AbiConversion, DevicesSurviveARoundTripThroughTheCViews) {
  std::vector<dowser::Device> devices = {camera(), dowser::Device{"bare", {}, {}, {}, {}}};
  dowser::abi::DeviceViews views(devices);
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(dowser::abi::read_devices(views.data(), views.size()), devices);
}

TEST(AbiConversion, PropertyWithoutValueStaysDistinctFromAnEmptyOne) {
  const std::vector<dowser::Device> devices{camera()};
  dowser::abi::DeviceViews views(devices);
  auto device = dowser::abi::read_devices(views.data(), 1).at(0);
  EXPECT_FALSE(device.properties.at("NO_VALUE").has_value());
  EXPECT_EQ(device.properties.at("EMPTY"), std::optional<std::string>(""));
}

TEST(AbiConversion, StringsMayContainNulBytes) {
  dowser::Device device{
      std::string("a\0b", 3), {{std::string("k\0", 2), std::string("\0v", 2)}}, {}, {}, {}};
  const std::vector<dowser::Device> devices{device};
  dowser::abi::DeviceViews views(devices);
  EXPECT_EQ(dowser::abi::read_devices(views.data(), 1).at(0), device);
}

// A sender built against an older minor knows a shorter struct: the fields
// it does not know read as zero (rule V3), and arrays use its stride.
TEST(AbiConversion, ShorterRecordsFromOlderSendersReadWithTheirOwnStride) {
  constexpr size_t old_size = offsetof(dowser_device, sharing);
  std::vector<unsigned char> bytes(2 * old_size, 0xAB);
  for (int i = 0; i < 2; ++i) {
    dowser_device d{};
    d.struct_size = old_size;
    d.id = dowser::abi::view(i == 0 ? "first" : "second");
    std::memcpy(bytes.data() + i * old_size, &d, old_size);
  }
  auto devices = dowser::abi::read_devices(reinterpret_cast<const dowser_device*>(bytes.data()), 2);
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].id, "first");
  EXPECT_EQ(devices[1].id, "second");
  EXPECT_EQ(devices[1].sharing, dowser::Sharing::handler_default);
}

TEST(AbiConversion, MalformedArraysAreRefusedNotDereferenced) {
  EXPECT_THROW(dowser::abi::read_devices(nullptr, 3), std::invalid_argument);
  dowser_device zero_size{};
  EXPECT_THROW(dowser::abi::read_devices(&zero_size, 1), std::invalid_argument);
  dowser_device bad_sharing{};
  bad_sharing.struct_size = sizeof bad_sharing;
  bad_sharing.sharing = 7;
  EXPECT_THROW(dowser::abi::read_devices(&bad_sharing, 1), std::invalid_argument);
}

TEST(AbiConversion, RequestRoundTrip) {
  dowser::DiscoverRequest request{"descriptions: [a]", {{"K", "v"}, {"ABSENT", std::nullopt}}};
  dowser::abi::RequestView view(request);
  auto copy = dowser::abi::read_request(view.get());
  EXPECT_EQ(copy.discovery_details, request.discovery_details);
  EXPECT_EQ(copy.properties, request.properties);
  EXPECT_EQ(copy.property_or("K", "d"), "v");
  EXPECT_EQ(copy.property_or("ABSENT", "d"), "d");
  EXPECT_EQ(copy.property_or("MISSING", "d"), "d");
}

TEST(AbiConversion, ErrorsAreTruncatedAndTerminated) {
  char buffer[5];
  std::memset(buffer, 'x', sizeof buffer);
  dowser::abi::write_error(buffer, sizeof buffer, "long message");
  EXPECT_STREQ(buffer, "long");
  dowser::abi::write_error(nullptr, 0, "ignored");  // must not crash
}

TEST(PropertyValue, MakesAnyBytesAValueTheHostTakes) {
  EXPECT_EQ(dowser::property_value("caf\xc3\xa9 \xf0\x9f\x93\xb7"), "caf\xc3\xa9 \xf0\x9f\x93\xb7");
  EXPECT_EQ(dowser::property_value("caf\xe9"), "caf\xef\xbf\xbd") << "Latin-1";
  EXPECT_EQ(dowser::property_value(std::string("a\0b", 3)), "ab");
  EXPECT_EQ(dowser::property_value("\xc0\x80"), "\xef\xbf\xbd\xef\xbf\xbd") << "overlong NUL";
  EXPECT_EQ(dowser::property_value("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd")
      << "a surrogate";
  const std::string long_text = "x" + std::string(DOWSER_MAX_PROPERTY_VALUE_LEN, '\xe9');
  const std::string cut = dowser::property_value(long_text);
  EXPECT_LE(cut.size(), size_t{DOWSER_MAX_PROPERTY_VALUE_LEN});
  EXPECT_EQ(cut.size(), 1 + (DOWSER_MAX_PROPERTY_VALUE_LEN - 1) / 3 * 3)
      << "cut before a character";
}

// A cut through a character would leave bytes that are not UTF-8, which
// the host passes on into logs and Kubernetes Events.
TEST(AbiConversion, ErrorsAreCutBeforeACharacterTheyWouldSplit) {
  char buffer[6];
  dowser::abi::write_error(buffer, sizeof buffer, "cam \xc3\xa9t\xc3\xa9");  // "cam été"
  EXPECT_STREQ(buffer, "cam ") << "the two bytes of the first é do not fit in 5";
  dowser::abi::write_error(buffer, sizeof buffer, "ab\xe2\x82\xac!");  // "ab€!"
  EXPECT_STREQ(buffer, "ab\xe2\x82\xac");
  dowser::abi::write_error(buffer, sizeof buffer, "\xf0\x9f\x93\xb7\xf0\x9f\x93\xb7");
  EXPECT_STREQ(buffer, "\xf0\x9f\x93\xb7") << "a 4-byte character fits, the next does not";
}

}  // namespace
