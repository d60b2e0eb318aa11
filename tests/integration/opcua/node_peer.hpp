// node-opcua peers (the scripts of tests/peers/opcua) as child processes:
// started with `node`, their stdout read line by line with deadlines, their
// stderr kept in a log file. Must run inside run-in-netns.sh: the LDS
// announces on mDNS.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace opcua::peers {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class NodePeer {
 public:
  // Runs `node <OPCUA_PEERS_DIR>/<script> args...`, stderr to log_file,
  // XDG_CONFIG_HOME=config_home (node-opcua writes there otherwise to ~).
  NodePeer(const std::string& script, const std::vector<std::string>& args,
           const fs::path& log_file, const fs::path& config_home)
      : log_file_(log_file) {
    // Everything the child needs is built before fork: after it, only
    // async-signal-safe calls.
    std::vector<std::string> argv_text = {"node", std::string(OPCUA_PEERS_DIR) + "/" + script};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<std::string> env_text = {"XDG_CONFIG_HOME=" + config_home.string()};
    for (char** entry = environ; *entry != nullptr; ++entry)
      if (std::string_view(*entry).rfind("XDG_CONFIG_HOME=", 0) != 0) env_text.push_back(*entry);
    std::vector<char*> argv = pointers(argv_text);
    std::vector<char*> envp = pointers(env_text);
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0)
      throw std::system_error(errno, std::generic_category(), "pipe2");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
      ::dup2(out[1], STDOUT_FILENO);
      int err = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (err >= 0) ::dup2(err, STDERR_FILENO);
      ::execvpe("node", argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(out[1]);
    stdout_fd_ = out[0];
    if (pid_ < 0) throw std::system_error(errno, std::generic_category(), "fork");
  }

  ~NodePeer() {
    stop(SIGTERM);
    ::close(stdout_fd_);
  }
  NodePeer(const NodePeer&) = delete;
  NodePeer& operator=(const NodePeer&) = delete;

  // The first stdout line starting with prefix (old lines included), or
  // nullopt at the timeout or when the process ends without printing it.
  std::optional<std::string> wait_for_line(std::string_view prefix,
                                           std::chrono::milliseconds timeout = 60s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (size_t seen = 0;; ++seen) {
      while (seen == lines_.size()) {
        if (!read_more(deadline)) return std::nullopt;
      }
      if (lines_[seen].rfind(prefix, 0) == 0) return lines_[seen];
    }
  }

  // SIGTERM: node-opcua shuts down cleanly (servers unregister from their
  // LDS). SIGKILL: the process vanishes as a crashed server would. Waits
  // up to 20 s, then kills.
  void stop(int signal) {
    if (pid_ <= 0) return;
    ::kill(pid_, signal);
    if (!wait_for_exit(20s)) {
      ::kill(pid_, SIGKILL);
      wait_for_exit(20s);
    }
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // Everything it printed so far, and its stderr, for failure messages.
  std::string transcript() const {
    std::string text = "--- stdout:\n";
    for (const auto& line : lines_) text += line + "\n";
    std::ifstream log(log_file_);
    return text + "--- stderr (" + log_file_.string() + "):\n" +
           std::string(std::istreambuf_iterator<char>(log), {});
  }

 private:
  static std::vector<char*> pointers(std::vector<std::string>& texts) {
    std::vector<char*> result;
    for (auto& text : texts) result.push_back(text.data());
    result.push_back(nullptr);
    return result;
  }

  // Reads what is there into lines_; false at the deadline or end of output.
  bool read_more(std::chrono::steady_clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd fd{stdout_fd_, POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(left.count())) <= 0) return false;
    char chunk[4096];
    ssize_t got = ::read(stdout_fd_, chunk, sizeof chunk);
    if (got <= 0) return false;
    partial_.append(chunk, static_cast<size_t>(got));
    for (size_t end; (end = partial_.find('\n')) != std::string::npos;) {
      lines_.push_back(partial_.substr(0, end));
      partial_.erase(0, end + 1);
    }
    return true;
  }

  bool wait_for_exit(std::chrono::milliseconds timeout) {
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    if (pidfd < 0) return ::waitpid(pid_, nullptr, 0) == pid_;
    pollfd fd{pidfd, POLLIN, 0};
    bool exited = ::poll(&fd, 1, static_cast<int>(timeout.count())) == 1;
    ::close(pidfd);
    return exited;
  }

  fs::path log_file_;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string partial_;
  std::vector<std::string> lines_;
};

// Where a test keeps its peers' logs and certificates. Certificates go in
// a folder that outlives the test (OPCUA_PKI_CACHE) so that only the first
// run pays for making them.
struct PeerPlace {
  fs::path logs;
  fs::path pki = OPCUA_PKI_CACHE;
};

inline std::string url_at(int port) { return "opc.tcp://127.0.0.1:" + std::to_string(port); }

inline std::unique_ptr<NodePeer> start_lds(const PeerPlace& place, int port) {
  auto lds = std::make_unique<NodePeer>(
      "lds.mjs",
      std::vector<std::string>{"--port", std::to_string(port), "--pki",
                               (place.pki / ("lds-" + std::to_string(port))).string()},
      place.logs / ("lds-" + std::to_string(port) + ".log"), place.logs / "xdg");
  if (!lds->wait_for_line("READY"))
    throw std::runtime_error("LDS did not start:\n" + lds->transcript());
  return lds;
}

// Servers named names[i] on first_port + i, registered with lds_url unless
// it is empty; their URLs name `hostname`.
inline std::unique_ptr<NodePeer> start_servers(const PeerPlace& place,
                                               const std::vector<std::string>& names,
                                               int first_port, const std::string& lds_url,
                                               const std::string& hostname = "127.0.0.1") {
  std::string list;
  for (const auto& name : names) list += (list.empty() ? "" : ",") + name;
  std::vector<std::string> args = {"--port", std::to_string(first_port), "--names",    list,
                                   "--pki",  place.pki.string(),         "--hostname", hostname};
  if (!lds_url.empty()) {
    args.push_back("--lds");
    args.push_back(lds_url);
  }
  auto servers = std::make_unique<NodePeer>(
      "servers.mjs", args, place.logs / ("servers-" + std::to_string(first_port) + ".log"),
      place.logs / "xdg");
  if (!servers->wait_for_line("READY", 180s))
    throw std::runtime_error("servers did not start:\n" + servers->transcript());
  return servers;
}

}  // namespace opcua::peers
