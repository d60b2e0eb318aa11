// Measures how long the udev handler takes from a device appearing (or
// going) to the report that shows it: a umockdev testbed owned by this
// process sends the uevents, the built module runs in a FakeHost exactly as
// dowserd loads it. Prints min, median, p90, p99 and max over the rounds.
// "add" starts before umockdev writes the device's sysfs files and sends the
// uevent (the files take about 0.6 ms here); "remove" starts at the uevent.
//
//   tests/peers/udev/run_under_umockdev.sh build/default/bin/udev_latency_bench [rounds]
#include "testbed.hpp"

#include <dowser/testkit.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Micros = std::chrono::duration<double, std::micro>;
using dowser::testkit::FakeHost;
using dowser::testkit::SessionId;
using dowser::testkit::Snapshot;
namespace lab = udev_handler::testing;

constexpr auto kDeadline = 10s;

bool has(const Snapshot& snapshot, const std::string& id) {
  return std::any_of(snapshot.begin(), snapshot.end(),
                     [&](const dowser::Device& d) { return d.id == id; });
}

// Runs change(), then waits until the newest snapshot satisfies done.
template <typename Change, typename Done>
Micros time_until_reported(FakeHost& host, SessionId session, Change change, Done done) {
  auto start = Clock::now();
  change();
  if (!host.wait_for_snapshot(session, done, kDeadline)) {
    std::fprintf(stderr, "no report within %lld s\n", static_cast<long long>(kDeadline.count()));
    std::exit(1);
  }
  return Clock::now() - start;
}

void print_stats(const char* what, std::vector<Micros> samples) {
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) {
    return samples[static_cast<size_t>(q * static_cast<double>(samples.size() - 1))].count();
  };
  std::printf("%-16s n=%zu  min %.0f us  median %.0f us  p90 %.0f us  p99 %.0f us  max %.0f us\n",
              what, samples.size(), samples.front().count(), at(0.5), at(0.9), at(0.99),
              samples.back().count());
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 200;
  if (rounds < 1) {
    std::fprintf(stderr, "usage: %s [rounds >= 1]\n", argv[0]);
    return 2;
  }
  lab::Testbed testbed;
  testbed.load_lab();
  FakeHost host{UDEV_HANDLER_SO};
  // Events only: a day between rescans.
  auto session = host.start({"udevRules: ['SUBSYSTEM==\"video4linux\", KERNEL==\"bench*\"']",
                             {{"rescanIntervalSeconds", "86400"}}});
  host.wait_for_snapshot(
      session, [](const Snapshot&) { return true; }, kDeadline);

  std::vector<Micros> added, removed;
  for (int i = 0; i < rounds; ++i) {
    std::string name = "bench" + std::to_string(i), devpath;
    added.push_back(time_until_reported(
        host, session,
        [&] {
          devpath = testbed.add("video4linux", name, lab::kCamera10 + "/1-10:1.0", {},
                                {{"DEVNAME", "/dev/" + name}});
        },
        [&](const Snapshot& s) { return has(s, devpath); }));
    removed.push_back(time_until_reported(
        host, session, [&] { testbed.uevent(devpath, "remove"); },
        [&](const Snapshot& s) { return !has(s, devpath); }));
    testbed.remove_silently(devpath);  // slow (ms) and not what is measured
  }
  host.stop(session);
  print_stats("add-to-report", added);
  print_stats("remove-to-report", removed);
  return host.violations().empty() ? 0 : 1;
}
