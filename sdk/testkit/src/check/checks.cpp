#include "checks.hpp"

#include "describe.hpp"
#include "isolation.hpp"

#include <dowser/testkit.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace dowser::check {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
using testkit::FakeHost;
using testkit::SessionId;
using testkit::SessionRecord;

constexpr int kCycles = 100;            // start-stop-100
constexpr int kLatencyRounds = 5;       // stop-latency
constexpr auto kSettleTime = 200ms;     // how long a session runs before a measured stop
constexpr auto kLateWindow = 200ms;     // how long to watch for reports after stop
constexpr int kConcurrentSessions = 4;  // concurrent-reports
constexpr auto kQuietAllowance = 10s;   // on top of one step, before a silent child is killed
constexpr std::string_view kInvalidDetails = "{{{ not yaml";

// Thrown inside a child: the check failed for the reason given.
class CheckFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a check body returns when it passes.
struct Passed {
  std::string detail;
  std::vector<std::string> warnings = {};
  json data = json::object();  // merged into the result: "handler", "devices"
};

using Body = std::function<Passed(const Settings&, Progress&)>;

struct Check {
  std::string_view name;
  std::string_view prerequisite;  // a check that must have passed; empty for none
  Body body;
};

// --- results ---------------------------------------------------------------

json passed_result(Passed passed) {
  json result = std::move(passed.data);
  result["passed"] = true;
  result["detail"] = std::move(passed.detail);
  result["warnings"] = std::move(passed.warnings);
  return result;
}

json failed_result(const std::string& detail) {
  return {{"passed", false}, {"detail", detail}, {"warnings", json::array()}};
}

// The result of a check body that threw; call only inside a catch block.
json failed_result_of_current_exception() {
  try {
    throw;
  } catch (const CheckFailed& e) {
    return failed_result(e.what());
  } catch (const host::HandlerLoadError& e) {
    return failed_result(describe(e));
  } catch (const host::HandlerCallError& e) {
    return failed_result(describe(e));
  } catch (const std::exception& e) {
    return failed_result(std::string("unexpected error in the checker: ") + e.what());
  } catch (...) {
    return failed_result("unexpected error in the checker");
  }
}

// --- driving the handler inside a child --------------------------------------

const char* log_level_name(int32_t level) {
  switch (level) {
    case DOWSER_LOG_TRACE:
      return "trace";
    case DOWSER_LOG_DEBUG:
      return "debug";
    case DOWSER_LOG_INFO:
      return "info";
    case DOWSER_LOG_WARN:
      return "warn";
    default:
      return "error";
  }
}

// Violations are reported as failures by the checks themselves. Each line the
// handler logs goes to the parent at once, "<level>: <text>" ("<level>:
// [session N] <text>" for a line about one session): the author's
// own words next to a failure are often what explains it, and a crash or a
// hang must not take them along.
FakeHost::Options checker_host(Progress& progress) {
  FakeHost::Options options;
  options.print_violations = false;
  options.on_log = [&progress](const testkit::LogLine& line) {
    std::string about;
    if (line.session)
      about = "[session " + std::to_string(static_cast<size_t>(*line.session)) + "] ";
    progress.log(std::string(log_level_name(line.level)) + ": " + about + line.text);
  };
  return options;
}

// destroy cannot fail: the host logs an exception out of it as the handler's
// error line, which fails the check (the instance is destroyed in each).
bool is_destroy_failure(const testkit::LogLine& line) {
  return line.level == DOWSER_LOG_ERROR &&
         line.text.starts_with("destroy " + std::string(host::kThrownAcrossAbi));
}

// Loads and initialises the handler, runs use, then destroys the instance.
// A failure ends the child at once: a session still running may be stuck,
// and nothing after the failure would change the verdict.
Passed with_host(const Settings& settings, Progress& progress,
                 const std::function<Passed(FakeHost&)>& use) {
  std::unique_ptr<FakeHost> fake_host;
  try {
    progress.phase("loading (dlopen, then dowser_get_handler_api)");
    auto handler = host::load_handler(settings.handler_file);
    progress.phase("init");
    std::optional<std::string> destroy_failure;  // set on this thread, in reset()
    FakeHost::Options options = checker_host(progress);
    options.on_log = [&destroy_failure, forward = options.on_log](const testkit::LogLine& line) {
      if (is_destroy_failure(line)) destroy_failure = line.text;
      forward(line);
    };
    fake_host = std::make_unique<FakeHost>(std::move(handler), options);
    Passed passed = use(*fake_host);
    progress.phase("destroy");
    fake_host.reset();
    if (destroy_failure) throw CheckFailed(*destroy_failure);
    return passed;
  } catch (...) {
    progress.finish(failed_result_of_current_exception());
  }
}

