// dowser test kit: a fake host for testing discovery handlers.
//
// FakeHost loads a handler exactly as dowserd does (dowser::host::load_handler
// and the same host function table), initialises one instance of it, and
// records everything the handler sends back: every snapshot of every session,
// in order, errors, log lines, and contract violations (a report after
// stop_discovery returned, a malformed report, a device left out of a
// snapshot because it breaks the device rules of handler.h, a stop_discovery
// that threw). It does not
// depend on any test framework; with GoogleTest:
//
//   dowser::testkit::FakeHost host("path/to/libmy-handler.so");
//   auto session = host.start({"descriptions: [a]", {}});
//   ASSERT_TRUE(host.wait_for_snapshot(
//       session, [](const auto& snapshot) { return snapshot.size() == 1; },
//       std::chrono::seconds(5)));
//   host.stop(session);
//   EXPECT_TRUE(host.violations().empty()) << host.violations().front();
//
// A handler linked statically into the test is driven the same way:
//   FakeHost host(&my_handler_api);   // a const dowser_handler_api*
//
// Threading: every member may be called from any thread. The control calls
// (start, stop, validate) are serialised here, as the ABI requires (rule T1).
#pragma once

#include <dowser/handler.h>
#include <dowser/handler.hpp>
#include <handler_registry.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace dowser::testkit {

using Snapshot = host::Snapshot;

// Identifies one session started by a FakeHost; valid for that host only.
enum class SessionId : std::size_t {};

struct LogLine {
  int32_t level = DOWSER_LOG_INFO;  // DOWSER_LOG_*
  std::string text;
  // The session the line is about (logged with log_session, e.g. through
  // dowser::Reporter); none for a line of the handler's (log).
  std::optional<SessionId> session;
};

struct SessionError {
  dowser_status code = DOWSER_OK;
  std::string message;
};

// Everything recorded for one session, in arrival order.
struct SessionRecord {
  std::vector<Snapshot> snapshots;
  std::vector<SessionError> errors;
  std::vector<std::string> bad_reports;  // reports the host refused (malformed)
  // For each snapshot that left devices out (they break the device rules,
  // host/src/device_rules), those devices and why, in arrival order.
  std::vector<std::vector<host::InvalidDevice>> left_out;
  // Calls after stop_discovery returned (log_session too), or from a thread
  // a failed start_discovery left running (then only in violations()).
  std::vector<std::string> late_calls;
  // Why stop_discovery failed (it threw across the C ABI), if it did.
  std::optional<std::string> stop_failure;
  bool stopped = false;  // stop() has returned
};

namespace detail {
struct Recorder;  // what the sinks record into; defined in the .cpp
}

struct FakeHostOptions {
  std::string config;            // handler-level configuration passed to init
  host::LoadPolicy policy;       // file ownership and host ABI version
  bool print_violations = true;  // also write each violation to stderr at once
  // Also called with each log line as it arrives, on the handler's thread and
  // with none of the recorder's locks held: e.g. to show it at once, or to
  // keep it somewhere that outlives a process the handler crashes. A line
  // about a session comes while the host holds that session (as a report
  // does), so stopping it from here would deadlock: hand that to another
  // thread.
  std::function<void(const LogLine&)> on_log;
};

class FakeHost {
 public:
  using Options = FakeHostOptions;

  // Loads the handler file with dowser::host::load_handler, then calls init.
  // Throws host::HandlerLoadError or host::HandlerCallError.
  explicit FakeHost(const std::filesystem::path& handler_file, const Options& options = {});
  // Adopts a table linked into the test (dowser::host::adopt_handler).
  explicit FakeHost(const dowser_handler_api* api, const Options& options = {});
  // Drives an already loaded handler.
  explicit FakeHost(std::shared_ptr<const host::LoadedHandler> handler,
                    const Options& options = {});

  // Stops every running session, then destroys the handler instance.
  ~FakeHost();
  FakeHost(const FakeHost&) = delete;
  FakeHost& operator=(const FakeHost&) = delete;

  const host::LoadedHandler& handler() const noexcept;

  // Calls validate_request (if the handler has one). Throws host::HandlerCallError.
  void validate(const DiscoverRequest& request);
  // Calls start_discovery. Throws host::HandlerCallError.
  SessionId start(const DiscoverRequest& request);
  // Calls stop_discovery and blocks until it returns. Idempotent. The session
  // stays registered, so a report that arrives later is still caught.
  void stop(SessionId session);

  // Copies of what was recorded so far.
  SessionRecord record(SessionId session) const;
  std::vector<Snapshot> snapshots(SessionId session) const;
  std::optional<Snapshot> latest_snapshot(SessionId session) const;
  std::vector<SessionError> errors(SessionId session) const;
  // Every line the handler logged, its own and its sessions', in order.
  std::vector<LogLine> logs() const;
  // One line per contract violation of any session, e.g.
  // "session 2 of echo: report_devices after stop_discovery returned", or
  // "session 0 of echo: device left out of a snapshot: device "a": id ...".
  std::vector<std::string> violations() const;

  // Wait until the predicate holds or the timeout expires; return whether it
  // holds. Predicates run with the recorder's lock held: they must be quick
  // and must not call back into this FakeHost.
  using RecordPredicate = std::function<bool(const SessionRecord&)>;
  using SnapshotPredicate = std::function<bool(const Snapshot&)>;
  using HistoryPredicate = std::function<bool(const std::vector<Snapshot>&)>;
  bool wait_for(SessionId session, const RecordPredicate& predicate,
                std::chrono::milliseconds timeout) const;
  bool wait_for(SessionId session, const RecordPredicate& predicate,
                std::chrono::steady_clock::time_point deadline) const;
  // Over the newest snapshot; false while none has arrived.
  bool wait_for_snapshot(SessionId session, const SnapshotPredicate& predicate,
                         std::chrono::milliseconds timeout) const;
  // Over every snapshot so far, oldest first.
  bool wait_for_history(SessionId session, const HistoryPredicate& predicate,
                        std::chrono::milliseconds timeout) const;
  // Until any session records a violation.
  bool wait_for_violation(std::chrono::milliseconds timeout) const;

 private:
  struct Running;

  Running& running(SessionId session);

  Options options_;
  std::shared_ptr<detail::Recorder> recorder_;  // the sinks share it: it outlives late calls
  std::mutex control_mutex_;                    // serialises control calls (rule T1)
  std::unique_ptr<host::HandlerInstance> instance_;
  // Declared after instance_: sessions go first, and stopped ones stay until
  // then so that late reports still reach their sinks.
  std::vector<std::unique_ptr<Running>> sessions_;
};

}  // namespace dowser::testkit
