// Helpers for the operability tests: a dowserd with its status API on an
// ephemeral port, HTTP and Prometheus-text readers, and dowserctl runs.
#pragma once

#include "daemon_harness.hpp"
#include "eventually.hpp"
#include "status_api.hpp"

#include <fcntl.h>

#include <cmath>
#include <sstream>
#include <thread>

namespace dowser::it {

// The status API address dowserd logged at its latest start.
inline std::string status_url(const Node& node) {
  const std::string marker = "status API listening on ";
  if (!node.wait_for_log(marker)) return {};
  auto log = node.log();
  auto at = log.rfind(marker) + marker.size();
  return log.substr(at, log.find_first_of(" \n", at) - at);
}

inline status_api::Response http(const std::string& url, const std::string& path) {
  return status_api::http_get(url + path, std::chrono::seconds(5));
}

inline nlohmann::json api(const std::string& url, const std::string& path) {
  auto response = http(url, path);
  EXPECT_EQ(response.status, 200) << path << ": " << response.body;
  return nlohmann::json::parse(response.body);
}

// The value of the sample `series` (name with its labels as exposed), or NaN
// when /metrics has no such line.
inline double metric(const std::string& url, const std::string& series) {
  std::istringstream lines(http(url, "/metrics").body);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return std::nan("");
}

using dowser::test::eventually;

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs a program with these arguments; stdout and stderr go to files under
// `scratch`, since the program may fill a pipe before it exits.
inline CommandResult run_command(const fs::path& scratch, std::vector<std::string> args) {
  static int counter = 0;
  auto out_file = scratch / ("cmd-" + std::to_string(++counter) + ".out");
  auto err_file = scratch / ("cmd-" + std::to_string(counter) + ".err");
  // Built before fork: the child of a process with threads may only make
  // system calls until exec.
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int out = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(out_file), read_text(err_file)};
}

}  // namespace dowser::it
