#include <dowser/testkit.hpp>

#include <condition_variable>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace dowser::testkit {
namespace detail {

// State shared by the FakeHost and its sinks. A sink may outlive the FakeHost
// (a handler that keeps reporting after everything stopped), so this is held
// by shared_ptr on both sides.
struct Recorder {
  Recorder(bool print, std::function<void(const LogLine&)> on_log_line)
      : print_violations(print), on_log(std::move(on_log_line)) {}

  // Passes the line on (without the lock: on_log may take its time), then
  // records it.
  void add_log(LogLine line) {
    if (on_log) on_log(line);
    {
      std::lock_guard lock(mutex);
      logs.push_back(std::move(line));
    }
    changed.notify_all();
  }

  void add_violation(std::size_t session, std::string_view what) {
    std::string line =
        "session " + std::to_string(session) + " of " + handler_name + ": " + std::string(what);
    // Loud on purpose: a violation must be visible even if no test looks.
    if (print_violations) std::cerr << "dowser-testkit: CONTRACT VIOLATION: " << line << std::endl;
    violations.push_back(std::move(line));
  }

  // Runs change on the session's record under the lock, then wakes waiters.
  template <typename Change>
  void update(std::size_t session, Change&& change) {
    {
      std::lock_guard lock(mutex);
      change(sessions.at(session));
    }
    changed.notify_all();
  }

  const bool print_violations;
  const std::function<void(const LogLine&)> on_log;
  std::string handler_name;  // set once before any session starts
  mutable std::mutex mutex;
  mutable std::condition_variable changed;
  std::vector<SessionRecord> sessions;  // indexed by SessionId
  std::vector<LogLine> logs;
  std::vector<std::string> violations;
};

}  // namespace detail

namespace {

using detail::Recorder;

// Records every call of one session, in order.
class RecordingSink final : public host::SessionSink {
 public:
  RecordingSink(std::shared_ptr<Recorder> recorder, std::size_t session)
      : recorder_(std::move(recorder)), session_(session) {}

  void on_snapshot(Snapshot snapshot) override {
    recorder_->update(session_, [&](SessionRecord& record) {
      // The loader should route these to on_late_call; double-check anyway.
      if (record.stopped) return note_late(record, "report_devices");
      record.snapshots.push_back(std::move(snapshot));
    });
  }

  void on_error(dowser_status code, std::string message) override {
    recorder_->update(session_, [&](SessionRecord& record) {
      if (record.stopped) return note_late(record, "report_error");
      record.errors.push_back({code, std::move(message)});
    });
  }

  void on_invalid_devices(const std::vector<host::InvalidDevice>& devices) override {
    if (devices.empty()) return;
    recorder_->update(session_, [&](SessionRecord& record) {
      if (record.stopped) return;  // on_snapshot tells of the late call
      for (const auto& device : devices)
        recorder_->add_violation(session_,
                                 "device left out of a snapshot: " + host::joined_problems(device));
      record.left_out.push_back(devices);
    });
  }

  void on_log(int32_t level, std::string_view text) override {
    recorder_->add_log({level, std::string(text), SessionId{session_}});
  }

  void on_late_call(std::string_view what) override {
    recorder_->update(session_, [&](SessionRecord& record) { note_late(record, what); });
  }

  void on_call_after_failed_start(std::string_view what) override {
    recorder_->update(session_, [&](SessionRecord& record) {
      note_late(record, what, "after start_discovery failed (rule T4)");
    });
  }

  // Late calls are still told once the session object is gone: a thread
  // that a failed start left running reports only then.
  std::shared_ptr<host::SessionSink> late_call_sink() const override {
    return std::make_shared<RecordingSink>(recorder_, session_);
  }

  void on_stop_failed(const std::string& reason) override {
    recorder_->update(session_, [&](SessionRecord& record) {
      recorder_->add_violation(session_, reason);
      record.stop_failure = reason;
    });
  }

  void on_bad_report(const std::string& reason) override {
    recorder_->update(session_, [&](SessionRecord& record) {
      recorder_->add_violation(session_, "malformed report: " + reason);
      record.bad_reports.push_back(reason);
    });
  }

 private:
  void note_late(SessionRecord& record, std::string_view what,
                 std::string_view when = "after stop_discovery returned") {
    recorder_->add_violation(session_, std::string(what) + " " + std::string(when));
    record.late_calls.emplace_back(what);
  }

  std::shared_ptr<Recorder> recorder_;
  std::size_t session_;
};

std::size_t index_of(SessionId session) { return static_cast<std::size_t>(session); }

}  // namespace

// A started session and the sink it reports into.
struct FakeHost::Running {
  std::shared_ptr<RecordingSink> sink;
  std::unique_ptr<host::DiscoverySession> session;
};

FakeHost::FakeHost(const std::filesystem::path& handler_file, const Options& options)
    : FakeHost(host::load_handler(handler_file, options.policy), options) {}

