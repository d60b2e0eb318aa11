// The C++ SDK (handler.hpp) seen from the host's side of the C ABI: a handler
// class defined here is exported with DOWSER_HANDLER and driven through the
// table the macro builds, by the test kit's FakeHost (the loader's host
// table). Covers the trampolines (exceptions become status codes and
// messages), the Reporter (thread-safe, harmless after stop) and the
// PollingSession (periodic scan, reports only on change).
#include <dowser/handler.hpp>
#include <dowser/testkit.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using dowser::testkit::FakeHost;
using dowser::testkit::SessionId;
using dowser::testkit::Snapshot;

constexpr auto kPatience = 10s;  // only a broken SDK waits this long

// What the scripted handler's scan returns; the test changes it.
struct ScanScript {
  std::mutex mutex;
  std::condition_variable scanned;
  std::vector<std::string> ids;
  std::string failure;  // non-empty: the scan throws this
  int scans = 0;
};

// Shared between the handler (which runs on the SDK's threads) and the test.
struct Globals {
  ScanScript scan;
  std::string init_config;
  std::mutex reporter_mutex;
  dowser::Reporter reporter;                              // the last session's
  std::atomic<dowser::PollingSession*> polling{nullptr};  // the last polling session
};
Globals globals;

dowser::Device device(const std::string& id) { return dowser::Device{id, {{"ID", id}}, {}, {}}; }

// A session that does nothing: its reports come from the test's threads.
class IdleSession final : public dowser::Session {};

// Does what the discovery details say, so each test picks the behaviour.
class ScriptedHandler final : public dowser::Handler {
 public:
  explicit ScriptedHandler(const dowser::InitContext& context) {
    globals.init_config = context.config;
    context.host.info("scripted handler created");
    if (context.config == "fail") throw dowser::Error(DOWSER_ERR_UNSUPPORTED, "config says fail");
  }

  void validate(const dowser::DiscoverRequest& request) override { act(request.discovery_details); }

  std::unique_ptr<dowser::Session> start(const dowser::DiscoverRequest& request,
                                         dowser::Reporter reporter) override {
    {
      std::lock_guard lock(globals.reporter_mutex);
      globals.reporter = reporter;  // also a failing start's, as a thread it started would keep
    }
    act(request.discovery_details);
    if (request.discovery_details == "no session") return nullptr;
    if (request.discovery_details != "poll") return std::make_unique<IdleSession>();
    auto interval = std::chrono::milliseconds(std::stoi(request.property_or("interval_ms", "10")));
    auto session = std::make_unique<dowser::PollingSession>(reporter, interval, scan);
    globals.polling = session.get();
    return session;
  }

 private:
  static void act(const std::string& details) {
    if (details == "invalid") throw dowser::InvalidArgument("details are invalid");
    if (details == "error ok") throw dowser::Error(DOWSER_OK, "an error with status OK");
    if (details == "runtime") throw std::runtime_error("something broke");
    if (details == "bad alloc") throw std::bad_alloc();
    if (details == "int") throw 42;
  }

  static std::vector<dowser::Device> scan() {
    std::vector<dowser::Device> devices;
    std::string failure;
    {
      std::lock_guard lock(globals.scan.mutex);
      ++globals.scan.scans;
      failure = globals.scan.failure;
      for (const auto& id : globals.scan.ids) devices.push_back(device(id));
    }
    globals.scan.scanned.notify_all();
    if (failure == "int") throw 42;  // not a std::exception
    if (!failure.empty()) throw std::runtime_error(failure);
    return devices;
  }
};

// A handler that does not override validate: the SDK offers no validate_request.
class PlainHandler final : public dowser::Handler {
 public:
  std::unique_ptr<dowser::Session> start(const dowser::DiscoverRequest&,
                                         dowser::Reporter) override {
    return std::make_unique<IdleSession>();
  }
};

// Overrides validate and has another overload of the name: still found.
class OverloadedValidateHandler final : public dowser::Handler {
 public:
  void validate(const dowser::DiscoverRequest& request) override {
    if (request.discovery_details != "fine") throw dowser::InvalidArgument("not fine");
  }
  void validate(int) {}
  std::unique_ptr<dowser::Session> start(const dowser::DiscoverRequest&,
                                         dowser::Reporter) override {
    return std::make_unique<IdleSession>();
  }
};

