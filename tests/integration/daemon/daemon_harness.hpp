// Runs dowserd as a real process against the test kit's kubelet simulator
// (real gRPC on unix sockets), with its own configuration, handler, state
// and kubelet directories under a temporary directory.
#pragma once

#include "eventually.hpp"
#include "instance_store.hpp"

#include <dowser/kubelet_sim.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dowser::it {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

inline fs::path make_temp_dir(const std::string& prefix) {
  // Short: unix socket paths must stay under 108 bytes.
  std::string pattern = "/tmp/" + prefix + "-XXXXXX";
  return ::mkdtemp(pattern.data());
}

inline void write_file(const fs::path& path, const std::string& text) {
  fs::path temp = path.string() + ".tmp";
  { std::ofstream(temp) << text; }
  fs::rename(temp, path);  // atomic, as editors and tests should write
}

// How many times text occurs in within (overlapping ones counted).
inline size_t occurrences(const std::string& within, const std::string& text) {
  size_t seen = 0;
  for (size_t at = within.find(text); at != std::string::npos; at = within.find(text, at + 1))
    ++seen;
  return seen;
}

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The names of the IL resources of a Configuration, from the store.
inline std::vector<std::string> il_resources(const std::vector<store::StoredInstance>& instances,
                                             const std::string& configuration) {
  std::vector<std::string> names;
  for (const auto& stored : instances)
    if (stored.instance.configuration_name == configuration)
      names.push_back("akri.sh/" + stored.instance.name);
  return names;
}

// One node: a kubelet simulator and a dowserd process.
class Node {
 public:
  // wrapper: a command dowserd runs under (e.g. unshare), its path looked up in PATH.
  Node(fs::path root, std::string name, fs::path state_dir, fs::path config_dir,
       fs::path handler_dir, std::vector<std::string> extra_args = {},
       std::vector<std::string> wrapper = {})
      : root_(std::move(root)),
        name_(std::move(name)),
        state_dir_(std::move(state_dir)),
        config_dir_(std::move(config_dir)),
        handler_dir_(std::move(handler_dir)),
        extra_args_(std::move(extra_args)),
        wrapper_(std::move(wrapper)) {
    fs::create_directories(root_ / name_);
    testkit::KubeletSimulatorConfig config;
    config.device_plugin_dir = root_ / name_ / "dp";
    config.podresources_socket = root_ / name_ / "podres.sock";
    kubelet = std::make_unique<testkit::KubeletSimulator>(config);
    start();
  }
  ~Node() { stop(SIGTERM); }

  void start() {
    std::vector<std::string> args = {
        DOWSERD,
        "--node-name=" + name_,
        "--config-dir=" + config_dir_.string(),
        "--handler-dir=" + handler_dir_.string(),
        "--state-dir=" + state_dir_.string(),
        "--podresources-socket=" + (root_ / name_ / "podres.sock").string(),
        "--log-level=debug"};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    auto given = [&](const std::string& flag) {
      return std::any_of(extra_args_.begin(), extra_args_.end(),
                         [&](const auto& arg) { return arg.rfind(flag, 0) == 0; });
    };
    if (!given("--http-listen")) args.push_back("--http-listen=127.0.0.1:0");  // no fixed port
    if (!given("--kubelet-dir")) args.push_back("--kubelet-dir=" + plugin_dir().string());
    args.insert(args.begin(), wrapper_.begin(), wrapper_.end());
    fs::path log = root_ / (name_ + ".log");
    // Everything that allocates happens before fork: the child of a process
    // with threads may only make system calls until exec.
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (log_fd < 0) ::_exit(126);
      ::dup2(log_fd, STDERR_FILENO);
      ::dup2(log_fd, STDOUT_FILENO);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
  }

