// Runs a piece of work in a forked child process, so that a handler that
// crashes or hangs takes down only the child. The child reports where it is
// (phases) and its result as JSON lines over a pipe; the parent waits with a
// deadline and kills the child with SIGKILL when it expires.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace dowser::check {

// The child's end of the pipe.
class Progress {
 public:
  explicit Progress(int fd) : fd_(fd) {}
  // Names what the child is about to do, e.g. "start_discovery", so that a
  // crash or hang can be attributed to it.
  void phase(std::string_view what);
  // Sends the result and ends the child at once, without running destructors
  // (a thread may be stuck inside the handler).
  [[noreturn]] void finish(const nlohmann::json& result);

 private:
  void send(const nlohmann::json& line);
  int fd_;
};

// How a child ended. Without a result, exactly one of the last three is set.
struct ChildReport {
  std::optional<nlohmann::json> result;  // what the child finished with, if it did
  std::string last_phase;                // the last phase it named
  std::optional<int> signal;             // it was killed by this signal
  std::optional<int> exit_status;        // it exited without a result
  bool timed_out = false;                // it went quiet for too long and was killed
};

// The work done in the child; its return value is the result.
using ChildWork = std::function<nlohmann::json(Progress&)>;

// Forks, runs work in the child and collects its report. The child is killed
// (SIGKILL) when it sends nothing (no phase, no result) for quiet_limit: each
// phase restarts the clock, so quiet_limit bounds one step, not the whole
// work. The calling process must be single-threaded (it forks). Throws
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