// Only an unrelated overload (it hides Handler::validate, which stays the
// one called): no validate_request, and it builds.
class UnrelatedValidateHandler final : public dowser::Handler {
 public:
  void validate(int) {}
  std::unique_ptr<dowser::Session> start(const dowser::DiscoverRequest&,
                                         dowser::Reporter) override {
    return std::make_unique<IdleSession>();
  }
};

}  // namespace

DOWSER_HANDLER(ScriptedHandler, "scripted", "2.3.4", DOWSER_HANDLER_FLAG_SHARED_DEVICES)

namespace {

const dowser_handler_api* scripted_api() {
  char err[DOWSER_MAX_ERRLEN] = {};
  return dowser_get_handler_api(DOWSER_ABI_VERSION_MAJOR, DOWSER_ABI_VERSION_MINOR, err,
                                sizeof err);
}

FakeHost::Options quiet() {
  FakeHost::Options options;
  options.print_violations = false;
  return options;
}

std::vector<std::string> ids_of(const Snapshot& snapshot) {
  std::vector<std::string> ids;
  for (const auto& d : snapshot) ids.push_back(d.id);
  return ids;
}

dowser::Reporter last_reporter() {
  std::lock_guard lock(globals.reporter_mutex);
  return globals.reporter;
}

void set_scan(std::vector<std::string> ids, std::string failure = {}) {
  std::lock_guard lock(globals.scan.mutex);
  globals.scan.ids = std::move(ids);
  globals.scan.failure = std::move(failure);
}

// Waits until the scan has run `more` times after now.
bool scans_pass(int more) {
  std::unique_lock lock(globals.scan.mutex);
  const int target = globals.scan.scans + more;
  return globals.scan.scanned.wait_for(lock, kPatience,
                                       [target] { return globals.scan.scans >= target; });
}

// The error a start with these details ends in.
dowser::host::HandlerCallError start_error(FakeHost& host, const std::string& details) {
  try {
    host.start({details, {}});
  } catch (const dowser::host::HandlerCallError& e) {
    return e;
  }
  ADD_FAILURE() << "start accepted '" << details << "'";
  return {"", DOWSER_OK, ""};
}

// ---- the table the macro exports -----------------------------------------------

TEST(CppSdkTable, DescribesTheClassAndNegotiatesTheVersion) {
  const dowser_handler_api* api = scripted_api();
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->struct_size, sizeof(dowser_handler_api));
  EXPECT_EQ(api->abi_major, DOWSER_ABI_VERSION_MAJOR);
  EXPECT_EQ(api->abi_minor, DOWSER_ABI_VERSION_MINOR);
  EXPECT_STREQ(api->name, "scripted");
  EXPECT_STREQ(api->version, "2.3.4");
  EXPECT_EQ(api->flags, DOWSER_HANDLER_FLAG_SHARED_DEVICES);
  EXPECT_NE(api->validate_request, nullptr) << "the class overrides validate";

  char err[DOWSER_MAX_ERRLEN] = {};
  EXPECT_EQ(dowser_get_handler_api(DOWSER_ABI_VERSION_MAJOR + 1, 0, err, sizeof err), nullptr);
  EXPECT_NE(std::string(err).find("host offers " + std::to_string(DOWSER_ABI_VERSION_MAJOR + 1)),
            std::string::npos)
      << err;
  EXPECT_EQ(dowser_get_handler_api(DOWSER_ABI_VERSION_MAJOR + 1, 0, nullptr, 0), nullptr)
      << "no error buffer is fine too";
}

TEST(CppSdkTable, OffersValidateOnlyWhenTheClassOverridesIt) {
  static const dowser_handler_api plain = dowser::detail::make_api<PlainHandler>("plain", "1", 0);
  EXPECT_EQ(plain.validate_request, nullptr);
  FakeHost host(&plain);
  EXPECT_FALSE(host.handler().has_validate());
  EXPECT_NO_THROW(host.validate({"anything", {}})) << "the host skips a missing validate";

  static const dowser_handler_api overloaded =
      dowser::detail::make_api<OverloadedValidateHandler>("overloaded", "1", 0);
  ASSERT_NE(overloaded.validate_request, nullptr) << "another overload does not hide the override";
  FakeHost checking(&overloaded);
  EXPECT_NO_THROW(checking.validate({"fine", {}}));
  EXPECT_THROW(checking.validate({"other", {}}), dowser::host::HandlerCallError);

  static const dowser_handler_api unrelated =
      dowser::detail::make_api<UnrelatedValidateHandler>("unrelated", "1", 0);
  EXPECT_EQ(unrelated.validate_request, nullptr) << "validate(int) overrides nothing";
}

