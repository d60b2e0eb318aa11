// FakeHost against the real debugEcho handler (loaded from its .so, as
// dowserd loads it) and against a raw C table linked into this test.
#include <dowser/testkit.hpp>
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using dowser::DiscoverRequest;
using dowser::testkit::FakeHost;
using dowser::testkit::SessionRecord;
using dowser::testkit::Snapshot;

constexpr auto kPatience = 10s;  // generous: only a broken handler waits this long

using dowser::test::TempDir;

void write_file(const std::filesystem::path& file, const std::string& text) {
  // Written to a temporary name and renamed, so a reader never sees half of it.
  auto temporary = file.string() + ".tmp";
  std::ofstream(temporary) << text;
  std::filesystem::rename(temporary, file);
}

std::vector<std::string> ids_of(const Snapshot& snapshot) {
  std::vector<std::string> ids;
  for (const auto& device : snapshot) ids.push_back(device.id);
  return ids;
}

auto has_ids(std::vector<std::string> expected) {
  return [expected](const Snapshot& snapshot) { return ids_of(snapshot) == expected; };
}

// ---- debugEcho, loaded from its file -----------------------------------------

class FakeHostWithDebugEcho : public ::testing::Test {
 protected:
  // Each session watches its own availability file, never the shared default.
  DiscoverRequest request(const std::string& details) const {
    return {details, {{"DEBUG_ECHO_AVAILABILITY_FILE", availability_file().string()}}};
  }
  std::filesystem::path availability_file() const { return dir_.path() / "availability"; }

  TempDir dir_;
  FakeHost host_{std::filesystem::path(DEBUG_ECHO_SO)};
};

TEST_F(FakeHostWithDebugEcho, DescribesTheLoadedHandler) {
  EXPECT_EQ(host_.handler().name(), "debugEcho");
  EXPECT_TRUE(host_.handler().has_validate());
}

TEST_F(FakeHostWithDebugEcho, RecordsEachDescriptionAsADevice) {
  auto session = host_.start(request("descriptions: [foo0, foo1]"));
  ASSERT_TRUE(host_.wait_for_snapshot(session, has_ids({"foo0", "foo1"}), kPatience));
  host_.stop(session);

  auto latest = host_.latest_snapshot(session);
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->at(1).properties.at("DEBUG_ECHO_DESCRIPTION"), "foo1");
  EXPECT_EQ(latest->at(1).sharing, dowser::Sharing::local);  // resolved by the loader
  EXPECT_TRUE(host_.record(session).stopped);
  EXPECT_TRUE(host_.violations().empty());
}

TEST_F(FakeHostWithDebugEcho, RecordsEverySnapshotInOrder) {
  write_file(availability_file(), "ONLINE");
  auto session = host_.start(request("descriptions: [foo0]"));
  ASSERT_TRUE(host_.wait_for_snapshot(session, has_ids({"foo0"}), kPatience));

  write_file(availability_file(), "OFFLINE");
  ASSERT_TRUE(host_.wait_for_snapshot(session, has_ids({}), kPatience));
  write_file(availability_file(), "ONLINE");
  ASSERT_TRUE(host_.wait_for_snapshot(session, has_ids({"foo0"}), kPatience));
  host_.stop(session);

  // debugEcho reports only changes, so the history is exactly this.
  std::vector<std::vector<std::string>> history;
  for (const auto& snapshot : host_.snapshots(session)) history.push_back(ids_of(snapshot));
  EXPECT_EQ(history, (std::vector<std::vector<std::string>>{{"foo0"}, {}, {"foo0"}}));
}

TEST_F(FakeHostWithDebugEcho, WaitsForAConditionOverTheHistory) {
  write_file(availability_file(), "OFFLINE");
  auto session = host_.start(request("descriptions: [foo0]"));
  ASSERT_TRUE(host_.wait_for_snapshot(session, has_ids({}), kPatience));
  write_file(availability_file(), "ONLINE");
  EXPECT_TRUE(host_.wait_for_history(
      session, [](const auto& snapshots) { return snapshots.size() == 2; }, kPatience));
  host_.stop(session);
}

