#include "isolation.hpp"

#include "thread_names.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string_view>
#include <system_error>
#include <utility>

namespace dowser::check {
namespace {

class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const noexcept { return fd_; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

[[noreturn]] void throw_errno(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// Through syscall(): glibc 2.36's <sys/pidfd.h> lacks extern "C" for C++.
int open_pidfd(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// The checker's threads in the child (CheckerThread), read by a signal
// handler: fixed slots, 0 when free.
std::array<std::atomic<pid_t>, 8> checker_threads{};
std::atomic<int> child_report_fd{-1};

bool is_checker_thread(pid_t thread) {
  for (const auto& slot : checker_threads)
    if (slot.load() == thread) return true;
  return false;
}

// On the thread a fatal signal struck, before the child dies of it: one
// line for the parent, started on a line of its own in case the signal
// came in the middle of another thread's. Async-signal-safe.
void tell_parent_which_thread(int /*signal*/) {
  static constexpr std::string_view kHandlerThread = "\n{\"struck_handler_thread\":true}\n";
  static constexpr std::string_view kCheckerThread = "\n{\"struck_handler_thread\":false}\n";
  const std::string_view line = is_checker_thread(::gettid()) ? kCheckerThread : kHandlerThread;
  if (::write(child_report_fd.load(), line.data(), line.size()) < 0) return;  // dying anyway
}

[[noreturn]] void run_child(const ChildWork& work, int write_fd) {
  // A checker that dies must not leave a hung handler behind.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  child_report_fd.store(write_fd);
  report_fatal_signals("dowser-handler-check", tell_parent_which_thread);
  // As dowserd does: a handler's write to a peer that hung up gets EPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  const CheckerThread main_thread;
  Progress progress(write_fd);
  try {
    progress.finish(work(progress));
  } catch (...) {
    ::_exit(kWorkThrew);
  }
}

// The last kLogLinesKept lines of a log, and how many came before them.
class LogTail {
 public:
  void add(std::string line) {
    lines_.push_back(std::move(line));
    if (lines_.size() > kLogLinesKept) {
      lines_.pop_front();
      ++left_out_;
    }
  }
  std::vector<std::string> lines() const {
    std::vector<std::string> result;
    if (left_out_ > 0)
      result.push_back("(" + std::to_string(left_out_) + " earlier lines not shown)");
    result.insert(result.end(), lines_.begin(), lines_.end());
    return result;
  }

 private:
  std::deque<std::string> lines_;
  size_t left_out_ = 0;
};

// Splits the child's output into JSON lines and keeps what matters.
class ReportReader {
 public:
  void feed(const char* data, size_t size) {
    pending_.append(data, size);
    for (size_t end; (end = pending_.find('\n')) != std::string::npos;) {
      take_line(pending_.substr(0, end));
      pending_.erase(0, end + 1);
    }
  }
  // Whether a phase or the result arrived since the last call.
  bool heard() { return std::exchange(heard_, false); }
  ChildReport take_report() {
    report_.log = log_.lines();
    return std::move(report_);
  }
  ChildReport& report() { return report_; }

 private:
  void take_line(const std::string& line) {
    auto parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_object()) return;  // not ours: ignore
    if (auto log = parsed.find("log"); log != parsed.end() && log->is_string())
      log_.add(log->get<std::string>());
    if (auto phase = parsed.find("phase"); phase != parsed.end() && phase->is_string()) {
      report_.last_phase = phase->get<std::string>();
      heard_ = true;
    }
    if (auto struck = parsed.find("struck_handler_thread");
        struck != parsed.end() && struck->is_boolean())
      report_.struck_handler_thread = struck->get<bool>();
    if (auto result = parsed.find("result"); result != parsed.end()) {
      report_.result = *result;
      heard_ = true;
    }
  }

  std::string pending_;
  bool heard_ = false;
  ChildReport report_;
  LogTail log_;
};

// Reads what is available now; returns false at end of file.
bool read_available(int fd, ReportReader& reader) {
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      reader.feed(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && errno == EAGAIN;
  }
}

void note_exit(int status, ChildReport& report) {
  if (report.result) return;
  if (WIFSIGNALED(status)) report.signal = WTERMSIG(status);
  if (WIFEXITED(status)) report.exit_status = WEXITSTATUS(status);
}

int wait_for_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw_errno("waitpid");
  }
  return status;
}

// Follows the child until it exits, or kills it when it goes quiet too long.
ChildReport follow_child(pid_t pid, int read_fd, std::chrono::milliseconds quiet_limit) {
  UniqueFd pidfd(open_pidfd(pid));
  if (pidfd.get() < 0) {
    ::kill(pid, SIGKILL);
    wait_for_exit(pid);
    throw_errno("pidfd_open");
  }
  ReportReader reader;
  auto deadline = std::chrono::steady_clock::now() + quiet_limit;
  pollfd fds[2] = {{read_fd, POLLIN, 0}, {pidfd.get(), POLLIN, 0}};
  for (;;) {
    auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    int ready = ::poll(fds, 2, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) throw_errno("poll");
    if (ready == 0) {
      ::kill(pid, SIGKILL);
      wait_for_exit(pid);
      read_available(read_fd, reader);
      reader.report().timed_out = !reader.report().result;
      return reader.take_report();
    }
    // A pipe at end of file stays readable: stop watching it.
    if (fds[0].revents != 0 && !read_available(read_fd, reader)) fds[0].fd = -1;
    if (reader.heard()) deadline = std::chrono::steady_clock::now() + quiet_limit;
    if (fds[1].revents != 0) {
      int status = wait_for_exit(pid);
      read_available(read_fd, reader);  // whatever it wrote just before exiting
      note_exit(status, reader.report());
      return reader.take_report();
    }
  }
}

}  // namespace

void Progress::send(const nlohmann::json& line) {
  std::string text = dump_json(line) + "\n";
  const std::lock_guard lock(mutex_);
  for (size_t done = 0; done < text.size();) {
    ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ::_exit(kWorkThrew);  // the parent is gone
    done += static_cast<size_t>(n);
  }
}

void Progress::phase(std::string_view what) { send({{"phase", what}}); }

void Progress::log(std::string_view line) { send({{"log", line}}); }

void Progress::finish(const nlohmann::json& result) {
  send({{"result", result}});
  ::_exit(0);
}

ChildReport run_in_child(const ChildWork& work, std::chrono::milliseconds quiet_limit) {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) throw_errno("pipe2");
  UniqueFd read_end(ends[0]);
  UniqueFd write_end(ends[1]);
  if (::fcntl(read_end.get(), F_SETFL, O_NONBLOCK) != 0) throw_errno("fcntl");
  // The child must not repeat output still buffered in this process.
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork");
  if (pid == 0) {
    read_end.reset();
    // What the handler prints goes to stderr: stdout is the report's (--json).
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
    run_child(work, write_end.get());
  }
  write_end.reset();  // so the pipe reaches end of file when the child exits
  return follow_child(pid, read_end.get(), quiet_limit);
}

CheckerThread::CheckerThread() : slot_(checker_threads.size()) {
  const pid_t self = ::gettid();
  for (size_t i = 0; i < checker_threads.size() && slot_ == checker_threads.size(); ++i) {
    pid_t free = 0;
    if (checker_threads[i].compare_exchange_strong(free, self)) slot_ = i;
  }
}

CheckerThread::~CheckerThread() {
  if (slot_ < checker_threads.size()) checker_threads[slot_].store(0);
}

std::string describe_signal(int signal) {
  const char* abbrev = ::sigabbrev_np(signal);
  return "signal " + std::to_string(signal) + " (" +
         (abbrev != nullptr ? "SIG" + std::string(abbrev) : std::string(::strsignal(signal))) + ")";
}

std::string dump_json(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace dowser::check
