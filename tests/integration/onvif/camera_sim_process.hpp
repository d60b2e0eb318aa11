// The gSOAP camera simulator (tests/peers/onvif) as a child process: its
// cameras come from a JSON file, its commands go to stdin, its answers are
// read from stdout line by line with deadlines.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace onvif::peers {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class CameraSimulator {
 public:
  // Starts `onvif-camera-sim --config <config_json written to a file> args...`
  // and waits for its READY line.
  CameraSimulator(const std::string& config_json, const std::vector<std::string>& args = {}) {
    config_file_ = fs::temp_directory_path() / ("onvif-sim-" + std::to_string(::getpid()) + "-" +
                                                std::to_string(counter()++) + ".json");
    std::ofstream(config_file_) << config_json;
    std::vector<std::string> text = {ONVIF_CAMERA_SIM, "--config", config_file_.string()};
    text.insert(text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& arg : text) argv.push_back(arg.data());
    argv.push_back(nullptr);
    int in[2];
    int out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)
      throw std::system_error(errno, std::generic_category(), "pipe2");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
      ::dup2(in[0], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    stdin_fd_ = in[1];
    stdout_fd_ = out[0];
    auto ready = wait_for_line("READY");
    std::smatch ports;
    if (!ready || !std::regex_search(*ready, ports, std::regex("wsd=(\\d+) http=(\\d+)")))
      throw std::runtime_error("the camera simulator did not start: " + transcript());
    wsd_port = std::stoi(ports[1]);
    http_port = std::stoi(ports[2]);
  }

  ~CameraSimulator() {
    command("quit");
    int status = 0;
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      ::poll(nullptr, 0, 10);
    }
    ::close(stdin_fd_);
    ::close(stdout_fd_);
    fs::remove(config_file_);
  }
  CameraSimulator(const CameraSimulator&) = delete;
  CameraSimulator& operator=(const CameraSimulator&) = delete;

  // Sends a command ("bye NAME", "hello NAME", "silence NAME") and waits for its OK.
  bool run(const std::string& line) {
    command(line);
    return wait_for_line("OK " + line).has_value();
  }

  // The first stdout line starting with prefix (earlier lines included).
  std::optional<std::string> wait_for_line(std::string_view prefix,
                                           std::chrono::milliseconds timeout = 20s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (size_t seen = 0;; ++seen) {
      while (seen == lines_.size())
        if (!read_more(deadline)) return std::nullopt;
      if (lines_[seen].rfind(prefix, 0) == 0) return lines_[seen];
    }
  }

  // Lines printed so far that start with prefix (reads what is waiting).
  size_t count_lines(std::string_view prefix) {
    while (read_more(std::chrono::steady_clock::now())) {
    }
    size_t count = 0;
    for (const auto& line : lines_) count += line.rfind(prefix, 0) == 0 ? 1 : 0;
    return count;
  }

  std::string transcript() const {
    std::string text;
    for (const auto& line : lines_) text += line + "\n";
    return text;
  }

  std::string probe_target() const { return "127.0.0.1:" + std::to_string(wsd_port); }

  int wsd_port = 0;
  int http_port = 0;

 private:
  static int& counter() {
    static int next = 0;
    return next;
  }

  void command(const std::string& line) {
    std::string text = line + "\n";
    [[maybe_unused]] auto written = ::write(stdin_fd_, text.data(), text.size());
  }

  bool read_more(std::chrono::steady_clock::time_point deadline) {
    auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd fd{stdout_fd_, POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(std::max<long>(left.count(), 0))) <= 0) return false;
    std::array<char, 4096> chunk{};
    ssize_t got = ::read(stdout_fd_, chunk.data(), chunk.size());
    if (got <= 0) return false;
    partial_.append(chunk.data(), static_cast<size_t>(got));
    for (size_t end; (end = partial_.find('\n')) != std::string::npos;) {
      lines_.push_back(partial_.substr(0, end));
      partial_.erase(0, end + 1);
    }
    return true;
  }

  fs::path config_file_;
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::string partial_;
  std::vector<std::string> lines_;
};

}  // namespace onvif::peers
