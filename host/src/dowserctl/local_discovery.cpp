#include "local_discovery.hpp"

namespace dowser::ctl {
namespace {

// The manager retries failed sessions; a single pass does not.
std::string without_retry_note(std::string reason) {
  auto note = reason.rfind(" (retrying in ");
  if (note != std::string::npos && reason.back() == ')') reason.erase(note);
  return reason;
}

}  // namespace

discovery::DiscoveryManager::Events LocalDiscovery::events() {
  // Failing (retried) or refused (not retried): either way this one pass ends.
  auto ended = [this](const discovery::ConfigurationKey&, const std::string& reason) {
    error_ = without_retry_note(reason);
    io_.stop();
  };
  return {// A session's first changes are complete: every device.
          [this](const discovery::ConfigurationKey&, host::DeviceChanges changes) {
            snapshot_ = std::move(changes.reported);
            io_.stop();
          },
          ended, ended};
}

LocalDiscovery::LocalDiscovery(const std::filesystem::path& handler_dir)
    // No accepted-requests file: a dry run must not change what dowserd remembers.
    : manager_(io_,
               discovery::DiscoveryOptions{.handler_dir = handler_dir,
                                           .accepted_requests_file = std::nullopt,
                                           // No core thread to keep free: wait as for a stop.
                                           .validate_wait = std::chrono::seconds(10)},
               events()) {
  manager_.start();  // scans the directory now; the rescan timer never runs
}

LocalDiscovery::~LocalDiscovery() { manager_.shutdown(); }

void LocalDiscovery::validate(const configuration::Configuration& configuration) {
  manager_.validate(configuration);
}

LocalDiscovery::Pass LocalDiscovery::discover_once(
    const configuration::Configuration& configuration, std::chrono::milliseconds timeout) {
  snapshot_.reset();
  error_.clear();
  manager_.run(configuration);
  io_.restart();
  io_.run_for(timeout);
  manager_.stop({configuration.namespace_name, configuration.name});
  if (!snapshot_ && error_.empty())
    error_ = "no snapshot within " + std::to_string(timeout.count()) + " ms";
  return {snapshot_, error_};
}

}  // namespace dowser::ctl
