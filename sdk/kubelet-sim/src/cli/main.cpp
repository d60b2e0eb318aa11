// dowser-kubelet-sim: serves the kubelet's Registration and podresources
// sockets and takes commands on stdin (see --help). Logs go to stderr so
// stdout carries nothing but replies.
#include "commands.hpp"
#include "dowser/kubelet_sim.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>
#include <string>

namespace {

void log_to_stderr(const std::string& level) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("kubelet-sim"));
  spdlog::set_level(spdlog::level::from_str(level));
}

void serve_commands(dowser::testkit::KubeletSimulator& simulator) {
  for (std::string line; std::getline(std::cin, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto reply = dowser::testkit::execute_command(simulator, line);
    std::cout << reply.line << std::endl;  // flushed: the driver waits for it
    if (reply.quit) return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  dowser::testkit::KubeletSimulatorConfig config;
  std::string log_level = "info";
  CLI::App app{
      "dowser-kubelet-sim: the kubelet's device manager for testing device plugins.\n"
      "Serves v1beta1.Registration on <dir>/kubelet.sock and v1.PodResourcesLister,\n"
      "dials back registering plugins, records their ListAndWatch lists and admits\n"
      "containers on command.\n\n" +
      std::string(dowser::testkit::kCommandHelp)};
  app.add_option("--dir", config.device_plugin_dir, "device plugin directory")
      ->capture_default_str();
  app.add_option("--podresources-socket", config.podresources_socket,
                 "where to serve the podresources API")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  CLI11_PARSE(app, argc, argv);

  log_to_stderr(log_level);
  try {
    dowser::testkit::KubeletSimulator simulator(config);
    serve_commands(simulator);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  return 0;
}
