// The daemon's metrics (all prefixed dowser_) and the plugin backend wrapper
// that times Allocate and remembers the last list sent to the kubelet.
#pragma once

#include "device_plugins.hpp"
#include "metrics.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dowser::daemon {

// What a plugin backend reports into (core thread).
struct BackendHooks {
  metrics::Counter* allocations_ok = nullptr;
  metrics::Counter* allocations_refused = nullptr;
  metrics::Counter* allocations_failed = nullptr;
  metrics::Histogram* allocation_seconds = nullptr;
  std::function<void()> list_computed;  // a list for the kubelet was just computed
};

struct DaemonMetrics {
  DaemonMetrics(metrics::Registry& registry, const std::string& version);

  // kind: "instance" (IL) or "configuration" (CL).
  BackendHooks backend_hooks(const std::string& kind, std::function<void()> list_computed);

  metrics::Family<metrics::Gauge>& configurations;  // {state}
  metrics::Family<metrics::Gauge>& instances;       // {namespace, configuration, shared}
  metrics::Family<metrics::Gauge>& slots;           // {namespace, configuration, state}
  metrics::Gauge& configuration_errors;
  metrics::Family<metrics::Gauge>& discovered_devices;           // {namespace, configuration}
  metrics::Family<metrics::Counter>& discovery_snapshots;        // {handler}
  metrics::Family<metrics::Counter>& discovery_errors;           // {handler}
  metrics::Family<metrics::Counter>& discovery_report_problems;  // {handler}
  metrics::Histogram& discovery_to_kubelet;                      // seconds
  metrics::Family<metrics::Counter>& allocations;                // {kind, result}
  metrics::Family<metrics::Histogram>& allocation_seconds;       // {kind}
  metrics::Family<metrics::Counter>& slot_claims;                // {kind}
  metrics::Family<metrics::Counter>& slot_releases;              // {kind}
  metrics::Family<metrics::Counter>& slot_restores;              // {kind}
  metrics::Counter& slot_reclaims;
  metrics::Counter& slot_conflicts;
  metrics::Family<metrics::Counter>& registrations;  // {result}
  metrics::Counter& reregistrations;
  metrics::Family<metrics::Gauge>& plugins;  // {kind, registered}
  metrics::Gauge& handlers_loaded;
  metrics::Family<metrics::Gauge>& handler_load_failures;  // {stage}
};

// A plugin backend that reports Allocate calls (result, latency) and keeps
// the last list it computed for the kubelet, for the status API.
template <typename Backend>
class Observed final : public Backend {
 public:
  template <typename... Args>
  explicit Observed(BackendHooks hooks, Args&&... args)
      : Backend(std::forward<Args>(args)...), hooks_(std::move(hooks)) {}

  plugins::DeviceList devices() override {
    last_list_ = Backend::devices();
    if (hooks_.list_computed) hooks_.list_computed();
    return last_list_;
  }

  void allocate(const v1beta1::AllocateRequest& request,
                v1beta1::AllocateResponse& response) override {
    auto started = std::chrono::steady_clock::now();
    auto done = [&](metrics::Counter* result) {
      std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
      hooks_.allocation_seconds->observe(took.count());
      result->inc();
    };
    try {
      Backend::allocate(request, response);
    } catch (const capacity::AllocationStoreError&) {
      done(hooks_.allocations_failed);
      throw;
    } catch (const capacity::AllocationError&) {
      done(hooks_.allocations_refused);
      throw;
    } catch (...) {
      done(hooks_.allocations_failed);
      throw;
    }
    done(hooks_.allocations_ok);
  }

  const std::vector<capacity::PluginDevice>& last_list() const { return *last_list_; }

 private:
  BackendHooks hooks_;
  plugins::DeviceList last_list_ = std::make_shared<std::vector<capacity::PluginDevice>>();
};

}  // namespace dowser::daemon
