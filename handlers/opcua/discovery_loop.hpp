// A discovery session's threads: one per configured URL, each scanning its
// URL every interval, so a URL that hangs until its timeout never delays
// the others once each URL was scanned (or 10 s passed). Their results are
// merged, and reported only when the merged snapshot changes.
#ifndef DOWSER_HANDLERS_OPCUA_DISCOVERY_LOOP_HPP
#define DOWSER_HANDLERS_OPCUA_DISCOVERY_LOOP_HPP

#include "cancellation.hpp"
#include "opcua_discovery.hpp"
#include "opcua_settings.hpp"
#include "state_log.hpp"

#include <dowser/handler.hpp>

#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace opcua {

// The services a session uses, bound to its cancellation.
using ServicesFactory = std::function<DiscoveryServices(const Cancellation&)>;

// The real network: UA-TCP calls with the settings' client options.
ServicesFactory network_services(const ClientOptions& options);

class DiscoveryLoop {
 public:
  // Returns false once the session is stopping.
  using Report = std::function<bool(const std::vector<dowser::Device>&)>;

  // Starts the threads at once; the first scans begin immediately.
  DiscoveryLoop(Settings settings, const ServicesFactory& services, Report report,
                StateLog::Sink log);
  // Cancels every wait, including network I/O in progress, and joins.
  ~DiscoveryLoop();
  DiscoveryLoop(const DiscoveryLoop&) = delete;
  DiscoveryLoop& operator=(const DiscoveryLoop&) = delete;

 private:
  void scan_repeatedly(size_t url_index);
  void stop_threads();  // cancels every scan and waits for its thread
  // devices: none when the scan failed (its last scan stands).
  void publish(size_t url_index, std::optional<std::vector<dowser::Device>> devices);
  void publish_logged(size_t url_index, std::optional<std::vector<dowser::Device>> devices);
  bool wait_for_next_scan(size_t url_index);  // false once the session stops
  // Whether the first report still waits for a URL's first scan.
  bool first_report_held();
  bool held_locked() const;  // mutex_ held

  Settings settings_;
  Cancellation cancellation_;
  DiscoveryServices services_;
  Report report_;
  StateLog log_;
  std::mutex mutex_;  // guards latest_, scanned_once_ and reported_, and orders reports
  std::vector<std::vector<dowser::Device>> latest_;               // per URL: its last scan
  std::vector<bool> scanned_once_;                                // per URL
  const std::chrono::steady_clock::time_point first_report_due_;  // at the latest
  std::optional<std::vector<dowser::Device>> reported_;
  std::vector<std::thread> threads_;  // last: started once the rest is ready
};

}  // namespace opcua

#endif  // DOWSER_HANDLERS_OPCUA_DISCOVERY_LOOP_HPP
