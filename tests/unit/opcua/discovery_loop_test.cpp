// A session's threads: one per URL, merged reports, reports only on change,
// and a stop that interrupts whatever is waiting.
#include "discovery_loop.hpp"
#include "fake_network.hpp"

#include <gtest/gtest.h>

#include <condition_variable>

namespace opcua::test {
namespace {

using namespace std::chrono_literals;
using ua::ApplicationType;

// The snapshots a loop reported, in order.
class Reports {
 public:
  DiscoveryLoop::Report callback() {
    return [this](const std::vector<dowser::Device>& devices) {
      std::lock_guard lock(mutex_);
      snapshots_.push_back(devices);
      changed_.notify_all();
      return true;
    };
  }
  bool wait_for(const std::function<bool(const std::vector<dowser::Device>&)>& predicate,
                std::chrono::milliseconds timeout = 10s) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout,
                             [&] { return !snapshots_.empty() && predicate(snapshots_.back()); });
  }
  size_t count() {
    std::lock_guard lock(mutex_);
    return snapshots_.size();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::vector<dowser::Device>> snapshots_;
};

std::vector<std::string> ids(const std::vector<dowser::Device>& devices) {
  std::vector<std::string> result;
  for (const auto& device : devices) result.push_back(device.id);
  return result;
}

auto has_ids(std::vector<std::string> expected) {
  return
      [expected](const std::vector<dowser::Device>& devices) { return ids(devices) == expected; };
}

class OpcuaLoop : public ::testing::Test {
 protected:
  OpcuaLoop() { network_.resolvable("10.0.0.7"); }

  void serve(const std::string& lds, const std::vector<std::string>& server_urls) {
    std::vector<ua::ApplicationDescription> apps;
    for (const auto& url : server_urls) {
      apps.push_back(application(url, ApplicationType::server, {url}));
      network_.set_endpoints(url, {});
    }
    network_.set_find_servers(lds, apps);
  }

  std::unique_ptr<DiscoveryLoop> start(std::vector<std::string> urls,
                                       std::chrono::milliseconds interval = 10ms,
                                       std::chrono::milliseconds first_report_wait = 10s) {
    Settings settings;
    settings.discovery_urls = std::move(urls);
    settings.discovery_interval = interval;
    settings.first_report_wait = first_report_wait;
    return std::make_unique<DiscoveryLoop>(
        settings, [this](const Cancellation& c) { return network_.services(c); },
        reports_.callback(), logs_.sink());
  }