// A start that never returns is left to the child's watchdog; one that
// returns late fails here (rule T3).
SessionId start_session(FakeHost& host, const Settings& settings, Progress& progress,
                        const std::string& context = {}) {
  progress.phase(context + "start_discovery");
  const auto started = Clock::now();
  SessionId session;
  try {
    session = host.start(settings.request);
  } catch (const host::HandlerCallError& e) {
    throw CheckFailed(context + describe(e));
  }
  const auto took = Clock::now() - started;
  if (took > settings.start_timeout) {
    throw CheckFailed(context + "start_discovery took " + milliseconds_text(took) + ", over " +
                      milliseconds_text(settings.start_timeout) +
                      " (--start-timeout-ms): rule T3, start_discovery returns promptly and "
                      "does longer work (waiting on devices or the network) on the handler's "
                      "own threads");
  }
  return session;
}

// Stops on another thread so that a stop that overstays the timeout can be
// reported (and the child ended) instead of hanging. Returns how long it took.
Clock::duration stop_session(FakeHost& host, SessionId session, const Settings& settings,
                             Progress& progress, const std::string& context = {}) {
  progress.phase(context + "stop_discovery");
  const auto started = Clock::now();
  auto stopped = std::async(std::launch::async, [&host, session] {
    const CheckerThread stopping;
    host.stop(session);
  });
  if (stopped.wait_for(settings.stop_timeout) != std::future_status::ready) {
    progress.finish(failed_result(context + "stop_discovery did not return within " +
                                  milliseconds_text(settings.stop_timeout)));
  }
  stopped.get();
  return Clock::now() - started;
}

// The problems of every device the host left out of one snapshot.
std::string left_out_problems(const std::vector<host::InvalidDevice>& devices) {
  std::string text;
  for (const auto& device : devices)
    text += (text.empty() ? "" : "; ") + host::joined_problems(device);
  return text;
}

// The first thing wrong with what a session sent, if any.
std::optional<std::string> session_problem(const SessionRecord& record) {
  if (record.stop_failure) return *record.stop_failure;
  if (!record.late_calls.empty())
    return record.late_calls.front() + " after stop_discovery returned";
  if (!record.bad_reports.empty()) return "malformed report: " + record.bad_reports.front();
  // The host's own wording (device_rules), as dowserd logs it.
  if (!record.left_out.empty())
    return "devices left out of a snapshot: " + left_out_problems(record.left_out.front());
  if (!record.errors.empty()) {
    const auto& error = record.errors.front();
    return "handler reported error " + describe_status(error.code) + ": " +
           quoted_message(error.message);
  }
  return std::nullopt;
}

// What only the log shows: an SDK handler's late reports and session log
// lines never reach the session (the SDK says so instead), and the host says
// there when a log call's text could not be read (rule O4); no session's
// record shows either.
void require_no_logged_violation(const FakeHost& host) {
  for (const auto& line : host.logs()) {
    if (line.text == kReportAfterStopWarning || line.text == kLogAfterStopWarning)
      throw CheckFailed("the handler logged: " + line.text);
    if (line.level == DOWSER_LOG_WARN &&
        line.text.starts_with(std::string(host::kUnreadableLogMessage) + ": ") &&
        line.text.ends_with(": rule O4"))
      throw CheckFailed("the host logged: " + line.text);
  }
}

void require_clean(const FakeHost& host, SessionId session, const std::string& context = {}) {
  if (auto problem = session_problem(host.record(session))) throw CheckFailed(context + *problem);
  require_no_logged_violation(host);
}

bool has_trouble(const SessionRecord& record) {
  return !record.errors.empty() || !record.bad_reports.empty() || !record.late_calls.empty() ||
         !record.left_out.empty();
}

// --- the checks ----------------------------------------------------------------

// The loader's own checks: file ownership, entry symbol, negotiation, table;
// and what else the file exports.
Passed check_load(const Settings& settings, Progress& progress) {
  progress.phase("loading (dlopen, then dowser_get_handler_api)");
  auto handler = host::load_handler(settings.handler_file);
  json info = handler_json(*handler);
  Passed passed{info["name"].get<std::string>() + " " + info["version"].get<std::string>() +
                    ", ABI " + info["abi"].get<std::string>(),
                {},
                {{"handler", info}}};
  progress.phase("exported symbols");
  if (auto warning = host::extra_exports_warning(settings.handler_file))
    passed.warnings.push_back(std::move(*warning));
  return passed;
}

