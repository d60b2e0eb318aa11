// Thread names as the kernel keeps them (what top -H and ps -L show).
#include "thread_names.hpp"

#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <string>
#include <thread>

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

namespace dowser {
namespace {

// What /proc says the calling thread is called, as ps and top read it.
std::string name_in_proc() {
  std::ifstream comm("/proc/self/task/" + std::to_string(::syscall(SYS_gettid)) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

TEST(ThreadNames, AThreadIsListedUnderItsName) {
  std::string seen;
  std::thread([&] {
    name_this_thread("store-sync");
    seen = name_in_proc();
  }).join();
  EXPECT_EQ(seen, "store-sync");
}

TEST(ThreadNames, ALongNameIsCutToWhatTheKernelKeeps) {
  std::string seen;
  std::thread([&] {
    name_this_thread("h:aVeryLongHandlerName");
    seen = name_in_proc();
  }).join();
  EXPECT_EQ(seen, "h:aVeryLongHand");
  EXPECT_EQ(seen.size(), kThreadNameMax);
}

// A crash says which thread it struck, then goes on as it would have
// (here the default action: the process dies of the signal; under a
// sanitizer, its report and exit).
TEST(FatalSignals, AFatalSignalNamesTheThreadItStruck) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(pipe_fds[1], STDERR_FILENO);
    name_this_thread("h:crashy");
    report_fatal_signals("test");
    ::raise(SIGSEGV);
    ::_exit(0);  // not reached: the signal ends the process
  }
  ::close(pipe_fds[1]);
  std::string written;
  std::array<char, 256> buffer{};
  for (ssize_t count; (count = ::read(pipe_fds[0], buffer.data(), buffer.size())) > 0;)
    written.append(buffer.data(), static_cast<size_t>(count));
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the signal went on";
  EXPECT_EQ(written.substr(0, written.find('\n') + 1),
            "[test] fatal signal SIGSEGV in thread h:crashy (a discovery handler's thread)\n")
      << written;
}

}  // namespace
}  // namespace dowser
