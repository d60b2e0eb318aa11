// What one container gets for its allocated slots: environment, mounts,
// device nodes and slot annotations, merged into one ContainerAllocateResponse.
#include "device_plugins.hpp"

#include "deviceplugin/v1beta1/api.pb.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

using dowser::plugins::fill_container_response;
using dowser::plugins::SlotGrant;

namespace {

using StringMap = std::map<std::string, std::string>;

template <typename ProtoMap>
StringMap to_map(const ProtoMap& map) {
  return {map.begin(), map.end()};
}

std::vector<std::tuple<std::string, std::string, bool>> mounts_of(
    const v1beta1::ContainerAllocateResponse& response) {
  std::vector<std::tuple<std::string, std::string, bool>> result;
  for (const auto& mount : response.mounts())
    result.emplace_back(mount.container_path(), mount.host_path(), mount.read_only());
  return result;
}

std::vector<std::tuple<std::string, std::string, std::string>> devices_of(
    const v1beta1::ContainerAllocateResponse& response) {
  std::vector<std::tuple<std::string, std::string, std::string>> result;
  for (const auto& device : response.devices())
    result.emplace_back(device.container_path(), device.host_path(), device.permissions());
  return result;
}

TEST(FillContainerResponse, OneDeviceGetsItsPropertiesSuffixedAndPlain) {
  SlotGrant grant;
  grant.instance = "cams-a1b2c3";
  grant.slot = 1;
  grant.usage = "node-a";
  grant.environment = {{"RESOLUTION", "1080p"}, {"URL", "rtsp://cam"}};
  v1beta1::ContainerAllocateResponse response;

  fill_container_response({grant}, response);

  EXPECT_EQ(to_map(response.envs()), (StringMap{{"RESOLUTION_A1B2C3", "1080p"},
                                                {"RESOLUTION", "1080p"},
                                                {"URL_A1B2C3", "rtsp://cam"},
                                                {"URL", "rtsp://cam"}}))
      << "suffixed with the Instance digest in upper case";
  EXPECT_EQ(to_map(response.annotations()),
            (StringMap{{"akri.agent.slot-cams-a1b2c3-1", "node-a"}}));
  EXPECT_TRUE(response.mounts().empty());
  EXPECT_TRUE(response.devices().empty());
}

TEST(FillContainerResponse, SeveralDevicesShareUnsuffixedOnlyWhatTheyAgreeOnAndMountsOnce) {
  SlotGrant first;
  first.instance = "cams-a1b2c3";
  first.slot = 0;
  first.usage = "C:0:node-a";
  first.environment = {{"RESOLUTION", "1080p"}, {"SITE", "north"}, {"ONLY_FIRST", "x"}};
  first.mounts = {{"/data", "/srv/data", true}};
  first.device_nodes = {{"/dev/video0", "", "rw"}};
  SlotGrant second;
  second.instance = "cams-d4e5f6";
  second.slot = 2;
  second.usage = "C:1:node-a";
  second.environment = {{"RESOLUTION", "720p"}, {"SITE", "north"}};
  second.mounts = {{"/data", "/srv/data", true}, {"/logs", "/srv/logs", false}};
  second.device_nodes = {{"/dev/video0", "", "rw"}, {"/dev/video1", "/dev/video9", "r"}};
  v1beta1::ContainerAllocateResponse response;

  fill_container_response({first, second}, response);

  EXPECT_EQ(to_map(response.envs()), (StringMap{{"RESOLUTION_A1B2C3", "1080p"},
                                                {"RESOLUTION_D4E5F6", "720p"},
                                                {"SITE_A1B2C3", "north"},
                                                {"SITE_D4E5F6", "north"},
                                                {"SITE", "north"},
                                                {"ONLY_FIRST_A1B2C3", "x"}}))
      << "unsuffixed only what every device has with the same value (a Configuration's "
         "brokerProperties)";
  EXPECT_EQ(mounts_of(response), (std::vector<std::tuple<std::string, std::string, bool>>{
                                     {"/data", "/srv/data", true}, {"/logs", "/srv/logs", false}}));
  EXPECT_EQ(devices_of(response),
            (std::vector<std::tuple<std::string, std::string, std::string>>{
                {"/dev/video0", "/dev/video0", "rw"}, {"/dev/video1", "/dev/video9", "r"}}))
      << "duplicates once; a node without a host path is the container path";
  EXPECT_EQ(to_map(response.annotations()),
            (StringMap{{"akri.agent.slot-cams-a1b2c3-0", "C:0:node-a"},
                       {"akri.agent.slot-cams-d4e5f6-2", "C:1:node-a"}}));
}

// Preferred may give one container two slots of one Instance: one device.
TEST(FillContainerResponse, TwoSlotsOfOneInstanceAreOneDevice) {
  SlotGrant first;
  first.instance = "cams-a1b2c3";
  first.slot = 0;
  first.environment = {{"RESOLUTION", "1080p"}};
  SlotGrant second = first;
  second.slot = 1;
  v1beta1::ContainerAllocateResponse response;

  fill_container_response({first, second}, response);

  EXPECT_EQ(to_map(response.envs()),
            (StringMap{{"RESOLUTION_A1B2C3", "1080p"}, {"RESOLUTION", "1080p"}}));
  EXPECT_EQ(response.annotations_size(), 2);
}

}  // namespace