// Asks the entry function for a table as a host of version major.minor would.
struct Offer {
  const dowser_handler_api* table;
  std::string error;
};

Offer offer(dowser_get_handler_api_fn entry, uint16_t major, uint16_t minor, Progress& progress) {
  const std::string call = "dowser_get_handler_api(" + abi_text(major, minor) + ")";
  progress.phase(call);
  host::ErrorBuffer error;  // the host's own: not zeroed, guarded past err_cap
  const dowser_handler_api* table = nullptr;
  try {
    table = entry(major, minor, error.text(), error.capacity());
  } catch (...) {  // the handler's fault, not the checker's
    throw CheckFailed(call + " " + host::thrown_across_abi());
  }
  if (error.overran()) throw CheckFailed(call + " " + error.failure(call, DOWSER_OK).reason());
  std::string message = error.message();
  if (message.size() >= error.capacity())
    throw CheckFailed(call + " left no NUL in the error buffer (rule O5)");
  return {table, std::move(message)};
}

// A host of major.minor was offered table: it must be one that host can use,
// by the loader's own checks (size, version, contents) as that host.
void require_usable(const std::filesystem::path& file, const dowser_handler_api* table,
                    uint16_t major, uint16_t minor) {
  host::LoadPolicy as_that_host;
  as_that_host.host_abi_major = major;
  as_that_host.host_abi_minor = minor;
  try {
    host::adopt_handler(file, table, as_that_host);
  } catch (const host::HandlerLoadError& e) {
    throw CheckFailed("host ABI " + abi_text(major, minor) + ": " + e.stage() + ": " + e.reason());
  }
}

// Calls the entry function directly for hosts of every older minor, of the
// next minor (a newer host must be able to load it, rule V2) and of the next
// major. The loader deliberately keeps the raw entry function to itself
// (it negotiates once, as the host it is), so this check alone opens the file
// with dlopen, with the flags the loader uses, and only a file the loader
// would open: no code of a file it refuses runs here either.
Passed check_negotiate(const Settings& settings, Progress& progress) {
  progress.phase("permissions");
  host::check_handler_file(settings.handler_file);
  progress.phase("dlopen");
  void* library = ::dlopen(settings.handler_file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) throw CheckFailed(std::string("dlopen: ") + ::dlerror());
  auto entry = reinterpret_cast<dowser_get_handler_api_fn>(::dlsym(library, DOWSER_ENTRY_SYMBOL));
  if (entry == nullptr) throw CheckFailed(host::missing_entry_reason(settings.handler_file));

  constexpr uint16_t kMajor = DOWSER_ABI_VERSION_MAJOR;
  std::string verdicts;  // what each host was answered, for the summary
  auto note = [&verdicts](const std::string& verdict) {
    verdicts += (verdicts.empty() ? "" : "; ") + verdict;
  };
  constexpr uint16_t kNextMinor = DOWSER_ABI_VERSION_MINOR + 1;
  for (uint16_t minor = 0; minor <= kNextMinor; ++minor) {
    Offer answer = offer(entry, kMajor, minor, progress);
    const std::string host = "host ABI " + abi_text(kMajor, minor);
    if (answer.table != nullptr) {
      require_usable(settings.handler_file, answer.table, kMajor, minor);
      note(host + " accepted");
    } else if (minor >= DOWSER_ABI_VERSION_MINOR) {
      throw CheckFailed(host + (minor == kNextMinor ? " (a newer dowserd's)" : " (this header's)") +
                        " refused: " + quoted_message(answer.error) +
                        "; a handler must accept every host of its major from its own minor on "
                        "(rule V2)");
    } else if (answer.error.empty()) {
      throw CheckFailed(host + " refused without a message");
    } else {
      note(host + " refused: " + quoted_message(answer.error));
    }
  }
  const uint16_t next_major = kMajor + 1;
  Offer answer = offer(entry, next_major, 0, progress);
  std::string host = "host ABI " + abi_text(next_major, 0);
  if (answer.table != nullptr) throw CheckFailed(host + ": returned a table instead of NULL");
  if (answer.error.empty()) throw CheckFailed(host + ": returned NULL without an error message");
  note(host + " refused: " + quoted_message(answer.error));
  return {verdicts};
}