TEST(CppSdkTable, TheHostSeesTheClassFlagsAndName) {
  FakeHost host(scripted_api());
  EXPECT_EQ(host.handler().name(), "scripted");
  EXPECT_TRUE(host.handler().shares_devices());
  auto session = host.start({"idle", {}});
  ASSERT_TRUE(last_reporter().report({device("a")}));
  EXPECT_EQ(host.latest_snapshot(session)->at(0).sharing, dowser::Sharing::shared);
  host.stop(session);
}

// ---- trampolines ---------------------------------------------------------------

TEST(CppSdkTrampolines, TheConstructorGetsTheConfigAndTheHost) {
  FakeHost::Options options;
  options.config = "some config";
  FakeHost host(scripted_api(), options);
  EXPECT_EQ(globals.init_config, "some config");
  auto logs = host.logs();
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].level, DOWSER_LOG_INFO);
  EXPECT_EQ(logs[0].text, "scripted handler created");
}

TEST(CppSdkTrampolines, AConstructorThatThrowsFailsInit) {
  FakeHost::Options options;
  options.config = "fail";
  try {
    FakeHost host(scripted_api(), options);
    FAIL() << "init succeeded";
  } catch (const dowser::host::HandlerCallError& e) {
    EXPECT_EQ(e.call(), "init");
    EXPECT_EQ(e.status(), DOWSER_ERR_UNSUPPORTED);
    EXPECT_EQ(e.message(), "config says fail");
  }
}

TEST(CppSdkTrampolines, EveryExceptionFromStartBecomesAStatusAndAMessage) {
  FakeHost host(scripted_api());
  struct Case {
    std::string details;
    dowser_status status;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"invalid", DOWSER_ERR_INVALID_ARGUMENT, "details are invalid"},
           {"error ok", DOWSER_ERR_GENERIC, "an error with status OK"},
           {"runtime", DOWSER_ERR_GENERIC, "something broke"},
           {"bad alloc", DOWSER_ERR_NO_MEMORY, "out of memory"},
           {"int", DOWSER_ERR_GENERIC, "unknown exception"},
           {"no session", DOWSER_ERR_GENERIC, "start returned no session"},
       }) {
    auto error = start_error(host, c.details);
    EXPECT_EQ(error.call(), "start_discovery") << c.details;
    EXPECT_EQ(error.status(), c.status) << c.details;
    EXPECT_EQ(error.message(), c.message) << c.details;
  }
  EXPECT_TRUE(host.violations().empty());
}

TEST(CppSdkTrampolines, ValidateRefusesWithTheSameStatusAndMessage) {
  FakeHost host(scripted_api());
  EXPECT_NO_THROW(host.validate({"fine", {}}));
  try {
    host.validate({"invalid", {}});
    FAIL() << "validate accepted invalid details";
  } catch (const dowser::host::HandlerCallError& e) {
    EXPECT_EQ(e.call(), "validate_request");
    EXPECT_EQ(e.status(), DOWSER_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(e.message(), "details are invalid");
  }
}

// ---- Reporter ------------------------------------------------------------------

TEST(CppSdkReporter, CopiesReportFromManyThreadsAtOnce) {
  FakeHost host(scripted_api());
  auto session = host.start({"idle", {}});
  const dowser::Reporter reporter = last_reporter();
  constexpr int kThreads = 8, kReports = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([reporter, t] {  // each thread its own copy
      for (int n = 0; n < kReports; ++n)
        EXPECT_TRUE(reporter.report({device(std::to_string(t) + "/" + std::to_string(n))}));
    });
  }
  for (auto& thread : threads) thread.join();
  host.stop(session);
  EXPECT_EQ(host.snapshots(session).size(), size_t{kThreads * kReports});
  EXPECT_TRUE(host.violations().empty());
}

