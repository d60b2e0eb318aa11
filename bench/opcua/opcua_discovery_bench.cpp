// Measures how long the opcua handler takes from the start of a discovery
// session to its first complete report: one node-opcua LDS with N servers
// (default 50) registered, the built module in a FakeHost exactly as dowserd
// loads it. Each round is a fresh session, so every connection is new.
// Prints min, median, p90 and max over the rounds. Runs inside the OPC UA test
// namespace:
//
//   tests/peers/opcua/run-in-netns.sh build/default/bin/opcua_discovery_bench [servers] [rounds]
#include "node_peer.hpp"

#include <dowser/testkit.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::duration<double, std::milli>;
using dowser::testkit::FakeHost;
using namespace opcua::peers;

constexpr int kLdsPort = 4840;
constexpr auto kDeadline = std::chrono::seconds(120);

std::vector<std::string> server_names(int count) {
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) names.push_back("Bench" + std::to_string(i));
  return names;
}

// One session from start() to a snapshot holding every server.
Millis time_to_complete_report(FakeHost& host, size_t servers) {
  std::string details =
      "opcuaDiscoveryMethod: {standard: {discoveryUrls: [" + url_at(kLdsPort) + "]}}\n";
  auto start = Clock::now();
  auto session = host.start({details, {}});
  bool complete = host.wait_for_snapshot(
      session, [&](const auto& snapshot) { return snapshot.size() == servers; }, kDeadline);
  Millis elapsed = Clock::now() - start;
  host.stop(session);
  if (!complete) {
    std::fprintf(stderr, "no complete report within %lld s\n",
                 static_cast<long long>(kDeadline.count()));
    std::exit(1);
  }
  return elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  int servers = argc > 1 ? std::atoi(argv[1]) : 50;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 10;
  PeerPlace place;
  place.logs = OPCUA_BENCH_LOGS;
  fs::create_directories(place.logs);

  auto setup_start = Clock::now();
  auto lds = start_lds(place, kLdsPort);
  auto fleet = start_servers(place, server_names(servers), kLdsPort + 1, url_at(kLdsPort));
  std::printf("setup: LDS and %d registered servers in %.1f s (not measured)\n", servers,
              Millis(Clock::now() - setup_start).count() / 1000);

  FakeHost host(OPCUA_MODULE_PATH);
  std::vector<Millis> samples;
  samples.reserve(static_cast<size_t>(rounds));
  for (int round = 0; round < rounds; ++round)
    samples.push_back(time_to_complete_report(host, static_cast<size_t>(servers)));
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) {
    return samples[static_cast<size_t>(q * static_cast<double>(samples.size() - 1))].count();
  };
  std::printf(
      "start to first complete report, %d servers behind one LDS: n=%zu  min %.1f ms"
      "  median %.1f ms  p90 %.1f ms  max %.1f ms\n",
      servers, samples.size(), samples.front().count(), at(0.5), at(0.9), samples.back().count());
}