Passed check_init(const Settings& settings, Progress& progress) {
  return with_host(settings, progress,
                   [](FakeHost&) { return Passed{"init and destroy returned without error"}; });
}

// dowserd asks validate_request first and runs no discovery it refuses
// (DOWSER_ERR_INVALID_ARGUMENT): a handler whose validate_request refuses
// what its start_discovery takes would pass here and never discover under
// dowserd. Any other failure says nothing of the details: dowserd warns and
// starts all the same, and so does this check (a warning, returned).
std::optional<std::string> require_validated(FakeHost& host, const Settings& settings,
                                             Progress& progress) {
  if (!host.handler().has_validate()) return std::nullopt;
  progress.phase("validate_request");
  try {
    host.validate(settings.request);
    return std::nullopt;
  } catch (const host::HandlerCallError& e) {
    if (e.status() == DOWSER_ERR_INVALID_ARGUMENT && !e.threw()) {
      throw CheckFailed(describe(e) +
                        " on the details given (dowserd asks validate_request first "
                        "and runs no discovery it refuses)");
    }
    return describe(e) + " on the details given; dowserd starts discovery all the same";
  }
}

Passed check_discover(const Settings& settings, Progress& progress) {
  return with_host(settings, progress, [&](FakeHost& host) {
    const auto validate_warning = require_validated(host, settings, progress);
    auto session = start_session(host, settings, progress);
    progress.phase("discovering");
    // Runs the whole duration, so the snapshot shown is the latest; a
    // misbehaving session ends it early.
    host.wait_for(session, has_trouble, settings.duration);
    stop_session(host, session, settings, progress);
    require_clean(host, session);
    auto snapshots = host.snapshots(session);
    Passed passed{std::to_string(snapshots.size()) + " snapshot(s) in " +
                  milliseconds_text(settings.duration)};
    if (validate_warning) passed.warnings.push_back(*validate_warning);
    if (snapshots.empty()) {
      passed.warnings.push_back("no snapshot within " + milliseconds_text(settings.duration) +
                                " (fine only if the handler found no devices)");
    } else {
      passed.detail +=
          ", the latest with " + std::to_string(snapshots.back().size()) + " device(s)";
    }
    passed.data["devices"] =
        devices_json(snapshots.empty() ? testkit::Snapshot{} : snapshots.back());
    return passed;
  });
}

// call must be refused with an error status and a message.
void require_refusal(const std::string& what, const std::function<void()>& call, Passed& passed) {
  try {
    call();
  } catch (const host::HandlerCallError& e) {
    // An exception is no refusal: dowserd stops the handler's call there
    // and logs it as a broken handler, whatever the details.
    if (e.threw() || e.wrote_past_buffer()) throw CheckFailed(what + " " + e.reason());
    if (gave_no_message(e))
      throw CheckFailed(what + " refused invalid details with status " +
                        describe_status(e.status()) + " but no message");
    if (e.message().size() >= DOWSER_MAX_ERRLEN)
      throw CheckFailed(what + " left no NUL in the error buffer (rule O5)");
    if (e.status() != DOWSER_ERR_INVALID_ARGUMENT)
      passed.warnings.push_back(what + " refused invalid details with status " +
                                describe_status(e.status()) +
                                "; DOWSER_ERR_INVALID_ARGUMENT is expected");
    return;
  }
  throw CheckFailed(what + " accepted the details \"" + std::string(kInvalidDetails) +
                    "\" (must return an error status with a message)");
}

Passed check_invalid_details(const Settings& settings, Progress& progress) {
  return with_host(settings, progress, [&](FakeHost& host) {
    DiscoverRequest invalid{std::string(kInvalidDetails), settings.request.properties};
    Passed passed{"the details \"" + std::string(kInvalidDetails) + "\" were refused by "};
    if (host.handler().has_validate()) {
      progress.phase("validate_request");
      require_refusal(
          "validate_request", [&] { host.validate(invalid); }, passed);
      passed.detail += "validate_request and ";
    }
    progress.phase("start_discovery");
    require_refusal(
        "start_discovery",
        [&] {
          auto session = host.start(invalid);
          stop_session(host, session, settings, progress);
        },
        passed);
    passed.detail += "start_discovery";
    return passed;
  });
}

