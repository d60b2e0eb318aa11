// Runs a piece of work in a forked child process, so that a handler that
// crashes or hangs takes down only the child. The child reports where it is
// (phases), what the handler logs and its result as JSON lines over a pipe,
// as they happen, so that the parent has them even if the child dies; the
// parent waits with a deadline and kills the child with SIGKILL when it
// expires.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dowser::check {

// The child's end of the pipe; any thread may use it.
class Progress {
 public:
  explicit Progress(int fd) : fd_(fd) {}
  // Names what the child is about to do, e.g. "start_discovery", so that a
  // crash or hang can be attributed to it.
  void phase(std::string_view what);
  // Passes on one line the handler logged.
  void log(std::string_view line);
  // Sends the result and ends the child at once, without running destructors
  // (a thread may be stuck inside the handler).
  [[noreturn]] void finish(const nlohmann::json& result);

 private:
  void send(const nlohmann::json& line);
  std::mutex mutex_;  // a line is written whole
  int fd_;
};

inline constexpr size_t kLogLinesKept = 50;

// Marks the calling thread as the checker's own while it lives (the child's
// main thread, a thread that calls stop_discovery): a fatal signal on any
// other thread of the child struck a thread of the handler's own (up to 8
// marked at once: more are taken for the handler's).
class CheckerThread {
 public:
  CheckerThread();
  ~CheckerThread();
  CheckerThread(const CheckerThread&) = delete;
  CheckerThread& operator=(const CheckerThread&) = delete;

 private:
  size_t slot_;
};

// How a child ended. Without a result, exactly one of the last three is set.
struct ChildReport {
  std::optional<nlohmann::json> result;  // what the child finished with, if it did
  std::string last_phase;                // the last phase it named
  std::optional<int> signal;             // it was killed by this signal
  // Whether that signal struck a thread of the handler's own rather than one
  // of the checker's (inside a call it made); unknown if the child did not say.
  std::optional<bool> struck_handler_thread;
  std::optional<int> exit_status;  // it exited without a result
  bool timed_out = false;          // it went quiet for too long and was killed
  // The last kLogLinesKept lines it passed on with Progress::log, after a
  // line saying how many earlier ones were left out, if any: a chatty
  // handler must not flood the report.
  std::vector<std::string> log;
};

// The work done in the child; its return value is the result.
using ChildWork = std::function<nlohmann::json(Progress&)>;

// Forks, runs work in the child and collects its report. The child is killed
// (SIGKILL) when it sends no phase and no result for quiet_limit: each phase
// restarts the clock, so quiet_limit bounds one step, not the whole work
// (log lines do not: a handler stuck in a loop that logs is stuck all the
// same). The calling process must be single-threaded (it forks). Throws
// std::system_error if the child cannot be started or followed.
ChildReport run_in_child(const ChildWork& work, std::chrono::milliseconds quiet_limit);

// Exit status of a child whose work threw (a bug in the checker, not the handler).
inline constexpr int kWorkThrew = 70;

// "signal 11 (SIGSEGV)".
std::string describe_signal(int signal);

// JSON text for lines and output: handler strings may be any bytes, so
// invalid UTF-8 is replaced rather than thrown on.
std::string dump_json(const nlohmann::json& value, int indent = -1);

}  // namespace dowser::check
