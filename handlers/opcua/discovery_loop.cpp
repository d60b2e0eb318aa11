#include "discovery_loop.hpp"

#include "ua_client.hpp"

#include <algorithm>

namespace opcua {

ServicesFactory network_services(const ClientOptions& options) {
  return [options](const Cancellation& cancellation) {
    DiscoveryServices services;
    services.find_servers = [options, &cancellation](const std::string& url) {
      return find_servers(url, options, cancellation);
    };
    services.get_endpoints = [options, &cancellation](const std::string& url) {
      return get_endpoints(url, options, cancellation);
    };
    services.resolves = remembering_last_answers([&cancellation](const std::string& host) {
      return resolves_with_getaddrinfo(host, cancellation);
    });
    return services;
  };
}

DiscoveryLoop::DiscoveryLoop(Settings settings, const ServicesFactory& services, Report report,
                             StateLog::Sink log)
    : settings_(std::move(settings)),
      services_(services(cancellation_)),
      report_(std::move(report)),
      log_(std::move(log)),
      latest_(settings_.discovery_urls.size()),
      scanned_once_(settings_.discovery_urls.size(), false),
      first_report_due_(std::chrono::steady_clock::now() + settings_.first_report_wait) {
  threads_.reserve(settings_.discovery_urls.size());
  try {
    for (size_t i = 0; i < settings_.discovery_urls.size(); ++i)
      threads_.emplace_back([this, i] { scan_repeatedly(i); });
  } catch (...) {
    // No thread to be had (a pids limit): the start fails, but the threads
    // already running must end first (no destructor runs for this object).
    stop_threads();
    throw;
  }
}

DiscoveryLoop::~DiscoveryLoop() { stop_threads(); }

void DiscoveryLoop::stop_threads() {
  cancellation_.cancel();
  for (auto& thread : threads_) thread.join();
}

void DiscoveryLoop::scan_repeatedly(size_t url_index) {
  const std::string& url = settings_.discovery_urls[url_index];
  do {
    std::optional<std::vector<dowser::Device>> devices;  // none: its last scan stands
    try {
      devices = scan_url(url, settings_, services_, log_);
      if (cancellation_.cancelled()) return;  // a cancelled scan saw nothing real
    } catch (const std::exception& e) {       // out of memory, no thread to be had
      log_.failed(url, std::string("scan failed: ") + e.what());
    }
    publish_logged(url_index, std::move(devices));
  } while (wait_for_next_scan(url_index));
}

// While the first report waits for other URLs, its deadline may come before
// the next scan: what is known goes then.
bool DiscoveryLoop::wait_for_next_scan(size_t url_index) {
  const auto next_scan = std::chrono::steady_clock::now() + settings_.discovery_interval;
  if (first_report_held() && first_report_due_ < next_scan) {
    if (!cancellation_.sleep_for(first_report_due_ - std::chrono::steady_clock::now()))
      return false;
    publish_logged(url_index, std::nullopt);
  }
  return cancellation_.sleep_for(next_scan - std::chrono::steady_clock::now());
}

void DiscoveryLoop::publish_logged(size_t url_index,
                                   std::optional<std::vector<dowser::Device>> devices) {
  try {
    publish(url_index, std::move(devices));
  } catch (const std::exception& e) {  // a report that failed
    log_.failed(settings_.discovery_urls[url_index], std::string("report failed: ") + e.what());
  }
}

bool DiscoveryLoop::first_report_held() {
  std::lock_guard lock(mutex_);
  return held_locked();
}

bool DiscoveryLoop::held_locked() const {
  return !reported_ && std::chrono::steady_clock::now() < first_report_due_ &&
         std::find(scanned_once_.begin(), scanned_once_.end(), false) != scanned_once_.end();
}

// The host takes a session's first report as every device there is (its
// Instances not in it are gone), so nothing is reported before every URL
// was scanned once, or first_report_wait passed: a slow URL delays the first
// report (so long at most), never a later one.
void DiscoveryLoop::publish(size_t url_index, std::optional<std::vector<dowser::Device>> devices) {
  std::lock_guard lock(mutex_);
  if (devices) latest_[url_index] = std::move(*devices);
  scanned_once_[url_index] = true;  // a failed scan counts: it must not hold every report
  if (held_locked()) return;
  auto merged = merge_unique(latest_);
  if (reported_ == merged) return;
  if (report_(merged)) reported_ = std::move(merged);
}

}  // namespace opcua