// Until the session's first snapshot, or kSettleTime (--duration if shorter).
void wait_until_busy(FakeHost& host, SessionId session, const Settings& settings) {
  host.wait_for_snapshot(
      session, [](const auto&) { return true; },
      std::min<std::chrono::milliseconds>(settings.duration, kSettleTime));
}

Passed check_start_stop(const Settings& settings, Progress& progress) {
  return with_host(settings, progress, [&](FakeHost& host) {
    Clock::duration slowest{};
    std::vector<SessionId> sessions;
    for (int cycle = 1; cycle <= kCycles; ++cycle) {
      std::string context = "cycle " + std::to_string(cycle) + ": ";
      sessions.push_back(start_session(host, settings, progress, context));
      // The last session runs until it reported: a handler whose reports are
      // bad fails every time, not only when a report beats a stop.
      if (cycle == kCycles) wait_until_busy(host, sessions.back(), settings);
      slowest = std::max(slowest, stop_session(host, sessions.back(), settings, progress, context));
    }
    // Checked at the end, so a late report from any cycle is caught.
    for (size_t i = 0; i < sessions.size(); ++i)
      require_clean(host, sessions[i], "cycle " + std::to_string(i + 1) + ": ");
    return Passed{std::to_string(kCycles) + " start/stop cycles; slowest stop " +
                  milliseconds_text(slowest)};
  });
}

Passed check_stop_latency(const Settings& settings, Progress& progress) {
  return with_host(settings, progress, [&](FakeHost& host) {
    Clock::duration slowest{};
    for (int round = 0; round < kLatencyRounds; ++round) {
      auto session = start_session(host, settings, progress);
      wait_until_busy(host, session, settings);  // stop a busy session, not one just created
      slowest = std::max(slowest, stop_session(host, session, settings, progress));
    }
    return Passed{"slowest of " + std::to_string(kLatencyRounds) + " stops took " +
                  milliseconds_text(slowest) + " (limit " +
                  milliseconds_text(settings.stop_timeout) + ")"};
  });
}

Passed check_no_report_after_stop(const Settings& settings, Progress& progress) {
  return with_host(settings, progress, [&](FakeHost& host) {
    auto session = start_session(host, settings, progress);
    host.wait_for_snapshot(
        session, [](const auto&) { return true; }, settings.duration);
    stop_session(host, session, settings, progress);
    progress.phase("watching for calls after stop_discovery");
    // Waiting for something that must not happen: the deadline is the point.
    host.wait_for(
        session, [](const SessionRecord& r) { return !r.late_calls.empty(); }, kLateWindow);
    require_clean(host, session);
    return Passed{"no call reached the host within " +
                  milliseconds_text(std::chrono::milliseconds(kLateWindow)) +
                  " after stop_discovery returned"};
  });
}

// The host's reporting path is thread-safe by construction and tested with
// the loader; what a handler can get wrong is running several sessions at
// once (shared state between sessions, reports from several threads). So
// this runs kConcurrentSessions sessions of the handler at the same time and
// checks everything each one reported.
Passed check_concurrent_sessions(const Settings& settings, Progress& progress) {
  return with_host(settings, progress, [&](FakeHost& host) {
    std::vector<SessionId> sessions;
    for (int i = 1; i <= kConcurrentSessions; ++i) {
      std::string context = "session " + std::to_string(i) + ": ";
      sessions.push_back(start_session(host, settings, progress, context));
    }
    progress.phase("discovering in " + std::to_string(kConcurrentSessions) + " sessions");
    host.wait_for_violation(settings.duration);  // runs the duration unless one misbehaves
    size_t snapshots = 0;
    for (size_t i = 0; i < sessions.size(); ++i) {
      std::string context = "session " + std::to_string(i + 1) + ": ";
      stop_session(host, sessions[i], settings, progress, context);
      require_clean(host, sessions[i], context);
      snapshots += host.snapshots(sessions[i]).size();
    }
    return Passed{std::to_string(kConcurrentSessions) + " concurrent sessions for " +
                  milliseconds_text(settings.duration) + ": " + std::to_string(snapshots) +
                  " snapshot(s), all well-formed"};
  });
}

const std::vector<Check>& all_checks() {
  static const std::vector<Check> checks = {
      {"load", "", check_load},
      {"negotiate", "", check_negotiate},
      {"init", "load", check_init},
      {"discover", "init", check_discover},
      {"invalid-details", "init", check_invalid_details},
      {"start-stop-100", "init", check_start_stop},
      {"stop-latency", "init", check_stop_latency},
      {"no-report-after-stop", "init", check_no_report_after_stop},
      {"concurrent-reports", "init", check_concurrent_sessions},
  };
  return checks;
}

