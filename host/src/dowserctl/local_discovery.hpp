// Handlers loaded from a directory and driven exactly as dowserd does it (the
// daemon's own DiscoveryManager), without a daemon: for validate and discover.
#pragma once

#include "configuration.hpp"
#include "discovery_manager.hpp"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dowser::ctl {

class LocalDiscovery {
 public:
  explicit LocalDiscovery(const std::filesystem::path& handler_dir);
  ~LocalDiscovery();

  // The daemon's check of a Configuration by its handler: throws
  // host::HandlerCallError (refused) or std::runtime_error (no such handler,
  // or a property only the Kubernetes backend can resolve). Returns the
  // warnings (and errors) logged meanwhile, "[handler] message", for the
  // caller's report: they go to stderr as well only with debug logging on.
  std::vector<std::string> validate(const configuration::Configuration& configuration);

  struct Pass {
    std::optional<host::Snapshot> snapshot;
    std::string error;  // when discovery failed
    // What the daemon would not have taken from the handler's reports
    // (devices left out, reports refused), as dowserd logs them.
    std::vector<std::string> problems;
  };
  // One discovery pass: until the first snapshot, a failure or the timeout.
  Pass discover_once(const configuration::Configuration& configuration,
                     std::chrono::milliseconds timeout);
  // Stops the handlers, as dowserd does at exit; false if a call into one
  // did not return (given up on after 10 s, and logged).
  bool finish() { return manager_.shutdown(); }

 private:
  discovery::DiscoveryManager::Events events();  // what ends a pass of discover_once

  class WarningCapture;
  // A sink of the default logger while this lives; made before the manager's threads.
  std::shared_ptr<WarningCapture> warnings_;
  boost::asio::io_context io_;  // runs only inside discover_once
  std::optional<host::Snapshot> snapshot_;
  std::string error_;
  std::vector<std::string> problems_;
  discovery::DiscoveryManager manager_;
};

}  // namespace dowser::ctl
