// The list bytes dowser writes to ListAndWatch streams are exactly what
// protobuf writes for the same message, and parse back to the same devices.
#include "device_plugins.hpp"

#include "deviceplugin/v1beta1/api.pb.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using dowser::capacity::PluginDevice;
using dowser::plugins::serialized_device_list;

namespace {

std::string serialized_by_protobuf(const std::vector<PluginDevice>& devices) {
  v1beta1::ListAndWatchResponse message;
  for (const auto& device : devices) {
    auto* entry = message.add_devices();
    entry->set_id(device.id);
    entry->set_health(device.healthy ? "Healthy" : "Unhealthy");
  }
  return message.SerializeAsString();
}

void expect_same_as_protobuf(const std::vector<PluginDevice>& devices) {
  const std::string bytes = serialized_device_list(devices);
  EXPECT_EQ(bytes, serialized_by_protobuf(devices));
  v1beta1::ListAndWatchResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  ASSERT_EQ(parsed.devices_size(), static_cast<int>(devices.size()));
  for (int i = 0; i < parsed.devices_size(); ++i) {
    EXPECT_EQ(parsed.devices(i).id(), devices[static_cast<size_t>(i)].id);
    EXPECT_EQ(parsed.devices(i).health(),
              devices[static_cast<size_t>(i)].healthy ? "Healthy" : "Unhealthy");
  }
}

TEST(SerializedDeviceList, EmptyListIsNoBytes) {
  EXPECT_EQ(serialized_device_list({}), "");
  expect_same_as_protobuf({});
}

TEST(SerializedDeviceList, HealthyAndUnhealthyInOrder) {
  expect_same_as_protobuf({{"0", true}, {"1", false}, {"cam-3f2a1b-2", true}});
}

TEST(SerializedDeviceList, LongIdsTakeMultiByteLengths) {
  // 200 bytes: the id's length, and the Device's, need two varint bytes.
  expect_same_as_protobuf({{std::string(200, 'a'), true}, {std::string(127, 'b'), false}});
}

TEST(SerializedDeviceList, ThousandsOfVirtualDevices) {
  std::vector<PluginDevice> devices;
  devices.reserve(5000);
  for (int i = 0; i < 5000; ++i) devices.push_back({std::to_string(i), i % 7 != 0});
  expect_same_as_protobuf(devices);
}

}  // namespace