TEST_F(FakeHostWithDebugEcho, KeepsSessionsApart) {
  auto first = host_.start(request("descriptions: [a]"));
  auto second = host_.start(request("descriptions: [b, c]"));
  ASSERT_TRUE(host_.wait_for_snapshot(first, has_ids({"a"}), kPatience));
  ASSERT_TRUE(host_.wait_for_snapshot(second, has_ids({"b", "c"}), kPatience));
  host_.stop(first);
  host_.stop(second);
  EXPECT_TRUE(host_.violations().empty());
}

TEST_F(FakeHostWithDebugEcho, WaitReturnsFalseAtItsDeadline) {
  auto session = host_.start(request("descriptions: [foo0]"));
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(host_.wait_for_snapshot(session, has_ids({"never"}), 50ms));
  EXPECT_GE(std::chrono::steady_clock::now() - started, 50ms);

  const auto deadline = std::chrono::steady_clock::now() + 20ms;
  EXPECT_FALSE(host_.wait_for(
      session, [](const SessionRecord& r) { return r.stopped; }, deadline));
  EXPECT_GE(std::chrono::steady_clock::now(), deadline);
  host_.stop(session);
}

TEST_F(FakeHostWithDebugEcho, PassesOnTheHandlersRefusal) {
  try {
    host_.start(request("{{{ not yaml"));
    FAIL() << "start accepted invalid details";
  } catch (const dowser::host::HandlerCallError& e) {
    EXPECT_EQ(e.call(), "start_discovery");
    EXPECT_EQ(e.status(), DOWSER_ERR_INVALID_ARGUMENT);
    EXPECT_FALSE(e.message().empty());
  }
  EXPECT_THROW(host_.validate(request("{{{ not yaml")), dowser::host::HandlerCallError);
  EXPECT_NO_THROW(host_.validate(request("descriptions: [ok]")));
}

TEST_F(FakeHostWithDebugEcho, AFailedStartLeavesNoSessionToStop) {
  EXPECT_THROW(host_.start(request("{{{ not yaml")), dowser::host::HandlerCallError);
  auto session = host_.start(request("descriptions: [foo0]"));
  EXPECT_EQ(static_cast<size_t>(session), 1u);  // the failed start used id 0
  EXPECT_THROW(host_.stop(dowser::testkit::SessionId{0}), std::out_of_range);
  // host_ is destroyed with session still running and id 0 empty.
}

TEST_F(FakeHostWithDebugEcho, DestructorStopsRunningSessions) {
  auto session = host_.start(request("descriptions: [foo0]"));
  ASSERT_TRUE(host_.wait_for_snapshot(session, has_ids({"foo0"}), kPatience));
  // host_ goes out of scope still running it: must stop it, not hang or crash.
}

TEST(FakeHostLoading, ThrowsTheLoadersErrorForABadFile) {
  try {
    FakeHost host(std::filesystem::path("/nonexistent/libnothing.so"));
    FAIL() << "loaded a file that does not exist";
  } catch (const dowser::host::HandlerLoadError& e) {
    EXPECT_EQ(e.stage(), "permissions");
  }
}

// ---- a raw table linked into the test ----------------------------------------