// A Reporter's lines are about its session (log_session, ABI 1.1), so the
// host can say which; host() stays the handler's own log. Once the session
// stopped, its lines are the handler's: the SDK keeps rule T4 for them too,
// and says, once, that a thread outlived its session.
TEST(CppSdkReporter, LogsLinesAboutItsSessionUntilItStops) {
  FakeHost host(scripted_api(), quiet());
  auto session = host.start({"idle", {}});
  const dowser::Reporter reporter = last_reporter();
  reporter.warn("camera 3 is slow");
  reporter.host().info("handler-wide");
  host.stop(session);
  reporter.error("after the stop");
  reporter.info("after the stop again");

  auto logs = host.logs();
  ASSERT_EQ(logs.size(), 6u);
  EXPECT_EQ(logs[0].text, "scripted handler created");  // by init
  logs.erase(logs.begin());
  EXPECT_EQ(logs[0].text, "camera 3 is slow");
  EXPECT_EQ(logs[0].level, DOWSER_LOG_WARN);
  EXPECT_EQ(logs[0].session, std::optional(session));
  EXPECT_EQ(logs[1].text, "handler-wide");
  EXPECT_EQ(logs[1].session, std::nullopt);
  EXPECT_EQ(logs[2].text, dowser::kLogAfterStopWarning);
  EXPECT_EQ(logs[3].text, "after the stop");
  EXPECT_EQ(logs[3].session, std::nullopt);
  EXPECT_EQ(logs[4].text, "after the stop again") << "warned of once";
  EXPECT_TRUE(host.record(session).late_calls.empty());
  EXPECT_TRUE(host.violations().empty());
}

TEST(CppSdkReporter, AfterStopReportsAreDroppedBeforeTheyReachTheHost) {
  FakeHost host(scripted_api(), quiet());
  auto session = host.start({"idle", {}});
  const dowser::Reporter reporter = last_reporter();
  ASSERT_TRUE(reporter.report({device("a")}));
  host.stop(session);

  EXPECT_FALSE(reporter.report({device("b")})) << "tells the handler to stop producing";
  EXPECT_FALSE(reporter.report({device("c")}));
  reporter.fail(DOWSER_ERR_GENERIC, "too late");
  auto record = host.record(session);
  EXPECT_EQ(record.snapshots.size(), 1u);
  EXPECT_TRUE(record.errors.empty());
  EXPECT_TRUE(record.late_calls.empty()) << "the SDK, not the handler author, keeps rule T4";
  EXPECT_TRUE(host.violations().empty());
  // But the author learns of it, once.
  auto logs = host.logs();
  auto warnings = std::count_if(logs.begin(), logs.end(), [](const dowser::testkit::LogLine& l) {
    return l.level == DOWSER_LOG_WARN && l.text == dowser::kReportAfterStopWarning;
  });
  EXPECT_EQ(warnings, 1);
}

// A start that failed has no session to stop: what a thread it started
// reports is dropped by the SDK, and the author is told once, as after a stop
// (the host would only see reports for a session it never had).
TEST(CppSdkReporter, AFailedStartsReporterDropsEverythingAndSaysSo) {
  FakeHost host(scripted_api(), quiet());
  for (const char* details : {"invalid", "no session"}) {
    (void)start_error(host, details);
    const dowser::Reporter reporter = last_reporter();
    EXPECT_FALSE(reporter.report({device("a")})) << details;
    EXPECT_FALSE(reporter.report({device("b")})) << details;
  }
  auto logs = host.logs();
  auto warnings = std::count_if(logs.begin(), logs.end(), [](const dowser::testkit::LogLine& l) {
    return l.level == DOWSER_LOG_WARN && l.text == dowser::kReportAfterStopWarning;
  });
  EXPECT_EQ(warnings, 2) << "once per failed start";
  EXPECT_TRUE(host.violations().empty());
}

TEST(CppSdkReporter, ADefaultConstructedReporterDropsEverything) {
  const dowser::Reporter reporter;
  EXPECT_FALSE(reporter.report({device("a")}));
  reporter.fail(DOWSER_ERR_GENERIC, "nowhere to go");
  // Its log goes nowhere too, and detaching it is harmless (both crashed).
  reporter.host().trace("nowhere");
  reporter.host().debug("nowhere");
  reporter.host().info("nowhere");
  reporter.host().warn("nowhere");
  reporter.detach();
  EXPECT_FALSE(reporter.report({device("b")}));
}

