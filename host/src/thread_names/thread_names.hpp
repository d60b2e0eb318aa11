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

}  // namespace dowser