// The simplest possible handler: it does nothing on its own and lets the test
// call the host's table with the handles it was given.
namespace probe {

struct Calls {
  const dowser_host_api* host = nullptr;
  dowser_host_ctx* context = nullptr;
  std::atomic<dowser_session_host*> last_session{nullptr};
  std::atomic<int> stops{0};
};
Calls calls;

dowser_status init(const dowser_host_api* host, dowser_host_ctx* context, dowser_str,
                   dowser_handler** out, char*, size_t) {
  calls.host = host;
  calls.context = context;
  *out = reinterpret_cast<dowser_handler*>(&calls);
  return DOWSER_OK;
}

void destroy(dowser_handler*) {}

dowser_status start(dowser_handler*, const dowser_discover_request*, dowser_session_host* session,
                    dowser_session** out, char*, size_t) {
  calls.last_session = session;
  *out = reinterpret_cast<dowser_session*>(session);
  return DOWSER_OK;
}

void stop(dowser_handler*, dowser_session*) { ++calls.stops; }

const dowser_handler_api api = {sizeof(dowser_handler_api),
                                DOWSER_ABI_VERSION_MAJOR,
                                DOWSER_ABI_VERSION_MINOR,
                                "probe",
                                "1.0.0",
                                0,
                                init,
                                destroy,
                                start,
                                stop,
                                nullptr};

dowser_status report(dowser_session_host* session, const std::vector<dowser::Device>& devices) {
  dowser::abi::DeviceViews views(devices);
  return calls.host->report_devices(session, views.data(), views.size());
}

}  // namespace probe

FakeHost::Options quiet() {
  FakeHost::Options options;
  options.print_violations = false;
  return options;
}

TEST(FakeHostWithLinkedInHandler, RecordsConcurrentReportsFromManyThreads) {
  FakeHost host(&probe::api);
  auto session = host.start({});
  auto* handle = probe::calls.last_session.load();
  constexpr int kThreads = 8;
  constexpr int kReportsEach = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, handle] {
      for (int n = 0; n < kReportsEach; ++n) {
        dowser::Device device;
        device.id = std::to_string(t) + "/" + std::to_string(n);
        probe::report(handle, {device});
      }
    });
  }
  for (auto& thread : threads) thread.join();

  auto snapshots = host.snapshots(session);
  ASSERT_EQ(snapshots.size(), static_cast<size_t>(kThreads * kReportsEach));
  // Each thread's reports are recorded in the order it made them.
  std::vector<int> next(kThreads, 0);
  for (const auto& snapshot : snapshots) {
    int t = std::stoi(snapshot.at(0).id);
    EXPECT_EQ(snapshot.at(0).id, std::to_string(t) + "/" + std::to_string(next[t]++));
  }
  host.stop(session);
}

TEST(FakeHostWithLinkedInHandler, RecordsErrorsAndLogLines) {
  FakeHost host(&probe::api);
  auto session = host.start({});
  probe::calls.host->log(probe::calls.context, DOWSER_LOG_WARN, dowser::abi::view("careful"));
  probe::calls.host->report_error(probe::calls.last_session, DOWSER_ERR_GENERIC,
                                  dowser::abi::view("bus vanished"));
  host.stop(session);

  auto errors = host.errors(session);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code, DOWSER_ERR_GENERIC);
  EXPECT_EQ(errors[0].message, "bus vanished");
  auto logs = host.logs();
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].level, DOWSER_LOG_WARN);
  EXPECT_EQ(logs[0].text, "careful");
}

// log_session (ABI 1.1): recorded with the session it is about; after
// stop_discovery returned it is a late call, as a report is (rule T4).
TEST(FakeHostWithLinkedInHandler, RecordsASessionsLogLinesWithTheSession) {
  FakeHost::Options options;
  options.print_violations = false;
  FakeHost host(&probe::api, options);
  host.start({});
  auto second = host.start({});
  dowser_session_host* handle = probe::calls.last_session;
  probe::calls.host->log_session(handle, DOWSER_LOG_INFO, dowser::abi::view("about the second"));
  host.stop(second);
  probe::calls.host->log_session(handle, DOWSER_LOG_INFO, dowser::abi::view("too late"));

  auto logs = host.logs();
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].text, "about the second");
  EXPECT_EQ(logs[0].session, std::optional(second));
  EXPECT_EQ(host.record(second).late_calls, std::vector<std::string>{"log_session"});
  EXPECT_EQ(
      host.violations(),
      std::vector<std::string>{"session 1 of probe: log_session after stop_discovery returned"});
}

