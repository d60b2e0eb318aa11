// Measures how long the onvif handler takes from the start of a discovery
// session to its first complete report: N simulated cameras (default 200)
// in one gSOAP simulator answer one unicast Probe on 127.0.0.1, and the
// handler checks each (GetSystemDateAndTime, GetNetworkInterfaces,
// GetDeviceInformation, GetServices, GetProfiles, GetStreamUri x2). The
// built module runs in a FakeHost exactly as dowserd loads it. Each round is
// a fresh session. The first report comes once the probe window
// (discoveryTimeoutSeconds, here 1 s as Akri's default) has closed and every
// camera is checked; the figure includes that window.
//
//   build/default/bin/onvif_discovery_bench [cameras] [rounds]
#include "camera_sim_process.hpp"

#include <dowser/testkit.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::duration<double, std::milli>;
using dowser::testkit::FakeHost;

Millis time_to_complete_report(FakeHost& host, const std::string& target, size_t cameras) {
  auto start = Clock::now();
  auto session = host.start(
      {"discoveryTimeoutSeconds: 1\n",
       {{"ONVIF_MULTICAST_INTERFACES", "none"}, {"ONVIF_UNICAST_PROBE_TARGETS", target}}});
  bool complete = host.wait_for_snapshot(
      session, [&](const auto& snapshot) { return snapshot.size() == cameras; },
      std::chrono::seconds(120));
  Millis elapsed = Clock::now() - start;
  host.stop(session);
  if (!complete) {
    std::fprintf(stderr, "no complete report within 120 s\n");
    std::exit(1);
  }
  return elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  int cameras = argc > 1 ? std::atoi(argv[1]) : 200;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 10;
  onvif::peers::CameraSimulator sim(R"({"cameras": []})", {"--count", std::to_string(cameras)});
  FakeHost host(ONVIF_MODULE_PATH);
  std::vector<Millis> samples;
  samples.reserve(static_cast<size_t>(rounds));
  for (int round = 0; round < rounds; ++round)
    samples.push_back(
        time_to_complete_report(host, sim.probe_target(), static_cast<size_t>(cameras)));
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) {
    return samples[static_cast<size_t>(q * static_cast<double>(samples.size() - 1))].count();
  };
  std::printf(
      "start to first complete report, %d cameras answering one unicast probe (1 s probe window"
      " included): n=%zu  min %.1f ms  median %.1f ms  p90 %.1f ms  max %.1f ms\n",
      cameras, samples.size(), samples.front().count(), at(0.5), at(0.9), samples.back().count());
  return 0;
}