  // Stops dowserd: SIGTERM (clean) or SIGKILL (crash). Returns its exit status.
  int stop(int signal) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, signal);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  // Sends signal without waiting for dowserd to act on it; false if it
  // could not be sent (no dowserd running).
  bool send_signal(int signal) const { return pid_ > 0 && ::kill(pid_, signal) == 0; }
  bool running() const { return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0; }
  pid_t pid() const { return pid_; }
  // Waits for dowserd to exit by itself; its exit status, or nullopt if it
  // still runs at the deadline.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout = 10s) {
    int status = 0;
    if (pid_ <= 0 ||
        !test::eventually([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, timeout))
      return std::nullopt;
    pid_ = -1;
    return status;
  }
  // The names of dowserd's threads, as /proc (top -H, ps -L) shows them.
  std::multiset<std::string> thread_names() const {
    std::multiset<std::string> names;
    std::error_code gone;  // a thread may end while it is listed
    for (const auto& task :
         fs::directory_iterator("/proc/" + std::to_string(pid_) + "/task", gone)) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      if (std::getline(comm, name)) names.insert(name);
    }
    return names;
  }
  // The kubelet's device-plugin directory of this node (plugin sockets).
  fs::path plugin_dir() const { return root_ / name_ / "dp"; }

  // Waits for the simulator's status to satisfy predicate.
  bool wait(const std::function<bool(const testkit::SimulatorStatus&)>& predicate,
            std::chrono::milliseconds timeout = 10s) {
    return kubelet->wait_for(predicate, timeout);
  }

  // Waits until `resource` is registered with exactly these healthy ids count.
  bool wait_allocatable(const std::string& resource, size_t allocatable,
                        std::chrono::milliseconds timeout = 10s) {
    return wait(
        [&](const testkit::SimulatorStatus& status) {
          const auto* r = status.resource(resource);
          return r && r->streaming && r->allocatable() == allocatable;
        },
        timeout);
  }

  // Waits until the plugin of `resource` has stopped (its stream ended), as
  // when its Instance is gone.
  bool wait_stopped(const std::string& resource, std::chrono::milliseconds timeout = 10s) {
    return wait(
        [&](const testkit::SimulatorStatus& status) {
          const auto* r = status.resource(resource);
          return r && !r->streaming;
        },
        timeout);
  }

  // Waits until `resource` offers exactly `free` devices the kubelet could
  // still hand out: healthy and not allocated to a container.
  bool wait_free(const std::string& resource, size_t free,
                 std::chrono::milliseconds timeout = 10s) {
    return wait(
        [&](const auto& status) { return free_count(status, resource) == static_cast<long>(free); },
        timeout);
  }

  // Healthy devices of resource not allocated to a container (-1: not streaming).
  static long free_count(const testkit::SimulatorStatus& status, const std::string& resource) {
    const auto* r = status.resource(resource);
    if (!r || !r->streaming) return -1;
    std::set<std::string> ids;
    for (const auto& id : r->healthy_ids()) ids.insert(id);
    for (const auto& allocation : status.allocations)
      if (allocation.resource == resource)
        for (const auto& id : allocation.device_ids) ids.erase(id);
    return static_cast<long>(ids.size());
  }

  // Waits until dowserd's log contains text (at least `times` times), woken
  // by inotify on the log.
  bool wait_for_log(const std::string& text, std::chrono::milliseconds timeout = 10s,
                    size_t times = 1) const {
    fs::path file = root_ / (name_ + ".log");
    int fd = ::inotify_init1(IN_CLOEXEC);
    // The directory, not the file: the log may not exist yet.
    ::inotify_add_watch(fd, file.parent_path().c_str(), IN_MODIFY | IN_CREATE);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    bool found = false;
    while (!(found = occurrences(log(), text) >= times)) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd pfd{fd, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(left.count())) > 0) {
        char buffer[4096];
        [[maybe_unused]] auto n = ::read(fd, buffer, sizeof buffer);
      }
    }
    ::close(fd);
    return found;
  }

  std::string log() const { return read_text(root_ / (name_ + ".log")); }

  const std::string& name() const { return name_; }
  std::unique_ptr<testkit::KubeletSimulator> kubelet;

 private:
  fs::path root_;
  std::string name_;
  fs::path state_dir_, config_dir_, handler_dir_;
  std::vector<std::string> extra_args_;
  std::vector<std::string> wrapper_;
  pid_t pid_ = -1;
};

// A test case's world: directories, handlers, and helpers to write manifests.
class DaemonTest : public ::testing::Test {
 protected:
  DaemonTest()
      : root_(make_temp_dir("dowser-it")),
        config_dir_(root_ / "configs"),
        handler_dir_(root_ / "handlers"),
        state_dir_(root_ / "state") {
    fs::create_directories(config_dir_);
    fs::create_directories(handler_dir_);
    fs::copy_file(DEBUG_ECHO_SO, handler_dir_ / "libdowser-handler-debug-echo.so");
    fs::copy_file(TEST_DEVICES_SO, handler_dir_ / "libfixture-test-devices.so");
  }
  ~DaemonTest() override {
    nodes_.clear();
    if (HasFailure()) {
      std::cerr << "test files kept in " << root_ << "\n";
    } else {
      fs::remove_all(root_);
    }
  }