// A FakeHost posing as a 1.0 host (its policy) passes a 1.0 table: a C
// handler can test that it checks abi_minor before using log_session (V4).
TEST(FakeHostWithLinkedInHandler, PosingAsAnOlderHostPassesThatHostsTable) {
  FakeHost::Options options;
  options.policy.host_abi_minor = 0;
  dowser_handler_api api_1_0 = probe::api;
  api_1_0.abi_minor = 0;
  FakeHost host(&api_1_0, options);
  EXPECT_EQ(probe::calls.host->abi_minor, 0);
  EXPECT_EQ(probe::calls.host->struct_size, offsetof(dowser_host_api, log_session));
  EXPECT_EQ(probe::calls.host->log_session, nullptr);

  FakeHost current(&probe::api);
  EXPECT_EQ(probe::calls.host->abi_minor, DOWSER_ABI_VERSION_MINOR);
  EXPECT_EQ(probe::calls.host->struct_size, sizeof(dowser_host_api));
  EXPECT_NE(probe::calls.host->log_session, nullptr);
}

TEST(FakeHostWithLinkedInHandler, PassesEachLogLineOnAsItArrives) {
  std::vector<std::string> passed_on;
  FakeHost::Options options;
  options.on_log = [&](const dowser::testkit::LogLine& line) {
    passed_on.push_back(std::to_string(line.level) + " " + line.text);
  };
  FakeHost host(&probe::api, options);
  probe::calls.host->log(probe::calls.context, DOWSER_LOG_INFO, dowser::abi::view("one"));
  EXPECT_EQ(passed_on, std::vector<std::string>{std::to_string(DOWSER_LOG_INFO) + " one"});
  probe::calls.host->log(probe::calls.context, DOWSER_LOG_ERROR, dowser::abi::view("two"));
  EXPECT_EQ(passed_on.size(), 2u);
  EXPECT_EQ(host.logs().size(), 2u);  // recorded as well
}

// The host's rule (handler_registry), so the same as in dowserd.
TEST(FakeHostWithLinkedInHandler, RecordsALineWithAnInvalidLevelAsAWarningThatSaysSo) {
  FakeHost host(&probe::api);
  probe::calls.host->log(probe::calls.context, 99, dowser::abi::view("odd"));
  auto logs = host.logs();
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].level, DOWSER_LOG_WARN);
  EXPECT_EQ(logs[0].text,
            "odd (logged with invalid level 99, not one of DOWSER_LOG_TRACE..DOWSER_LOG_ERROR)");
}

// A hand-written table whose stop lets an exception out breaks rule T6.
TEST(FakeHostWithLinkedInHandler, AStopThatThrowsIsAViolation) {
  dowser_handler_api throwing = probe::api;
  throwing.stop_discovery = [](dowser_handler*, dowser_session*) {
    throw std::runtime_error("stop went wrong");
  };
  FakeHost host(&throwing, quiet());
  auto session = host.start({});
  host.stop(session);
  const std::string why =
      "stop_discovery threw a C++ exception across the C ABI (rule T6): stop went wrong";
  EXPECT_EQ(host.record(session).stop_failure, why);
  EXPECT_EQ(host.violations(), std::vector<std::string>{"session 0 of probe: " + why});
}

TEST(FakeHostWithLinkedInHandler, AReportAfterStopIsALoudViolation) {
  FakeHost host(&probe::api);
  auto session = host.start({});
  auto* handle = probe::calls.last_session.load();
  host.stop(session);

  ::testing::internal::CaptureStderr();
  EXPECT_EQ(probe::report(handle, {}), DOWSER_ERR_STOPPED);
  std::string printed = ::testing::internal::GetCapturedStderr();

  ASSERT_EQ(host.violations().size(), 1u);
  EXPECT_NE(host.violations()[0].find("report_devices after stop_discovery returned"),
            std::string::npos)
      << host.violations()[0];
  EXPECT_NE(printed.find("CONTRACT VIOLATION"), std::string::npos) << printed;
  EXPECT_EQ(host.record(session).late_calls.size(), 1u);
  EXPECT_TRUE(host.snapshots(session).empty());
  EXPECT_TRUE(host.wait_for_violation(0ms));
}