  FakeNetwork network_;
  Reports reports_;
  LogRecorder logs_;
};

TEST_F(OpcuaLoop, TheFirstReportWaitsUntilEveryUrlWasScanned) {
  network_.hang("opc.tcp://10.0.0.1:4840");
  serve("opc.tcp://10.0.0.2:4840", {"opc.tcp://10.0.0.7:1"});
  auto loop = start({"opc.tcp://10.0.0.1:4840", "opc.tcp://10.0.0.2:4840"});
  // The second URL is scanned again and again (every 10 ms) while the
  // first one hangs: the host would take its devices alone as all there is.
  ASSERT_TRUE(network_.wait_for_calls(6, 10s));
  EXPECT_EQ(reports_.count(), 0u);
  network_.release("opc.tcp://10.0.0.1:4840");  // its scan ends, timed out
  EXPECT_TRUE(reports_.wait_for(has_ids({"opc.tcp://10.0.0.7:1"})));
}

// A URL that hangs (up to its request timeout, which may be minutes) holds
// the first report only so long: then what the others found goes.
TEST_F(OpcuaLoop, AHangingUrlHoldsTheFirstReportOnlySoLong) {
  network_.hang("opc.tcp://10.0.0.1:4840");
  serve("opc.tcp://10.0.0.2:4840", {"opc.tcp://10.0.0.7:1"});
  auto loop = start({"opc.tcp://10.0.0.1:4840", "opc.tcp://10.0.0.2:4840"}, 1h, 200ms);
  EXPECT_TRUE(reports_.wait_for(has_ids({"opc.tcp://10.0.0.7:1"})));
  EXPECT_EQ(network_.hanging_calls(), 1u) << "the first URL still hangs";
}

// A scan that fails outright counts as that URL's scan: the others' devices
// are reported, not held for good.
TEST_F(OpcuaLoop, AUrlWhoseScanFailsDoesNotHoldTheFirstReport) {
  network_.resolving_breaks("broken-host");
  serve("opc.tcp://10.0.0.1:4840", {"opc.tcp://broken-host:1"});
  serve("opc.tcp://10.0.0.2:4840", {"opc.tcp://10.0.0.7:1"});
  auto loop = start({"opc.tcp://10.0.0.1:4840", "opc.tcp://10.0.0.2:4840"});
  EXPECT_TRUE(reports_.wait_for(has_ids({"opc.tcp://10.0.0.7:1"})));
  EXPECT_GE(logs_.count(dowser::LogLevel::warn, "scan failed: resolver broke on broken-host"), 1u);
}

TEST_F(OpcuaLoop, AHangingUrlDoesNotDelayLaterReportsOfTheOthers) {
  serve("opc.tcp://10.0.0.1:4840", {"opc.tcp://10.0.0.7:1"});
  serve("opc.tcp://10.0.0.2:4840", {"opc.tcp://10.0.0.7:2"});
  auto loop = start({"opc.tcp://10.0.0.1:4840", "opc.tcp://10.0.0.2:4840"});
  ASSERT_TRUE(reports_.wait_for(has_ids({"opc.tcp://10.0.0.7:1", "opc.tcp://10.0.0.7:2"})));
  network_.hang("opc.tcp://10.0.0.1:4840");
  ASSERT_TRUE(network_.wait_for_hanging_call(10s));
  // The hanging call never returns before the loop stops, so a report
  // now cannot have waited for it; the first URL's last scan still counts.
  serve("opc.tcp://10.0.0.2:4840", {"opc.tcp://10.0.0.7:2", "opc.tcp://10.0.0.7:3"});
  EXPECT_TRUE(reports_.wait_for(
      has_ids({"opc.tcp://10.0.0.7:1", "opc.tcp://10.0.0.7:2", "opc.tcp://10.0.0.7:3"})));
  EXPECT_EQ(network_.hanging_calls(), 1u) << "the first URL still hangs";
  loop.reset();  // must interrupt the hanging call
  EXPECT_EQ(network_.hanging_calls(), 0u);
}

TEST_F(OpcuaLoop, ReportsOnlyWhenTheMergedSnapshotChanges) {
  serve("opc.tcp://10.0.0.2:4840", {"opc.tcp://10.0.0.7:1"});
  auto loop = start({"opc.tcp://10.0.0.2:4840"});
  ASSERT_TRUE(reports_.wait_for(has_ids({"opc.tcp://10.0.0.7:1"})));
  // Several more scans find the same: none of them reports.
  ASSERT_TRUE(network_.wait_for_calls(network_.find_servers_calls() + 5, 10s));
  EXPECT_EQ(reports_.count(), 1u);

  serve("opc.tcp://10.0.0.2:4840", {"opc.tcp://10.0.0.7:1", "opc.tcp://10.0.0.7:2"});
  EXPECT_TRUE(reports_.wait_for(has_ids({"opc.tcp://10.0.0.7:1", "opc.tcp://10.0.0.7:2"})));
  EXPECT_EQ(reports_.count(), 2u);
}

TEST_F(OpcuaLoop, AServerTwoLdsesNameIsOneDevice) {
  serve("opc.tcp://10.0.0.1:4840", {"opc.tcp://10.0.0.7:1", "opc.tcp://10.0.0.7:2"});
  serve("opc.tcp://10.0.0.2:4840", {"opc.tcp://10.0.0.7:3", "opc.tcp://10.0.0.7:1"});
  auto loop = start({"opc.tcp://10.0.0.1:4840", "opc.tcp://10.0.0.2:4840"});
  EXPECT_TRUE(reports_.wait_for(
      has_ids({"opc.tcp://10.0.0.7:1", "opc.tcp://10.0.0.7:2", "opc.tcp://10.0.0.7:3"})));
}

TEST_F(OpcuaLoop, AServerThatGoesAwayIsReportedGone) {
  serve("opc.tcp://10.0.0.2:4840", {"opc.tcp://10.0.0.7:1", "opc.tcp://10.0.0.7:2"});
  auto loop = start({"opc.tcp://10.0.0.2:4840"});
  ASSERT_TRUE(reports_.wait_for(has_ids({"opc.tcp://10.0.0.7:1", "opc.tcp://10.0.0.7:2"})));
  network_.remove_endpoints("opc.tcp://10.0.0.7:2");  // still registered, no longer answering
  EXPECT_TRUE(reports_.wait_for(has_ids({"opc.tcp://10.0.0.7:1"})));
  network_.remove_find_servers("opc.tcp://10.0.0.2:4840");  // the LDS itself goes
  EXPECT_TRUE(reports_.wait_for(has_ids({})));
}

}  // namespace
}  // namespace opcua::test
