// dowser-kubelet-sim as a process: a script's view, commands on stdin and one
// reply line each on stdout, with the test plugin registering on its socket.
#include "test_plugin.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

extern char** environ;

namespace dowser::testkit::test {
namespace {

using nlohmann::json;

// A child process with a pipe to its stdin and one from its stdout; stderr
// goes to a file so the log can never block it.
class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> command, const std::filesystem::path& log) {
    int to_child[2];
    int from_child[2];
    if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::vector<char*> argv;
    argv.reserve(command.size() + 1);
    for (auto& word : command) argv.push_back(word.data());
    argv.push_back(nullptr);
    const int spawned = ::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(to_child[0]);
    ::close(from_child[1]);
    stdin_ = to_child[1];
    stdout_ = from_child[0];
    if (spawned != 0) pid_ = -1;
  }

  ~ChildProcess() {
    if (stdin_ >= 0) ::close(stdin_);
    if (stdout_ >= 0) ::close(stdout_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  bool running() const { return pid_ > 0; }

  void send(const std::string& line) {
    const std::string text = line + "\n";
    ASSERT_EQ(::write(stdin_, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }

  // The next line on stdout, or nullopt if none comes before the deadline.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout = kDeadline) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      if (const auto end = buffer_.find('\n'); end != std::string::npos) {
        std::string line = buffer_.substr(0, end);
        buffer_.erase(0, end + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd ready{stdout_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&ready, 1, static_cast<int>(left.count())) <= 0) {
        return std::nullopt;
      }
      char chunk[4096];
      const ssize_t got = ::read(stdout_, chunk, sizeof chunk);
      if (got <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<std::size_t>(got));
    }
  }

  // Sends one command and returns its reply line.
  std::string command(const std::string& line) {
    send(line);
    return read_line().value_or("<no reply>");
  }

  // The exit status once the process has ended by itself.
  int wait_exit() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
  std::string buffer_;
};

// The JSON after "ok " in a reply.
json ok_json(const std::string& reply) {
  EXPECT_EQ(reply.rfind("ok {", 0), 0u) << reply;
  return reply.size() > 3 ? json::parse(reply.substr(3), nullptr, false) : json();
}

TEST(KubeletSimProcess, AnswersEveryCommandOnOneLine) {
  TempDir dir;
  const auto plugin_dir = dir.path() / "dp";
  ChildProcess sim({KUBELET_SIM_TOOL, "--dir", plugin_dir.string(), "--podresources-socket",
                    (dir.path() / "pr" / "kubelet.sock").string()},
                   dir.path() / "sim.log");
  ASSERT_TRUE(sim.running());
  // The first reply means both sockets are served.
  EXPECT_EQ(ok_json(sim.command("status")), json::parse(R"({"resources":{},"allocations":[]})"));

  TestDevicePlugin plugin(plugin_dir, "widget.sock", {}, {{"w0", "Healthy"}, {"w1", "Healthy"}});
  const grpc::Status registered =
      plugin.register_with(plugin_dir / "kubelet.sock", "example.com/widget");
  ASSERT_TRUE(registered.ok()) << registered.error_message();
  EXPECT_EQ(sim.command("wait example.com/widget 2 10"), "ok");

  const json allocation = ok_json(sim.command("allocate example.com/widget 1 default/pod-a main"));
  EXPECT_EQ(allocation["ids"], json::array({"w0"}));
  const json& response = allocation["response"];
  EXPECT_EQ(response["envs"]["DEVICE_w0"], "w0");
  EXPECT_EQ(response["devices"][0]["host_path"], "/dev/w0");
  EXPECT_EQ(response["mounts"][0]["read_only"], true);
  EXPECT_EQ(response["annotations"]["example.com/w0"], "allocated");
  EXPECT_EQ(response["cdi_devices"][0]["name"], "example.com/dev=w0");

  const json status = ok_json(sim.command("status"));
  const json& widget = status["resources"]["example.com/widget"];
  EXPECT_EQ(widget["endpoint"], "widget.sock");
  EXPECT_EQ(widget["capacity"], 2);
  EXPECT_EQ(widget["allocatable"], 2);
  EXPECT_EQ(widget["devices"]["w1"], "Healthy");
  ASSERT_EQ(status["allocations"].size(), 1u);
  EXPECT_EQ(status["allocations"][0]["pod"], "default/pod-a");
  EXPECT_EQ(status["allocations"][0]["device_ids"], json::array({"w0"}));

  EXPECT_EQ(sim.command("allocate example.com/widget 2 default/pod-b main")
                .rfind("error: RESOURCE_EXHAUSTED: ", 0),
            0u);
  EXPECT_EQ(sim.command("delete-pod default/pod-a"), "ok");
  EXPECT_EQ(ok_json(sim.command("status"))["allocations"], json::array());

  // What they do to podresources: KubeletSimulatorTest.HiddenPodsAreNotListedButKeepTheirDevices.
  EXPECT_EQ(sim.command("hide-pods"), "ok");
  EXPECT_EQ(sim.command("show-pods"), "ok");
  EXPECT_EQ(sim.command("hide-pods now").rfind("error: ", 0), 0u);

  EXPECT_EQ(sim.command("restart"), "ok");
  EXPECT_FALSE(std::filesystem::exists(plugin.socket()));
  EXPECT_EQ(sim.command("wait example.com/widget 1 0.05").rfind("error: timeout", 0), 0u);
  EXPECT_EQ(sim.command("crash-restart"), "ok");
  TestDevicePlugin after_crash(plugin_dir, "widget-2.sock", {}, {{"w0", "Healthy"}});
  EXPECT_TRUE(after_crash.register_with(plugin_dir / "kubelet.sock", "example.com/widget").ok());
  EXPECT_EQ(sim.command("wait example.com/widget 1 10"), "ok");
  EXPECT_EQ(sim.command("allocate example.com/widget one default/pod-b main").rfind("error: ", 0),
            0u);
  EXPECT_EQ(sim.command("frobnicate").rfind("error: unknown command", 0), 0u);
  // No duration holds these (converting them would be undefined).
  for (const char* seconds : {"nan", "inf", "1e300", "-1"}) {
    EXPECT_EQ(sim.command(std::string("wait example.com/widget 1 ") + seconds),
              "error: timeout-seconds must be a number from 0 to 86400")
        << seconds;
  }
  EXPECT_EQ(sim.command("quit"), "ok");
  EXPECT_EQ(sim.wait_exit(), 0);
}

// A misspelt level is refused, not taken as "off" (which hid every line).
TEST(KubeletSimProcess, AnUnknownLogLevelIsAUsageError) {
  TempDir dir;
  ChildProcess sim(
      {KUBELET_SIM_TOOL, "--dir", (dir.path() / "dp").string(), "--log-level", "verbose"},
      dir.path() / "sim.log");
  EXPECT_NE(sim.wait_exit(), 0);
  std::ifstream log(dir.path() / "sim.log");
  const std::string text{std::istreambuf_iterator<char>(log), {}};
  EXPECT_NE(text.find("--log-level: verbose not in"), std::string::npos) << text;
}

}  // namespace
}  // namespace dowser::testkit::test