FakeHost::FakeHost(const dowser_handler_api* api, const Options& options)
    : FakeHost(host::adopt_handler("<linked-in handler>", api, options.policy), options) {}

FakeHost::FakeHost(std::shared_ptr<const host::LoadedHandler> handler, const Options& options)
    : options_(options),
      recorder_(std::make_shared<Recorder>(options_.print_violations, options_.on_log)) {
  if (!handler) throw std::invalid_argument("FakeHost: no handler");
  recorder_->handler_name = handler->name();
  auto log = [recorder = recorder_](int32_t level, std::string_view text) {
    recorder->add_log({level, std::string(text), std::nullopt});
  };
  instance_ = std::make_unique<host::HandlerInstance>(std::move(handler), log, options_.config);
}

FakeHost::~FakeHost() {
  std::lock_guard lock(control_mutex_);
  for (auto& running : sessions_)
    if (running) running->session->stop();  // null where a start failed
  // Sessions are destroyed before the instance (member order), which calls destroy.
}

const host::LoadedHandler& FakeHost::handler() const noexcept { return instance_->handler(); }

void FakeHost::validate(const DiscoverRequest& request) {
  std::lock_guard lock(control_mutex_);
  instance_->validate(request);
}

SessionId FakeHost::start(const DiscoverRequest& request) {
  std::lock_guard control(control_mutex_);
  std::size_t index = 0;
  {
    std::lock_guard lock(recorder_->mutex);
    index = recorder_->sessions.size();
    recorder_->sessions.emplace_back();
  }
  auto running = std::make_unique<Running>();
  running->sink = std::make_shared<RecordingSink>(recorder_, index);
  running->session = instance_->start(request, running->sink);
  // A failed start leaves an empty record behind; its index is never handed out.
  sessions_.resize(index + 1);
  sessions_[index] = std::move(running);
  return SessionId{index};
}

void FakeHost::stop(SessionId session) {
  std::lock_guard control(control_mutex_);
  running(session).session->stop();
  recorder_->update(index_of(session), [](SessionRecord& record) { record.stopped = true; });
}

FakeHost::Running& FakeHost::running(SessionId session) {
  std::size_t index = index_of(session);
  if (index >= sessions_.size() || !sessions_[index])
    throw std::out_of_range("FakeHost: unknown session " + std::to_string(index));
  return *sessions_[index];
}

SessionRecord FakeHost::record(SessionId session) const {
  std::lock_guard lock(recorder_->mutex);
  return recorder_->sessions.at(index_of(session));
}

std::vector<Snapshot> FakeHost::snapshots(SessionId session) const {
  std::lock_guard lock(recorder_->mutex);
  return recorder_->sessions.at(index_of(session)).snapshots;
}

std::optional<Snapshot> FakeHost::latest_snapshot(SessionId session) const {
  std::lock_guard lock(recorder_->mutex);
  const auto& snapshots = recorder_->sessions.at(index_of(session)).snapshots;
  if (snapshots.empty()) return std::nullopt;
  return snapshots.back();
}

std::vector<SessionError> FakeHost::errors(SessionId session) const {
  std::lock_guard lock(recorder_->mutex);
  return recorder_->sessions.at(index_of(session)).errors;
}

std::vector<LogLine> FakeHost::logs() const {
  std::lock_guard lock(recorder_->mutex);
  return recorder_->logs;
}

std::vector<std::string> FakeHost::violations() const {
  std::lock_guard lock(recorder_->mutex);
  return recorder_->violations;
}

bool FakeHost::wait_for(SessionId session, const RecordPredicate& predicate,
                        std::chrono::milliseconds timeout) const {
  return wait_for(session, predicate, std::chrono::steady_clock::now() + timeout);
}

bool FakeHost::wait_for(SessionId session, const RecordPredicate& predicate,
                        std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lock(recorder_->mutex);
  // Looked up on every wake-up: starting a session may move the records.
  auto holds = [&] { return predicate(recorder_->sessions.at(index_of(session))); };
  return recorder_->changed.wait_until(lock, deadline, holds);
}

bool FakeHost::wait_for_snapshot(SessionId session, const SnapshotPredicate& predicate,
                                 std::chrono::milliseconds timeout) const {
  return wait_for(
      session,
      [&](const SessionRecord& record) {
        return !record.snapshots.empty() && predicate(record.snapshots.back());
      },
      timeout);
}

bool FakeHost::wait_for_history(SessionId session, const HistoryPredicate& predicate,
                                std::chrono::milliseconds timeout) const {
  return wait_for(
      session, [&](const SessionRecord& record) { return predicate(record.snapshots); }, timeout);
}

bool FakeHost::wait_for_violation(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(recorder_->mutex);
  return recorder_->changed.wait_for(lock, timeout, [&] { return !recorder_->violations.empty(); });
}

}  // namespace dowser::testkit
