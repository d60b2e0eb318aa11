// The test Kubernetes API server (tests/peers/kube-apiserver) as a peer of a
// test: started by its start-apiserver.sh into a fresh directory (its own CA,
// token and kubeconfig), stopped by pid. It exits by itself if the test
// process dies (--owner-pid).
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "temp_dir.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "kube_client.hpp"

namespace dowser::kube::testing {

namespace fs = std::filesystem;

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Replaces a file atomically (write, rename), as kubelet rotates tokens.
inline void write_text(const fs::path& path, const std::string& text) {
  const fs::path temporary = path.string() + ".new";
  std::ofstream(temporary) << text;
  fs::rename(temporary, path);
}

using TemporaryDirectory = dowser::test::TempDir;

class TestApiServer {
 public:
  // server_options go to apiserver.mjs, e.g. {"--history", "5"}.
  explicit TestApiServer(std::vector<std::string> server_options = {})
      : server_options_(std::move(server_options)) {
    start({});
  }
  ~TestApiServer() { stop(); }
  TestApiServer(const TestApiServer&) = delete;
  TestApiServer& operator=(const TestApiServer&) = delete;

  const fs::path& directory() const { return directory_.path(); }
  fs::path kubeconfig() const { return directory() / "kubeconfig"; }
  fs::path token_file() const { return directory() / "token"; }
  fs::path ca_file() const { return directory() / "ca.crt"; }
  int port() const { return port_; }

  // From the kubeconfig it wrote: "dowser-test" (inline token, the
  // default), "dowser-test-token-file" or "dowser-test-client-certificate".
  ClusterAccess access(const std::string& context = "") const {
    return load_kubeconfig(kubeconfig(), context);
  }

  // SIGTERM, then waits until the process is gone.
  void stop() {
    if (pid_ <= 0) return;
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    ::kill(pid_, SIGTERM);
    if (pidfd >= 0) {
      pollfd exited{pidfd, POLLIN, 0};
      if (::poll(&exited, 1, 20000) != 1) ::kill(pid_, SIGKILL);
      ::close(pidfd);
    }
    pid_ = -1;
  }

  // A new server process on the same port, CA and directory: its objects
  // are gone (it keeps them in memory) and its token is a new one.
  void restart() {
    stop();
    start({"--port", std::to_string(port_)});
  }

 private:
  void start(const std::vector<std::string>& extra) {
    std::string command = std::string(KUBE_APISERVER_DIR) + "/start-apiserver.sh " +
                          directory().string() + " --owner-pid " + std::to_string(::getpid());
    for (const auto& option : server_options_) command += " " + option;
    for (const auto& option : extra) command += " " + option;
    const fs::path output = directory() / "start.out";
    command += " >" + output.string() + " 2>&1";
    if (std::system(command.c_str()) != 0) {  // NOLINT(cert-env33-c): a test starting its peer
      throw std::runtime_error("start-apiserver.sh failed: " + read_text(output));
    }
    pid_ = std::stoi(read_text(directory() / "apiserver.pid"));
    port_ = std::stoi(read_text(directory() / "ready"));
  }

  std::vector<std::string> server_options_;
  TemporaryDirectory directory_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace dowser::kube::testing
