// Names for dowserd's own threads, so that an operator looking at a busy or
// stuck daemon (top -H, ps -L, perf, gdb) can tell which part it is. The
// main thread keeps the process's name: it runs the core executor.
#pragma once

#include <string_view>

namespace dowser {

// The kernel keeps 15 bytes of a thread's name: longer names are cut there.
inline constexpr size_t kThreadNameMax = 15;

// Names the calling thread (best effort: a failure changes nothing else).
void name_this_thread(std::string_view name);

// From now on, a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT)
// first writes one line to standard error naming the thread it struck
// ("[program] fatal signal SIGSEGV in thread h:NAME"), so that a crash in a
// discovery handler's thread (named h:<handler>) says whose it was; then the
// signal goes on to what handled it before (a core dump, a sanitizer's report).
// also, if given, is called first, on the thread struck, with the signal's
// number: it must be async-signal-safe.
using FatalSignalHook = void (*)(int signal);
void report_fatal_signals(std::string_view program, FatalSignalHook also = nullptr);

// From now until the returned guard is destroyed (main returning), an exit()
// called anywhere (a discovery handler calling exit, say) first writes one
// line to standard error naming the thread that called it ("[program] exit()
// called in thread h:NAME (a discovery handler's thread)"): the program did
// not choose to end. Call after report_fatal_signals, which names the program.
class ExitWatch {
 public:
  ExitWatch();
  ~ExitWatch();
  ExitWatch(const ExitWatch&) = delete;
  ExitWatch& operator=(const ExitWatch&) = delete;
};

}  // namespace dowser
