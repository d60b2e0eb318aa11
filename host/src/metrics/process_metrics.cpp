// The standard process_* metrics, read from /proc/self at scrape time.
#include "metrics.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace dowser::metrics {
namespace {

// Field `index` (1-based, as in proc(5)) of /proc/self/stat, or 0.
double stat_field(size_t index) {
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  // The command name (field 2) may hold spaces: count from its closing ')'.
  auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  for (size_t i = 3; fields >> field; ++i)
    if (i == index) return std::stod(field);
  return 0;
}

double page_size() { return static_cast<double>(::sysconf(_SC_PAGESIZE)); }
double clock_ticks() { return static_cast<double>(::sysconf(_SC_CLK_TCK)); }

// Field `index` (0-based) of /proc/self/statm, in pages.
double statm_pages(size_t index) {
  std::ifstream in("/proc/self/statm");
  double value = 0;
  for (size_t i = 0; i <= index && in >> value; ++i) {
  }
  return value;
}

double open_fds() {
  std::error_code error;
  double count = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", error), end; !error && it != end;
       it.increment(error))
    ++count;
  return count > 0 ? count - 1 : 0;  // not the descriptor the listing itself holds
}

double max_fds() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 0;
  return static_cast<double>(limit.rlim_cur);
}

double boot_time() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "btime") {
      double seconds = 0;
      in >> seconds;
      return seconds;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

}  // namespace

void add_process_metrics(Registry& registry) {
  registry.callback("process_cpu_seconds_total", "User and system CPU time spent, in seconds.",
                    Type::counter,
                    [] { return (stat_field(14) + stat_field(15)) / clock_ticks(); });
  registry.callback("process_resident_memory_bytes", "Resident memory size in bytes.", Type::gauge,
                    [] { return statm_pages(1) * page_size(); });
  registry.callback("process_virtual_memory_bytes", "Virtual memory size in bytes.", Type::gauge,
                    [] { return statm_pages(0) * page_size(); });
  registry.callback("process_open_fds", "Number of open file descriptors.", Type::gauge, open_fds);
  registry.callback("process_max_fds", "Maximum number of open file descriptors.", Type::gauge,
                    max_fds);
  registry.callback("process_threads", "Number of OS threads in the process.", Type::gauge,
                    [] { return stat_field(20); });
  double start = boot_time() + stat_field(22) / clock_ticks();  // fixed for the process's life
  registry.callback("process_start_time_seconds",
                    "Start time of the process since the Unix epoch, in seconds.", Type::gauge,
                    [start] { return start; });
}

}  // namespace dowser::metrics
