#include "thread_names.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace dowser {
namespace {

struct FatalSignal {
  int number;
  const char* name;
  struct sigaction before;
};

std::array<FatalSignal, 5> fatal_signals{{{SIGSEGV, "SIGSEGV", {}},
                                          {SIGBUS, "SIGBUS", {}},
                                          {SIGILL, "SIGILL", {}},
                                          {SIGFPE, "SIGFPE", {}},
                                          {SIGABRT, "SIGABRT", {}}}};
std::array<char, 32> program_name{};
std::atomic<FatalSignalHook> fatal_signal_hook{nullptr};

// Async-signal-safe: fixed buffers, write(2) and sigaction only.
class LineBuffer {
 public:
  void add(const char* text) {
    for (; *text != '\0' && used_ < line_.size(); ++text) line_[used_++] = *text;
  }
  void write_to(int fd) const {
    if (::write(fd, line_.data(), used_) < 0) return;  // nothing more to try while dying
  }

 private:
  std::array<char, 160> line_{};
  size_t used_ = 0;
};

// "(a discovery handler's thread)" after a thread named h:<handler>.
void add_thread_name(LineBuffer& line) {
  std::array<char, 17> thread{};
  ::prctl(PR_GET_NAME, thread.data());
  line.add(" in thread ");
  line.add(thread.data());
  line.add(thread[0] == 'h' && thread[1] == ':' ? " (a discovery handler's thread)\n" : "\n");
}

std::atomic<bool> exit_watched{false};

void on_exit_call() {
  if (!exit_watched.load()) return;
  LineBuffer line;
  line.add("[");
  line.add(program_name.data());
  line.add("] exit() called");
  add_thread_name(line);
  line.write_to(STDERR_FILENO);
}

void on_fatal_signal(int number, siginfo_t* info, void*) {
  FatalSignal* fatal = nullptr;
  for (auto& candidate : fatal_signals)
    if (candidate.number == number) fatal = &candidate;
  if (fatal == nullptr) return;
  if (const FatalSignalHook also = fatal_signal_hook.load()) also(number);
  LineBuffer line;
  line.add("[");
  line.add(program_name.data());
  line.add("] fatal signal ");
  line.add(fatal->name);
  add_thread_name(line);
  line.write_to(STDERR_FILENO);
  ::sigaction(number, &fatal->before, nullptr);
  // A fault comes back when its instruction runs again; a sent signal must be sent again.
  if (info == nullptr || info->si_code <= 0 || number == SIGABRT) ::raise(number);
}

}  // namespace

void name_this_thread(std::string_view name) {
  const std::string cut(name.substr(0, kThreadNameMax));
  ::pthread_setname_np(::pthread_self(), cut.c_str());
}

ExitWatch::ExitWatch() {
  static const bool registered = std::atexit(on_exit_call) == 0;
  exit_watched.store(registered);
}

ExitWatch::~ExitWatch() { exit_watched.store(false); }

void report_fatal_signals(std::string_view program, FatalSignalHook also) {
  fatal_signal_hook.store(also);
  const size_t length = std::min(program.size(), program_name.size() - 1);
  std::memcpy(program_name.data(), program.data(), length);
  program_name[length] = '\0';
  struct sigaction action {};
  action.sa_sigaction = on_fatal_signal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (auto& fatal : fatal_signals) ::sigaction(fatal.number, &action, &fatal.before);
}

}  // namespace dowser
