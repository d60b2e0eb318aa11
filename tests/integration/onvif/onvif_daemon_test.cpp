// dowserd end to end with the onvif handler: two simulated cameras (found by
// unicast Probe on 127.0.0.1) become shared Instances and a
// Configuration-level resource, and a pod that asks for two gets both
// cameras' stream URIs. The kubelet is the test kit's simulator.
#include "camera_sim_process.hpp"
#include "daemon_harness.hpp"

#include <set>

namespace dowser::it {
namespace {

const std::string kCameras = R"({"cameras": [
  {"name": "north", "uuid": "11110000-0000-4000-8000-000000000001",
   "profiles": [{"token": "main", "uri": "rtsp://10.9.0.1/north"}]},
  {"name": "south", "uuid": "22220000-0000-4000-8000-000000000002", "username": "viewer",
   "password": "pw", "profiles": [{"token": "main", "uri": "rtsp://10.9.0.2/south"}]}]})";

class OnvifDaemonTest : public DaemonTest {
 protected:
  OnvifDaemonTest() {
    fs::copy_file(ONVIF_MODULE_PATH, handler_dir_ / "libdowser-handler-onvif.so");
  }

  void onvif_configuration(const std::string& name, int capacity) {
    write_file(config_dir_ / (name + ".yaml"),
               "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: " + name +
                   "\nspec:\n  capacity: " + std::to_string(capacity) +
                   "\n  discoveryHandler:\n    name: onvif\n    discoveryDetails: |\n"
                   "      discoveryTimeoutSeconds: 0.5\n      discoveryIntervalSeconds: 1\n"
                   "    discoveryProperties:\n"
                   "      - name: ONVIF_MULTICAST_INTERFACES\n        value: none\n"
                   "      - name: ONVIF_UNICAST_PROBE_TARGETS\n        value: \"" +
                   sim_.probe_target() +
                   "\"\n      - name: username_22220000_0000_4000_8000_000000000002\n"
                   "        value: viewer\n"
                   "      - name: password_22220000_0000_4000_8000_000000000002\n"
                   "        value: pw\n");
  }

  onvif::peers::CameraSimulator sim_{kCameras};
};

TEST_F(OnvifDaemonTest, CamerasBecomeSharedInstancesAndAPodAskingForTwoGetsBoth) {
  onvif_configuration("cameras", 2);
  auto& node = add_node("node-a");
  ASSERT_TRUE(node.wait_allocatable("akri.sh/cameras", 2, 60s)) << node.log();

  auto stored = instances();
  ASSERT_EQ(stored.size(), 2u);
  for (const auto& entry : stored) {
    EXPECT_EQ(entry.instance.configuration_name, "cameras");
    EXPECT_TRUE(entry.instance.shared) << "cameras are network devices";
    EXPECT_EQ(entry.instance.capacity, 2u);
    EXPECT_TRUE(node.wait_allocatable("akri.sh/" + entry.instance.name, 2)) << entry.instance.name;
  }

  auto both = node.kubelet->allocate("akri.sh/cameras", {"default", "recorder"}, "c", 2);
  ASSERT_TRUE(both.ok()) << both.status.error_message();
  ASSERT_EQ(both.response.container_responses_size(), 1);
  std::set<std::string> streams;
  for (const auto& [key, value] : both.response.container_responses(0).envs())
    if (key.rfind("ONVIF_DEVICE_STREAM_URI_", 0) == 0) streams.insert(value);
  EXPECT_EQ(streams, (std::set<std::string>{"rtsp://10.9.0.1/north", "rtsp://10.9.0.2/south"}))
      << "the authenticated camera's stream needs the credentials";
  EXPECT_EQ(node.log().find("value: pw"), std::string::npos);
}

}  // namespace
}  // namespace dowser::it