TEST(CppSdkReporter, ThreadsStillReportingAcrossStopNeverReachTheHostLate) {
  FakeHost host(scripted_api(), quiet());
  auto session = host.start({"idle", {}});
  const dowser::Reporter reporter = last_reporter();
  constexpr int kAfterStop = 50;  // reports each thread makes once stop has returned
  std::atomic<bool> stopped{false};
  std::atomic<int> accepted_after_stop{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, reporter] {
      while (!stopped) reporter.report({device("x")});  // racing with stop
      for (int n = 0; n < kAfterStop; ++n)
        if (reporter.report({device("x")})) ++accepted_after_stop;
    });
  }
  ASSERT_TRUE(host.wait_for_snapshot(
      session, [](const Snapshot&) { return true; }, kPatience));
  host.stop(session);
  stopped = true;
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(accepted_after_stop, 0);
  EXPECT_TRUE(host.record(session).late_calls.empty());
  EXPECT_TRUE(host.violations().empty());
}

// ---- PollingSession ---------------------------------------------------------------

class CppSdkPolling : public ::testing::Test {
 protected:
  CppSdkPolling() { set_scan({"a"}); }
  ~CppSdkPolling() override {
    if (session_) host_.stop(*session_);
    EXPECT_TRUE(host_.violations().empty());
  }
  void start(const std::string& interval_ms = "10") {
    session_ = host_.start({"poll", {{"interval_ms", interval_ms}}});
  }
  std::vector<std::vector<std::string>> history() const {
    std::vector<std::vector<std::string>> result;
    for (const auto& snapshot : host_.snapshots(*session_)) result.push_back(ids_of(snapshot));
    return result;
  }
  bool shows(std::vector<std::string> ids) {
    return host_.wait_for_snapshot(
        *session_, [&](const Snapshot& s) { return ids_of(s) == ids; }, kPatience);
  }

  FakeHost host_{scripted_api()};
  std::optional<SessionId> session_;
};

TEST_F(CppSdkPolling, RescansEveryIntervalAndReportsOnlyChanges) {
  start();
  ASSERT_TRUE(shows({"a"}));
  ASSERT_TRUE(scans_pass(5)) << "the scan runs again every interval";
  EXPECT_EQ(history(), (std::vector<std::vector<std::string>>{{"a"}})) << "no change, no report";

  set_scan({"a", "b"});
  ASSERT_TRUE(shows({"a", "b"}));
  ASSERT_TRUE(scans_pass(5));
  set_scan({});
  ASSERT_TRUE(shows({}));
  ASSERT_TRUE(scans_pass(5));
  EXPECT_EQ(history(), (std::vector<std::vector<std::string>>{{"a"}, {"a", "b"}, {}}));
}

TEST_F(CppSdkPolling, WakeScansAtOnceWhateverTheInterval) {
  start("86400000");  // a day: only wake() can bring the change
  ASSERT_TRUE(shows({"a"}));
  set_scan({"b"});
  globals.polling.load()->wake();
  EXPECT_TRUE(shows({"b"}));
}

TEST_F(CppSdkPolling, AFailingScanIsLoggedOnceAndTheLastReportStands) {
  start();
  ASSERT_TRUE(shows({"a"}));
  set_scan({"ignored"}, "bus unreadable");
  ASSERT_TRUE(scans_pass(5));
  set_scan({"a"});
  ASSERT_TRUE(scans_pass(2));
  EXPECT_EQ(history(), (std::vector<std::vector<std::string>>{{"a"}}))
      << "a failed scan is not an empty list";
  auto logs = host_.logs();
  auto failures = std::count_if(logs.begin(), logs.end(), [&](const dowser::testkit::LogLine& l) {
    return l.level == DOWSER_LOG_WARN && l.text == "scan failed: bus unreadable" &&
           l.session == session_;
  });
  EXPECT_EQ(failures, 1) << "once per distinct error, not once per interval, about the session";
}

TEST_F(CppSdkPolling, AScanThrowingWhatIsNotAStdExceptionFailsOnlyThatScan) {
  start();
  ASSERT_TRUE(shows({"a"}));
  set_scan({"ignored"}, "int");
  ASSERT_TRUE(scans_pass(3));
  set_scan({"b"});
  ASSERT_TRUE(shows({"b"})) << "the session scans on";
  auto logs = host_.logs();
  auto failures = std::count_if(logs.begin(), logs.end(), [](const dowser::testkit::LogLine& l) {
    return l.level == DOWSER_LOG_WARN &&
           l.text == "scan failed: an exception that is not a std::exception";
  });
  EXPECT_EQ(failures, 1);
}

}  // namespace
