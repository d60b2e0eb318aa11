// Thread names as the kernel keeps them (what top -H and ps -L show).
#include "thread_names.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <thread>

#include <sys/syscall.h>
#include <unistd.h>

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

}  // namespace
}  // namespace dowser
