// One discovery session: a thread that probes every discovery interval,
// collects ProbeMatches for discoveryTimeoutSeconds, checks the cameras (in
// parallel, each with its own client), and reports when the result changes.
// Between passes it listens for Hello and Bye, so a camera that announces
// itself is checked and reported at once, and one that says Bye goes at once.
#ifndef DOWSER_HANDLERS_ONVIF_DISCOVERY_SESSION_HPP
#define DOWSER_HANDLERS_ONVIF_DISCOVERY_SESSION_HPP

#include "camera_evaluation.hpp"
#include "credentials.hpp"
#include "onvif_settings.hpp"
#include "ws_discovery.hpp"
#include "wsdd_events.hpp"

#include <dowser/handler.hpp>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace onvif {

class DiscoverySession final : private WsddEvents {
 public:
  using Report = std::function<bool(const std::vector<dowser::Device>&)>;  // false: stopping
  using Log = std::function<void(dowser::LogLevel, const std::string&)>;
  using Fail = std::function<void(const std::string&)>;  // the session cannot go on
  // stopping: set once the session stops; the API starts no call after it.
  using ApiFactory = std::function<std::unique_ptr<CameraApi>(const std::atomic<bool>& stopping)>;

  // Opens the sockets (throws std::runtime_error when it cannot), then starts
  // the thread; the first probe goes out at once.
  DiscoverySession(Settings settings, CredentialStore credentials, ApiFactory api, Report report,
                   Log log, Fail fail);
  // Stops listening at once; a camera call in progress ends within the
  // request timeout.
  ~DiscoverySession();
  DiscoverySession(const DiscoverySession&) = delete;
  DiscoverySession& operator=(const DiscoverySession&) = delete;

 private:
  struct Known {
    Announcement announcement;
    Evaluation evaluation;
  };

  void run();
  bool wait_until(std::chrono::steady_clock::time_point deadline);
  void run_pass_checks();
  void check_announced();
  std::vector<std::optional<Evaluation>> check_all(const std::vector<Announcement>& cameras);
  Evaluation check(const Announcement& camera, CameraApi& api) const;
  void remember(const Announcement& camera, const Evaluation& evaluation);
  void publish();
  void note(const std::string& uuid, const Evaluation& evaluation);

  void probe_match(Announcement camera) override;
  void hello(Announcement camera) override;
  void bye(const std::string& endpoint) override;

  Settings settings_;
  CredentialStore credentials_;
  ApiFactory api_;
  Report report_;
  Log log_;
  Fail fail_;
  int cancel_fd_ = -1;
  std::atomic<bool> cancelled_{false};
  std::unique_ptr<WsDiscovery> discovery_;

  // The session thread's state.
  bool in_pass_ = false;
  std::map<std::string, Announcement> answered_;   // uuid -> this pass's ProbeMatch or Hello
  std::map<std::string, Announcement> announced_;  // Hellos heard between passes
  std::map<std::string, Known> settled_;           // uuid -> a verdict that needs no re-check
  std::map<std::string, dowser::Device> devices_;  // uuid -> the device reported
  // uuid (or kProbeProblem) -> the problem last logged
  std::map<std::string, std::string> problems_;
  static constexpr const char* kProbeProblem = "probe";  // the probe's own, not a camera's
  std::optional<std::vector<dowser::Device>> reported_;
  std::thread thread_;  // last: started once the rest is ready
};

}  // namespace onvif

#endif  // DOWSER_HANDLERS_ONVIF_DISCOVERY_SESSION_HPP