  Node& add_node(const std::string& name, std::vector<std::string> extra_args = {}) {
    nodes_.push_back(std::make_unique<Node>(root_, name, state_dir_, config_dir_, handler_dir_,
                                            std::move(extra_args)));
    return *nodes_.back();
  }

  // A debugEcho Configuration.
  // A fixture handler (a built .so) in the handler directory, and a
  // Configuration `name` of it, with no details.
  void fixture_configuration(const fs::path& handler_so, const std::string& handler,
                             const std::string& name) {
    fs::copy_file(handler_so, handler_dir_ / handler_so.filename());
    write_file(config_dir_ / (name + ".yaml"),
               "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: " + name +
                   "}\nspec:\n  discoveryHandler: {name: " + handler + "}\n");
  }

  // A node that served Configurations "old" and "cams" (one Instance each)
  // and was killed: started again, it finds both Instances stored.
  Node& node_killed_after_serving_old_and_cams() {
    echo_configuration("old", {"old0"}, 1);
    echo_configuration("cams", {"cam0"}, 1);
    auto& node = add_node("node-a");
    EXPECT_TRUE(node.wait_allocatable("akri.sh/old", 1)) << node.log();
    EXPECT_TRUE(node.wait_allocatable("akri.sh/cams", 1)) << node.log();
    node.stop(SIGKILL);
    return node;
  }

  // That node started again with old.yaml gone, and cams refused by its
  // handler and duplicated in copy.yaml: old's Instance is withdrawn, cams's
  // kept for the duplicate.
  Node& node_with_refused_cams_and_its_duplicate() {
    auto& node = node_killed_after_serving_old_and_cams();
    const std::string refused =
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: cams}\n"
        "spec:\n  discoveryHandler: {name: debugEcho, discoveryDetails: '{{{'}\n";
    fs::remove(config_dir_ / "old.yaml");
    write_file(config_dir_ / "cams.yaml", refused);
    write_file(config_dir_ / "copy.yaml", refused);
    node.start();
    EXPECT_TRUE(node.wait_for_log("is already defined in")) << node.log();
    EXPECT_TRUE(node.wait_for_log("its Configuration default/old is gone; withdrawing"))
        << node.log();
    EXPECT_EQ(instances(1).size(), 1u) << "cams's Instance is kept: " << node.log();
    return node;
  }

  void echo_configuration(const std::string& name, const std::vector<std::string>& descriptions,
                          int capacity, bool shared = false, const std::string& extra_spec = "") {
    std::string list;
    for (const auto& d : descriptions) list += (list.empty() ? "" : ", ") + d;
    write_file(config_dir_ / (name + ".yaml"),
               "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: " + name +
                   "\nspec:\n  capacity: " + std::to_string(capacity) +
                   "\n  discoveryHandler:\n    name: debugEcho\n    discoveryDetails: "
                   "'descriptions: [" +
                   list +
                   "]'\n    discoveryProperties:\n      - name: DEBUG_ECHO_INSTANCES_SHARED\n"
                   "        value: \"" +
                   (shared ? "true" : "false") +
                   "\"\n      - name: DEBUG_ECHO_AVAILABILITY_FILE\n        value: " +
                   (root_ / (name + "-availability")).string() + "\n" + extra_spec);
  }

  // A testDevices Configuration of capacity 2 that reports what `devices`
  // says (YAML, re-read when the file changes; `fail: REASON` ends the session).
  void test_devices_configuration(const std::string& name, const fs::path& devices) {
    write_file(config_dir_ / (name + ".yaml"),
               "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: " + name +
                   "}\nspec:\n  capacity: 2\n  discoveryHandler:\n    name: testDevices\n"
                   "    discoveryProperties:\n      - {name: TEST_DEVICES_FILE, value: " +
                   devices.string() + "}\n");
  }

  void set_availability(const std::string& configuration, const std::string& text) {
    write_file(root_ / (configuration + "-availability"), text);
  }

  std::vector<store::StoredInstance> instances() {
    return store::FileInstanceStore(state_dir_ / "instances").list();
  }

  // The stored Instances once there are `count` (or as they are at the
  // deadline): the kubelet may be offered a new local device just before
  // its Instance is written.
  std::vector<store::StoredInstance> instances(size_t count) {
    std::vector<store::StoredInstance> stored;
    test::eventually([&] {
      stored = instances();
      return stored.size() == count;
    });
    return stored;
  }

  fs::path root_, config_dir_, handler_dir_, state_dir_;
  std::vector<std::unique_ptr<Node>> nodes_;
};

}  // namespace dowser::it
