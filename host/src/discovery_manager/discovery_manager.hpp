// DiscoveryManager: one discovery session per Configuration, on the handler
// it names. Handlers are loaded from a directory (and picked up when they
// appear later); each handler instance has its own control thread, so the
// serial control calls of the ABI (rule T1) never block the core thread.
// Snapshots come back to the core thread as what changed since the last one
// it took, so a report costs the core thread what changed, and the newest
// state is always what it ends up with (rule T5).
#pragma once

#include "accepted_requests.hpp"
#include "configuration.hpp"
#include "handler_registry.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dowser::discovery {

using ConfigurationKey = std::pair<std::string, std::string>;  // namespace, name

struct HandlerInfo {
  std::string name;
  std::string version;
  std::filesystem::path path;
  bool shares_devices = false;
  // A call into it that has not returned for kStuckAfter or more: "stop_discovery
  // of default/cams has not returned for 42 s"; empty otherwise.
  std::string stuck;
};

// A handler call running this long is stuck: logged, and named in handlers().
inline constexpr std::chrono::seconds kStuckAfter{10};

struct DiscoveryOptions {
  std::filesystem::path handler_dir;
  std::chrono::milliseconds handler_rescan = std::chrono::seconds(5);
  // Backoff of failed sessions, and of writing accepted_requests_file.
  std::chrono::milliseconds first_retry = std::chrono::seconds(1);
  std::chrono::milliseconds max_retry = std::chrono::seconds(60);
  // Where the requests handlers accepted are remembered across restarts
  // (AcceptedRequests); without it, for this process only.
  std::optional<std::filesystem::path> accepted_requests_file;
  // How long validate() waits for the handler (on the caller's thread,
  // dowserd's core): past it, the Configuration starts not validated, and its
  // start says what validate would have.
  std::chrono::milliseconds validate_wait = std::chrono::milliseconds(500);
};

class DiscoveryManager {
 public:
  struct Events {
    // A Configuration's handler reported again: what changed in its devices
    // since the last call, diffed on the handler's thread (core thread). A
    // session's first one, after every (re)start, is complete.
    std::function<void(const ConfigurationKey&, host::DeviceChanges)> devices;
    // Discovery for a Configuration cannot run or stopped with an error; it
    // is retried with backoff (core thread).
    std::function<void(const ConfigurationKey&, const std::string& reason)> failed;
    // The handler refused the Configuration's details when its session
    // started (DOWSER_ERR_INVALID_ARGUMENT): not retried, since only a new
    // version of the Configuration can change that (core thread). The check
    // a Configuration gets when it is added, for one whose handler came later.
    // A request the handler accepted before (in this process or, with
    // accepted_requests_file, an earlier one) is not refused when a start is:
    // that is retried as a failure.
    std::function<void(const ConfigurationKey&, const std::string& reason)> refused;
    // What the host did not take from a session's reports: a report
    // refused, a device left out of a snapshot (each told once until it
    // changes), a report after stop (core thread). Logged as a warning too.
    std::function<void(const ConfigurationKey&, const std::string& problem)> report_problem;
    // The handler accepted the Configuration's current version: its session
    // started (core thread).
    std::function<void(const ConfigurationKey&)> started;
  };

  DiscoveryManager(boost::asio::io_context& core, DiscoveryOptions options, Events events,
                   host::LoadPolicy policy = {});
  ~DiscoveryManager();
  DiscoveryManager(const DiscoveryManager&) = delete;
  DiscoveryManager& operator=(const DiscoveryManager&) = delete;

  // Loads the handler directory and keeps rescanning it for new handlers.
  void start();
  // Checks a Configuration with its handler's validate entry. Throws
  // host::HandlerCallError (bad details), std::invalid_argument (a request
  // this backend cannot build) or std::runtime_error (no handler loaded).
  // A refusal of a request the handler accepted before is logged, not thrown.
  // Waits for the handler's control thread (options' validate_wait at most):
  // for load time, not hot paths.
  void validate(const configuration::Configuration& configuration);
  // Starts (or restarts, when its discovery changed) the session.
  void run(const configuration::Configuration& configuration);
  // Stops a Configuration's session, if any.
  void stop(const ConfigurationKey& configuration);
  // The Configuration is being deleted (not just withdrawn): which request
  // its handler accepted is forgotten too, once any start of it already
  // under way has recorded its own. Call before stop().
  void forget(const ConfigurationKey& configuration);
  // Stops every session and handler (blocking, up to 10 s for a call that
  // hangs, which is then abandoned and logged). Returns false if one was.
  bool shutdown();

  std::vector<HandlerInfo> handlers() const;
  std::vector<host::HandlerLoadError> load_failures() const { return failures_; }

 private:
  class ControlThread;
  class HandlerInstanceSlot;
  struct LoadedInstance;
  struct Session;

  void rescan();
  void schedule_rescan();
  // Warns once of each call running for kStuckAfter: the handler's other
  // calls (other Configurations' starts and stops) wait behind it.
  void warn_of_stuck_calls();
  // The handler's instance and control thread; nullptr when no handler of
  // that name is loaded. Its init runs on that thread, with the first call.
  LoadedInstance* instance_for(const std::string& handler_name);
  void open_session(Session& session);
  void close_session(Session& session);
  void session_event(const ConfigurationKey& key, uint64_t generation);
  void start_failed(const ConfigurationKey& key, uint64_t generation, bool refused,
                    const std::string& reason);
  void retry_later(Session& session, const std::string& reason);

  boost::asio::io_context& core_;
  DiscoveryOptions options_;
  Events events_;
  host::HandlerRegistry registry_;
  std::vector<host::HandlerLoadError> failures_;
  std::map<std::string, std::unique_ptr<LoadedInstance>> instances_;  // by handler name
  std::map<ConfigurationKey, std::unique_ptr<Session>> sessions_;
  uint64_t last_generation_ = 0;  // of any session (see Session::generation)
  AcceptedRequests accepted_;
  boost::asio::steady_timer rescan_timer_;
  std::map<std::string, int64_t> told_stuck_;  // by handler: the start of the call warned of
  bool every_call_returned_ = true;            // at shutdown
  // False once shut down; read by handler threads too.
  std::shared_ptr<std::atomic<bool>> alive_;
};

}  // namespace dowser::discovery
