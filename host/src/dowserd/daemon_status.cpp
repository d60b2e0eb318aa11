// The daemon's observability: metrics wiring, the status API's views (built
// on the core thread) and readiness.
#include "daemon.hpp"

#include <spdlog/spdlog.h>

#include <ctime>
#include <tuple>

namespace dowser::daemon {
namespace {

std::string rfc3339(std::chrono::system_clock::time_point when) {
  std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string kind_of(const naming::SlotUsage& usage) {
  return usage.kind == naming::SlotUsage::Kind::configuration ? "configuration" : "instance";
}

using ConfigurationKey = std::pair<std::string, std::string>;  // namespace, name

// What this node sees of one Configuration: its Instances visible here (by
// whether they are shared) and their slots.
struct ConfigurationTally {
  uint64_t instances[2] = {0, 0};  // [shared]
  capacity::SlotTally slots;
};

// Per Configuration, from the cache: one decode per Instance, which a scrape
// of 5000 Instances pays (see docs/metrics.md).
std::map<ConfigurationKey, ConfigurationTally> tally_here(
    const capacity::CapacityManager& capacity, const reconcile::InstanceReconciler& reconciler) {
  std::map<ConfigurationKey, ConfigurationTally> tallies;
  for (const auto& [key, stored] : capacity.instances()) {
    const auto& instance = stored.instance;
    if (!reconciler.visible_here(instance)) continue;
    auto& tally = tallies[{instance.namespace_name, instance.configuration_name}];
    ++tally.instances[instance.shared ? 1 : 0];
    tally.slots.add(capacity::InstanceSlots::decode(instance, reconciler.offline(key)),
                    capacity.node());
  }
  return tallies;
}

// The slot states as the metric's label and the status API's keys name them.
std::vector<std::pair<std::string, uint64_t>> slot_states(const capacity::SlotTally& slots) {
  return {{"free", slots.free},
          {"offline", slots.offline},
          {"instance_level", slots.instance_level},
          {"configuration_level", slots.configuration_level},
          {"other_nodes", slots.other_nodes},
          {"unreadable", slots.unreadable}};
}

std::string discovery_state(const std::optional<std::pair<uint64_t, bool>>& record) {
  if (!record) return "starting";
  auto [snapshots, failing] = *record;
  if (failing) return "failing";
  return snapshots > 0 ? "discovering" : "starting";
}

void refused_now(status_api::ConfigurationStatus& status, const std::string& reason) {
  status.last_error = reason;
  status.last_error_current = true;
  status.last_error_at.clear();
}

// A readiness detail for what comes from the API server: its state, and
// whether `what` was listed yet.
std::string api_detail(const std::optional<kubernetes_backend::ApiStatus>& api, bool listed,
                       const std::string& what) {
  std::string detail = api ? "Kubernetes API server " + api->detail : "";
  if (listed) return detail;
  return what + " not listed yet" + (detail.empty() ? "" : "; " + detail);
}

}  // namespace

// ---- metrics wiring --------------------------------------------------------------------

void Daemon::start_observing() {
  metrics::add_process_metrics(metrics_registry_);
  // The reclaimer's own counters are thread-safe; it exists before the
  // status server starts and outlives it.
  auto reclaimer_stat = [this](uint64_t reclaim::ReclaimerStats::*field) {
    return
        [this, field] { return reclaimer_ ? static_cast<double>(reclaimer_->stats().*field) : 0; };
  };
  metrics_registry_.callback(
      "dowser_podresources_lists_total", "Successful podresources List calls to the kubelet.",
      metrics::Type::counter, reclaimer_stat(&reclaim::ReclaimerStats::lists_total));
  metrics_registry_.callback("dowser_podresources_list_failures_total",
                             "Failed podresources List calls (nothing is reclaimed then).",
                             metrics::Type::counter,
                             reclaimer_stat(&reclaim::ReclaimerStats::list_failures_total));
  // The file store's fdatasyncs: what an SD card on an edge box pays for.
  if (store_->journal_syncs()) {
    metrics_registry_.callback(
        "dowser_store_journal_syncs_total",
        "Times the file store made its journal durable (one fdatasync each); the new Instances "
        "of one discovery report share one.",
        metrics::Type::counter, [this] { return static_cast<double>(*store_->journal_syncs()); });
  }
  capacity_.set_slot_observer(
      [this](capacity::CapacityManager::SlotEvent event, const naming::SlotUsage& usage) {
        switch (event) {
          case capacity::CapacityManager::SlotEvent::claimed:
            metrics_.slot_claims.with({kind_of(usage)}).inc();
            break;
          case capacity::CapacityManager::SlotEvent::released:
            metrics_.slot_releases.with({kind_of(usage)}).inc();
            break;
          case capacity::CapacityManager::SlotEvent::restored:
            metrics_.slot_restores.with({kind_of(usage)}).inc();
            break;
          case capacity::CapacityManager::SlotEvent::lost_race:
            metrics_.slot_conflicts.inc();
            break;
        }
      });
  plugins_.set_registration_observer(
      [this](const std::string& resource, const plugins::PluginStats& stats) {
        registration_answered(resource, stats);
      });
}

void Daemon::start_status_server() {
  if (options_.http_listen.empty()) return;
  status_server_ = std::make_unique<status_api::StatusServer>(
      core_, metrics_registry_,
      status_api::CoreViews{[this] { return status(); }, [this] { return readiness(); },
                            [this] { refresh_metrics(); }},
      status_api::ServerOptions{options_.http_listen});
  try {
    status_server_->start();
    spdlog::info("status API listening on http://{}", status_server_->address());
  } catch (const std::exception& e) {
    // Devices matter more than the status page: keep serving the kubelet.
    spdlog::error("status API: {}; running without it", e.what());
    status_server_.reset();
  }
}

void Daemon::record_discovery_error(const ConfigurationKey& key, const std::string& reason) {
  spdlog::error("Configuration {}/{}: discovery: {}", key.first, key.second, reason);
  auto configuration = configurations_.find(key);
  if (configuration == configurations_.end()) return;
  auto& record = discovery_records_[key];
  ++record.errors;
  record.failing = true;
  record.last_error = reason;
  record.last_error_at = std::chrono::system_clock::now();
  metrics_.discovery_errors.with({configuration->second.handler_name}).inc();
}

// Already logged by the discovery manager; kept for the status API, since
// a handler whose every report is refused looks like one still starting.
void Daemon::report_problem(const ConfigurationKey& key, const std::string& problem) {
  auto configuration = configurations_.find(key);
  if (configuration == configurations_.end()) return;
  auto& record = discovery_records_[key];
  ++record.report_problems;
  record.last_report_problem = problem;
  record.last_report_problem_at = std::chrono::system_clock::now();
  metrics_.discovery_report_problems.with({configuration->second.handler_name}).inc();
}

void Daemon::record_snapshot(const ConfigurationKey& key, size_t devices) {
  auto& record = discovery_records_[key];
  ++record.snapshots;
  record.devices = devices;
  record.failing = false;
  record.last_snapshot = std::chrono::system_clock::now();
  metrics_.discovery_snapshots.with({configurations_.at(key).handler_name}).inc();
}

void Daemon::refused(const configuration::Configuration& configuration, const std::string& reason,
                     Tell tell) {
  spdlog::error("Configuration {}/{}: {}", configuration.namespace_name, configuration.name,
                reason);
  if (tell == Tell::users && configurations_source_)
    configurations_source_->report_problem(configuration, "Refused", reason);
  ConfigurationKey key{configuration.namespace_name, configuration.name};
  refused_[key] = {configuration, reason};
  waiting_for_name_.erase(key);  // refused for something else now
}

// The latest error of each source; `since` holds while the error stays the
// same. Returns the Configuration the error it replaced named, when the new
// one does not name it: that error no longer keeps it.
std::optional<ConfigurationKey> Daemon::configuration_error(
    const configuration::ConfigurationError& error) {
  auto now = std::chrono::system_clock::now();
  auto [it, added] =
      configuration_errors_.try_emplace(error.source(), ConfigurationErrorRecord{error, now});
  if (added || std::string_view(it->second.error.what()) == error.what()) return std::nullopt;
  auto named_before = it->second.error.configuration();
  it->second = {error, now};
  return named_before == error.configuration() ? std::nullopt : named_before;
}

std::vector<status_api::ConfigurationErrorStatus> Daemon::configuration_error_statuses() const {
  std::vector<status_api::ConfigurationErrorStatus> result;
  for (const auto& [source, record] : configuration_errors_)
    result.push_back(
        {source, record.error.field_path(), record.error.reason(), rfc3339(record.since)});
  return result;
}

void Daemon::await_kubelet(const ConfigurationKey& configuration,
                           const std::set<capacity::InstanceKey>& changed,
                           std::chrono::steady_clock::time_point since) {
  if (changed.empty()) return;
  // try_emplace: an older change still on its way is the one to time.
  kubelet_pending_.try_emplace(configuration_resource(configuration), KubeletPending{since});
  for (const auto& instance : changed)
    kubelet_pending_.try_emplace(instance_resource(instance), KubeletPending{since});
}

void Daemon::list_computed(const std::string& resource) {
  auto pending = kubelet_pending_.find(resource);
  if (pending == kubelet_pending_.end()) return;
  auto stats = plugins_.stats(resource);
  if (!stats || !stats->registered) {
    pending->second.list_ready = true;  // timed when the kubelet accepts the plugin
    return;
  }
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - pending->second.since;
  metrics_.discovery_to_kubelet.observe(took.count());
  kubelet_pending_.erase(pending);
}

void Daemon::registration_answered(const std::string& resource, const plugins::PluginStats& stats) {
  metrics_.registrations.with({stats.registered ? "ok" : "failed"}).inc();
  if (!stats.registered) return;
  if (stats.registrations > 1) metrics_.reregistrations.inc();
  auto pending = kubelet_pending_.find(resource);
  if (pending == kubelet_pending_.end() || !pending->second.list_ready) return;
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - pending->second.since;
  metrics_.discovery_to_kubelet.observe(took.count());
  kubelet_pending_.erase(pending);
}

BackendHooks Daemon::backend_hooks(const std::string& kind, const std::string& resource) {
  return metrics_.backend_hooks(kind, [this, resource] { list_computed(resource); });
}

std::string Daemon::instance_resource(const capacity::InstanceKey& key) const {
  return options_.resource_domain + "/" + key.second;
}

std::string Daemon::configuration_resource(const ConfigurationKey& key) const {
  return options_.resource_domain + "/" + key.second;
}

// ---- the status API's views (core thread) ----------------------------------------------

status_api::DaemonStatus Daemon::status() {
  status_api::DaemonStatus status;
  for (const auto& handler : discovery_.handlers())
    status.handlers.push_back({handler.name, handler.version, handler.path.string(),
                               handler.shares_devices, handler.stuck.empty() ? "loaded" : "stuck",
                               handler.stuck});
  for (const auto& failure : discovery_.load_failures())
    status.handlers.push_back({"", "", failure.file().string(), false, "failed",
                               failure.stage() + ": " + failure.reason()});
  status.configurations = configuration_statuses();
  status.instances = instance_statuses();
  status.plugins = plugin_statuses();
  status.configuration_errors = configuration_error_statuses();

  auto& summary = status.summary;
  summary.node = options_.node_name;
  summary.version = options_.version;
  summary.uptime_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  summary.readiness = readiness();
  summary.handlers = discovery_.handlers().size();
  summary.configurations = configurations_.size();
  for (const auto& instance : status.instances) summary.instances += instance.here ? 1 : 0;
  summary.plugins = status.plugins.size();
  summary.configuration_errors = status.configuration_errors.size();
  return status;
}

std::vector<status_api::ConfigurationStatus> Daemon::configuration_statuses() const {
  const auto tallies = tally_here(capacity_, reconciler_);
  auto describe = [&](const configuration::Configuration& configuration) {
    ConfigurationKey key{configuration.namespace_name, configuration.name};
    status_api::ConfigurationStatus entry;
    entry.namespace_name = key.first;
    entry.name = key.second;
    entry.handler = configuration.handler_name;
    entry.resource = configuration_resource(key);
    entry.capacity = configuration.capacity;
    entry.unique_instances =
        configuration.unique_instances == configuration::UniqueInstances::preferred ? "Preferred"
                                                                                    : "Required";
    std::optional<std::pair<uint64_t, bool>> progress;
    if (auto record = discovery_records_.find(key); record != discovery_records_.end()) {
      const auto& r = record->second;
      progress = {r.snapshots, r.failing};
      entry.last_error = r.last_error;
      entry.last_error_current = r.failing;
      if (!r.last_error.empty()) entry.last_error_at = rfc3339(r.last_error_at);
      entry.snapshots = r.snapshots;
      entry.errors = r.errors;
      entry.report_problems = r.report_problems;
      entry.last_report_problem = r.last_report_problem;
      if (!r.last_report_problem.empty())
        entry.last_report_problem_at = rfc3339(r.last_report_problem_at);
      entry.devices = r.devices;
      if (r.last_snapshot) entry.last_snapshot = rfc3339(*r.last_snapshot);
    }
    entry.state = discovery_state(progress);
    if (auto tally = tallies.find(key); tally != tallies.end()) {
      entry.instances = tally->second.instances[0] + tally->second.instances[1];
      for (const auto& [state, count] : slot_states(tally->second.slots))
        entry.slots[state] = count;
    }
    return entry;
  };
  std::vector<status_api::ConfigurationStatus> result;
  for (const auto& [key, configuration] : configurations_) {
    result.push_back(describe(configuration));
    // A change the handler refused: the previous version keeps running.
    if (auto refusal = refused_.find(key); refusal != refused_.end()) {
      refused_now(result.back(), refusal->second.second);
      result.back().change_refused = true;
    }
  }
  for (const auto& [key, refusal] : refused_) {
    if (configurations_.count(key)) continue;
    result.push_back(describe(refusal.first));
    result.back().state = "refused";
    refused_now(result.back(), refusal.second);
  }
  return result;
}

std::vector<status_api::InstanceStatus> Daemon::instance_statuses() const {
  std::vector<status_api::InstanceStatus> result;
  for (const auto& [key, stored] : capacity_.instances()) {
    const auto& instance = stored.instance;
    status_api::InstanceStatus entry;
    entry.namespace_name = instance.namespace_name;
    entry.name = instance.name;
    entry.configuration = instance.configuration_name;
    entry.shared = instance.shared;
    entry.capacity = instance.capacity;
    entry.nodes.assign(instance.nodes.begin(), instance.nodes.end());
    entry.here = reconciler_.visible_here(instance);
    entry.offline = reconciler_.offline(key);
    for (uint32_t i = 0; i < instance.capacity; ++i) {
      auto name = naming::slot_name(instance.name, i);
      auto usage = instance.device_usage.find(name);
      entry.slots.push_back(
          {name, i, usage == instance.device_usage.end() ? std::string() : usage->second});
    }
    result.push_back(std::move(entry));
  }
  return result;
}

std::vector<status_api::PluginStatus> Daemon::plugin_statuses() const {
  std::map<std::string, std::pair<std::string, const std::vector<capacity::PluginDevice>*>> known;
  for (const auto& [key, backend] : instance_backends_)
    known[instance_resource(key)] = {"instance", &backend->last_list()};
  for (const auto& [key, backend] : configuration_backends_)
    known[configuration_resource(key)] = {"configuration", &backend->last_list()};
  std::vector<status_api::PluginStatus> result;
  for (const auto& resource : plugins_.resources()) {
    auto stats = plugins_.stats(resource);
    if (!stats) continue;
    status_api::PluginStatus entry;
    entry.resource = resource;
    entry.socket = stats->socket_name;
    entry.registered = stats->registered;
    entry.registrations = stats->registrations;
    entry.lists_sent = stats->lists_sent;
    entry.last_error = stats->last_error;
    if (auto backend = known.find(resource); backend != known.end()) {
      entry.kind = backend->second.first;
      for (const auto& device : *backend->second.second)
        entry.devices.push_back({device.id, device.healthy});
    }
    result.push_back(std::move(entry));
  }
  return result;
}

status_api::Readiness Daemon::readiness() {
  status_api::Readiness readiness;
  auto check = [&readiness](std::string name, bool ok, std::string detail) {
    readiness.checks.push_back({std::move(name), ok, std::move(detail)});
  };

  std::set<std::string> loaded;
  std::string stuck;  // a handler call that does not return holds up that handler's Configurations
  for (const auto& handler : discovery_.handlers()) {
    loaded.insert(handler.name);
    if (!handler.stuck.empty())
      stuck += (stuck.empty() ? "" : "; ") + ("handler " + handler.name + ": " + handler.stuck);
  }
  std::set<std::string> missing;
  for (const auto& [key, configuration] : configurations_)
    if (!loaded.count(configuration.handler_name)) missing.insert(configuration.handler_name);
  std::string missing_list;
  for (const auto& name : missing) missing_list += (missing_list.empty() ? "" : ", ") + name;
  // A Configuration whose handler this node lacks waits for it (and says
  // so in its status), as Akri's agents do: nodes with different handlers
  // see the same cluster-wide Configurations, and each must become ready.
  if (loaded.empty()) {
    check("handlers", false, "no handler loaded from " + options_.handler_dir.string());
  } else {
    std::string detail = std::to_string(loaded.size()) + " loaded";
    if (!missing.empty()) detail += "; Configurations wait for missing: " + missing_list;
    if (!stuck.empty()) detail += "; " + stuck;
    check("handlers", stuck.empty(), detail);
  }

  // The API server is asked off the core (the backend's probe), so a slow network never stalls it.
  std::optional<kubernetes_backend::ApiStatus> api;
  if (kubernetes_) api = kubernetes_->api_status();
  if (options_.store == StoreKind::file) {
    try {
      store_->check_access();  // not list(): probes come often, and it reads every Instance
      // Claims cannot be written while writes fail (a full disk): not ready
      // until one succeeds (a retried Instance write, a claim). Unreadable
      // files are not a reason to stop serving the rest, but to be seen (and
      // fixed: the claims in such a file count for nothing until it is).
      const auto skipped = store_->skipped();
      if (auto failure = store_->write_failure()) {
        check("store", false, "the last write failed: " + *failure);
      } else {
        check("store", true,
              skipped.empty() ? ""
                              : std::to_string(skipped.size()) + " unreadable Instance file" +
                                    (skipped.size() == 1 ? "" : "s") + ", skipped: " + skipped[0] +
                                    (skipped.size() > 1 ? "; ..." : ""));
      }
    } catch (const std::exception& e) {
      check("store", false, e.what());
    }
  } else {
    check("store", api && api->ok && instances_listed_,
          api_detail(api, instances_listed_, "Instances"));
  }
  if (options_.config_source == ConfigSourceKind::kubernetes) {
    // Listed at least once: a server that answers but refuses the list (RBAC,
    // no CRD) serves nothing.
    check("configurations", api && api->ok && configurations_listed_,
          api_detail(api, configurations_listed_, "Configurations"));
  } else {
    // The source reports losing its directory as an error of the directory itself.
    auto lost = configuration_errors_.find(options_.config_dir.string());
    bool following = lost == configuration_errors_.end();
    check("configurations", following,
          following ? "following " + options_.config_dir.string()
                    : options_.config_dir.string() + ": " + lost->second.error.reason());
  }

  size_t registered = 0;
  std::string last_error;
  auto resources = plugins_.resources();
  for (const auto& resource : resources) {
    auto stats = plugins_.stats(resource);
    if (stats && stats->registered) {
      ++registered;
    } else if (stats && last_error.empty() && !stats->last_error.empty()) {
      last_error = resource + ": " + stats->last_error;
    }
  }
  if (auto unreachable = plugins_.kubelet_unreachable()) {
    check("kubelet", false, *unreachable);
  } else {
    check("kubelet", registered == resources.size(),
          std::to_string(registered) + " of " + std::to_string(resources.size()) +
              " plugins registered" + (last_error.empty() ? "" : " (" + last_error + ")"));
  }

  readiness.ready = true;
  for (const auto& c : readiness.checks) readiness.ready = readiness.ready && c.ok;
  return readiness;
}

void Daemon::refresh_metrics() {
  std::map<std::string, double> by_state;
  for (const auto& configuration : configuration_statuses())
    ++by_state[configuration.change_refused ? "change_refused" : configuration.state];
  std::vector<std::pair<metrics::LabelValues, double>> values;
  values.reserve(by_state.size());
  for (const auto& [state, count] : by_state) values.push_back({{state}, count});
  metrics_.configurations.replace(values);
  metrics_.configuration_errors.set(static_cast<double>(configuration_errors_.size()));

  values.clear();
  std::vector<std::pair<metrics::LabelValues, double>> slots;
  for (const auto& [key, tally] : tally_here(capacity_, reconciler_)) {
    const auto& [namespace_name, configuration] = key;
    for (bool shared : {false, true}) {
      if (const uint64_t count = tally.instances[shared ? 1 : 0]; count > 0)
        values.push_back({{namespace_name, configuration, shared ? "true" : "false"},
                          static_cast<double>(count)});
    }
    for (const auto& [state, count] : slot_states(tally.slots))
      slots.push_back({{namespace_name, configuration, state}, static_cast<double>(count)});
  }
  metrics_.instances.replace(values);
  metrics_.slots.replace(slots);

  values.clear();
  for (const auto& [key, record] : discovery_records_)
    values.push_back({{key.first, key.second}, static_cast<double>(record.devices)});
  metrics_.discovered_devices.replace(values);

  std::map<metrics::LabelValues, double> plugins;
  for (const auto& plugin : plugin_statuses())
    ++plugins[{plugin.kind, plugin.registered ? "true" : "false"}];
  metrics_.plugins.replace({plugins.begin(), plugins.end()});

  metrics_.handlers_loaded.set(static_cast<double>(discovery_.handlers().size()));
  std::map<metrics::LabelValues, double> failures;
  for (const auto& failure : discovery_.load_failures()) ++failures[{failure.stage()}];
  metrics_.handler_load_failures.replace({failures.begin(), failures.end()});
}

}  // namespace dowser::daemon