// A thread that a failed start_discovery left running must not report: the
// fake host tells it as a violation (it used to drop it without a word).
TEST(FakeHostWithLinkedInHandler, AReportAfterAFailedStartIsAViolation) {
  dowser_handler_api failing = probe::api;
  failing.start_discovery = [](dowser_handler*, const dowser_discover_request*,
                               dowser_session_host* session, dowser_session**, char*, size_t) {
    probe::calls.last_session = session;  // as a thread it started would keep it
    return DOWSER_ERR_GENERIC;
  };
  FakeHost host(&failing, quiet());
  EXPECT_ANY_THROW(host.start({}));
  EXPECT_EQ(probe::report(probe::calls.last_session.load(), {}), DOWSER_ERR_STOPPED);
  ASSERT_EQ(host.violations().size(), 1u);
  EXPECT_NE(host.violations()[0].find("report_devices after start_discovery failed (rule T4)"),
            std::string::npos)
      << host.violations()[0];
}

TEST(FakeHostWithLinkedInHandler, AMalformedReportIsAViolation) {
  FakeHost host(&probe::api, quiet());
  auto session = host.start({});
  dowser_device device{};
  device.struct_size = 4;  // too small to be the array's stride (rule V3)
  probe::calls.host->report_devices(probe::calls.last_session, &device, 1);
  host.stop(session);

  EXPECT_EQ(host.record(session).bad_reports.size(), 1u);
  EXPECT_EQ(host.violations().size(), 1u);
}

// What dowserd would leave out of the snapshot FakeHost leaves out too, and
// says why, in the host's words.
TEST(FakeHostWithLinkedInHandler, ADeviceThatBreaksTheDeviceRulesIsLeftOutAndAViolation) {
  FakeHost host(&probe::api, quiet());
  auto session = host.start({});
  dowser_device devices[2] = {};
  devices[0].struct_size = devices[1].struct_size = sizeof devices[0];
  devices[0].id = dowser::abi::view("good");
  devices[1].id = dowser::abi::view("bad");
  devices[1].sharing = 99;  // no such value
  EXPECT_EQ(probe::calls.host->report_devices(probe::calls.last_session, devices, 2), DOWSER_OK);
  host.stop(session);

  const SessionRecord record = host.record(session);
  ASSERT_EQ(record.snapshots.size(), 1u);
  EXPECT_EQ(ids_of(record.snapshots[0]), std::vector<std::string>{"good"});
  ASSERT_EQ(record.left_out.size(), 1u);
  ASSERT_EQ(record.left_out[0].size(), 1u);
  EXPECT_EQ(record.left_out[0][0].problems,
            std::vector<std::string>{
                "device \"bad\": sharing 99 is not 0 (handler default), 1 (local) or 2 (shared)"});
  ASSERT_EQ(host.violations().size(), 1u);
  EXPECT_NE(host.violations()[0].find("device left out of a snapshot: device \"bad\": sharing 99"),
            std::string::npos)
      << host.violations()[0];
}

TEST(FakeHostWithLinkedInHandler, DestructorStopsEverySessionStillRunning) {
  int stops_before = probe::calls.stops;
  {
    FakeHost host(&probe::api);
    host.stop(host.start({}));
    host.start({});
    host.start({});
  }
  EXPECT_EQ(probe::calls.stops - stops_before, 3);
}

TEST(FakeHostWithLinkedInHandler, RefusesAnUnknownSession) {
  FakeHost host(&probe::api);
  EXPECT_THROW(host.stop(dowser::testkit::SessionId{7}), std::out_of_range);
}

}  // namespace
