#include "local_discovery.hpp"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <utility>

namespace dowser::ctl {
namespace {

// The manager retries failed sessions; a single pass does not.
std::string without_retry_note(std::string reason) {
  auto note = reason.rfind(" (retrying in ");
  if (note != std::string::npos && reason.back() == ')') reason.erase(note);
  return reason;
}

}  // namespace

// What is logged at warning level or above while a handler checks a
// Configuration (the handler's log comes through spdlog). Meanwhile the
// logger's other sinks are quiet, unless it shows debug lines (--verbose).
class LocalDiscovery::WarningCapture final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void begin(spdlog::logger& logger) {
    {
      std::lock_guard lock(mutex_);
      capturing_ = true;
      lines_.clear();
    }
    if (logger.should_log(spdlog::level::debug)) return;
    for (const auto& sink : logger.sinks()) {
      if (sink.get() == this) continue;
      muted_.emplace_back(sink, sink->level());
      sink->set_level(spdlog::level::off);
    }
  }

  std::vector<std::string> end() {
    for (const auto& [sink, level] : muted_) sink->set_level(level);
    muted_.clear();
    std::lock_guard lock(mutex_);
    capturing_ = false;
    return std::exchange(lines_, {});
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    if (capturing_ && message.level >= spdlog::level::warn)
      lines_.emplace_back(message.payload.data(), message.payload.size());
  }
  void flush_() override {}

 private:
  bool capturing_ = false;  // mutex_ held
  std::vector<std::string> lines_;
  std::vector<std::pair<spdlog::sink_ptr, spdlog::level::level_enum>> muted_;
};

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
          ended,
          ended,
          // Told before the snapshot it belongs to (the same order as the handler's calls).
          [this](const discovery::ConfigurationKey&, const std::string& problem) {
            problems_.push_back(problem);
          },
          {}};  // a started session changes nothing here
}

LocalDiscovery::LocalDiscovery(const std::filesystem::path& handler_dir)
    // No accepted-requests file: a dry run must not change what dowserd remembers.
    : warnings_(std::make_shared<WarningCapture>()),
      manager_(io_,
               discovery::DiscoveryOptions{.handler_dir = handler_dir,
                                           .accepted_requests_file = std::nullopt,
                                           // No core thread to keep free: wait as for a stop.
                                           .validate_wait = std::chrono::seconds(10)},
               events()) {
  // Before any handler thread runs: a logger's sinks are not for changing while it logs.
  spdlog::default_logger()->sinks().push_back(warnings_);
  manager_.start();  // scans the directory now; the rescan timer never runs
}

LocalDiscovery::~LocalDiscovery() {
  manager_.shutdown();
  std::erase(spdlog::default_logger()->sinks(), warnings_);
}

std::vector<std::string> LocalDiscovery::validate(
    const configuration::Configuration& configuration) {
  warnings_->begin(*spdlog::default_logger());
  try {
    manager_.validate(configuration);
  } catch (...) {
    warnings_->end();
    throw;
  }
  return warnings_->end();
}

LocalDiscovery::Pass LocalDiscovery::discover_once(
    const configuration::Configuration& configuration, std::chrono::milliseconds timeout) {
  snapshot_.reset();
  error_.clear();
  problems_.clear();
  manager_.run(configuration);
  io_.restart();
  io_.run_for(timeout);
  manager_.stop({configuration.namespace_name, configuration.name});
  if (!snapshot_ && error_.empty())
    error_ = "no snapshot within " + std::to_string(timeout.count()) + " ms";
  return {snapshot_, error_, problems_};
}

}  // namespace dowser::ctl
