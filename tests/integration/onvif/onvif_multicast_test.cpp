// The onvif handler with multicast WS-Discovery and Hello/Bye, against the
// gSOAP camera simulator on port 3702. Runs whole inside run-in-netns.sh,
// where `lo` is the only interface: the handler's default (every
// multicast-capable interface) is then `lo` alone.
#include "camera_sim_process.hpp"
#include "snapshot_queries.hpp"

#include <gtest/gtest.h>
#include <dowser/testkit.hpp>

namespace onvif::peers {
namespace {

using dowser::testkit::FakeHost;

const std::string kCameras = R"({"cameras": [
  {"name": "dock", "uuid": "dddd0000-0000-4000-8000-000000000001"},
  {"name": "yard", "uuid": "eeee0000-0000-4000-8000-000000000002"}]})";
const std::string kDock = "dddd0000-0000-4000-8000-000000000001";
const std::string kYard = "eeee0000-0000-4000-8000-000000000002";

TEST(OnvifMulticast, ProbeFindsCamerasAndHelloAndByeAreHeardBetweenProbes) {
  CameraSimulator sim(kCameras, {"--multicast", "--wsd-port", "3702"});
  FakeHost host(ONVIF_MODULE_PATH);
  // One probe at the start, the next one only after 600 s: whatever changes
  // within this test is heard from Hello and Bye.
  auto session = host.start({"discoveryTimeoutSeconds: 0.5\ndiscoveryIntervalSeconds: 600\n", {}});
  ASSERT_TRUE(host.wait_for_snapshot(session, has_ids({kDock, kYard}), 20s)) << sim.transcript();
  ASSERT_TRUE(sim.run("bye yard"));
  EXPECT_TRUE(host.wait_for_snapshot(session, has_ids({kDock}), 20s)) << "Bye removes at once";
  ASSERT_TRUE(sim.run("hello yard"));
  EXPECT_TRUE(host.wait_for_snapshot(session, has_ids({kDock, kYard}), 20s))
      << "Hello adds before the next probe";
  host.stop(session);
  EXPECT_TRUE(host.violations().empty());
}

TEST(OnvifMulticast, NoInterfaceMeansNoMulticastProbe) {
  CameraSimulator sim(kCameras, {"--multicast", "--wsd-port", "3702"});
  FakeHost host(ONVIF_MODULE_PATH);
  auto session = host.start({"discoveryTimeoutSeconds: 0.3\ndiscoveryIntervalSeconds: 0.5\n",
                             {{"ONVIF_MULTICAST_INTERFACES", "none"}}});
  // Several passes, each reporting nothing.
  ASSERT_TRUE(host.wait_for_snapshot(session, has_ids({}), 20s));
  ASSERT_FALSE(host.wait_for_snapshot(
      session, [](const auto& s) { return !s.empty(); }, 2s));
  host.stop(session);
}

}  // namespace
}  // namespace onvif::peers