// --- the parent side -------------------------------------------------------------

std::string describe_abnormal_end(const ChildReport& child, std::chrono::milliseconds quiet_limit) {
  std::string phase = child.last_phase.empty() ? "the check" : child.last_phase;
  if (child.timed_out)
    return phase + " did not return within " + milliseconds_text(quiet_limit) + ": child killed";
  if (child.signal && child.struck_handler_thread.value_or(false)) {
    return "a thread of the handler's own crashed during " + phase +
           " (not the host's call): child killed by " + describe_signal(*child.signal);
  }
  if (child.signal) return phase + " crashed: child killed by " + describe_signal(*child.signal);
  if (child.exit_status == kWorkThrew) return "checker error in " + phase;
  return phase + ": child exited with status " + std::to_string(child.exit_status.value_or(-1)) +
         " before finishing (the handler called exit, or a sanitizer stopped it: see stderr)";
}

CheckOutcome outcome_of(const Check& check, const ChildReport& child,
                        std::chrono::milliseconds quiet_limit, Report& report) {
  CheckOutcome outcome;
  outcome.name = check.name;
  outcome.handler_log = child.log;
  if (!child.result) {
    outcome.detail = describe_abnormal_end(child, quiet_limit);
    return outcome;
  }
  const json& result = *child.result;
  outcome.verdict = result.value("passed", false) ? Verdict::passed : Verdict::failed;
  outcome.detail = result.value("detail", "");
  outcome.warnings = result.value("warnings", std::vector<std::string>{});
  if (result.contains("handler")) report.handler = result["handler"];
  if (result.contains("devices")) report.devices = result["devices"];
  return outcome;
}

CheckOutcome skipped(const Check& check, std::string why) {
  CheckOutcome outcome;
  outcome.name = check.name;
  outcome.verdict = Verdict::skipped;
  outcome.detail = "not run: " + std::move(why);
  return outcome;
}

const CheckOutcome* find_outcome(const Report& report, std::string_view name) {
  for (const auto& outcome : report.checks)
    if (outcome.name == name) return &outcome;
  return nullptr;
}

// Why the check is not run, or nothing: its prerequisite did not pass, or an
// earlier check's start_discovery never returned (each later start would
// most likely hang too, and be waited out to the quiet limit again).
std::optional<std::string> reason_to_skip(const Check& check, const Report& report,
                                          const std::optional<std::string>& hung_start) {
  if (check.prerequisite.empty()) return std::nullopt;
  const CheckOutcome* prerequisite = find_outcome(report, check.prerequisite);
  if (prerequisite == nullptr || prerequisite->verdict != Verdict::passed)
    return std::string(check.prerequisite) + " did not pass";
  if (hung_start) return *hung_start;
  return std::nullopt;
}

bool hung_in_start(const ChildReport& child) {
  return child.timed_out && child.last_phase.ends_with("start_discovery");
}

}  // namespace

bool Report::passed() const {
  return std::all_of(checks.begin(), checks.end(),
                     [](const CheckOutcome& c) { return c.verdict == Verdict::passed; });
}

Report run_checks(const Settings& settings,
                  const std::function<void(const CheckOutcome&)>& finished) {
  // Any single step (one handler call, or the discovery duration) fits in this.
  const auto quiet_limit = settings.duration + settings.stop_timeout + settings.start_timeout +
                           std::chrono::duration_cast<std::chrono::milliseconds>(kQuietAllowance);
  Report report;
  std::optional<std::string> hung_start;
  for (const Check& check : all_checks()) {
    if (auto why = reason_to_skip(check, report, hung_start)) {
      report.checks.push_back(skipped(check, std::move(*why)));
      if (finished) finished(report.checks.back());
      continue;
    }
    auto child = run_in_child(
        [&](Progress& progress) {
          try {
            return passed_result(check.body(settings, progress));
          } catch (...) {
            return failed_result_of_current_exception();
          }
        },
        quiet_limit);
    report.checks.push_back(outcome_of(check, child, quiet_limit, report));
    if (finished) finished(report.checks.back());
    if (hung_in_start(child) && !hung_start)
      hung_start = "start_discovery did not return in " + std::string(check.name);
  }
  return report;
}

}  // namespace dowser::check
