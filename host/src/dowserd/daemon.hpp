// The daemon: wires Configurations, discovery, Instances, the capacity pool,
// the device plugins and the slot reclaimer around one core thread.
#pragma once

#include "capacity_manager.hpp"
#include "configuration.hpp"
#include "daemon_metrics.hpp"
#include "device_plugins.hpp"
#include "discovery_manager.hpp"
#include "instance_reconciler.hpp"
#include "instance_store.hpp"
#include "kubernetes_backend.hpp"
#include "slot_reclaimer.hpp"
#include "status_api.hpp"
#include "unique_fd.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace dowser::daemon {

class InstanceListingRetry;

// Where Instances live, and where Configurations come from.
enum class StoreKind { file, kubernetes };
enum class ConfigSourceKind { directory, kubernetes };

struct DaemonOptions {
  std::string node_name;
  std::filesystem::path config_dir = "/etc/dowser/configurations";
  std::filesystem::path handler_dir = "/usr/lib/dowser/handlers";
  std::filesystem::path state_dir = "/var/lib/dowser";
  std::filesystem::path kubelet_dir = "/var/lib/kubelet/device-plugins";
  std::filesystem::path podresources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::string resource_domain = "akri.sh";
  std::chrono::milliseconds reclaim_interval = std::chrono::seconds(10);
  std::chrono::milliseconds reclaim_grace = std::chrono::seconds(20);
  std::chrono::milliseconds handler_rescan = std::chrono::seconds(5);
  std::string http_listen = "127.0.0.1:8080";  // the status API; empty: none
  std::string version;
  StoreKind store = StoreKind::file;
  ConfigSourceKind config_source = ConfigSourceKind::directory;
  // The API server (the loaded dowser-kubernetes module), when the store or
  // the Configuration source is Kubernetes.
  std::shared_ptr<kubernetes_backend::KubernetesBackend> kubernetes;
  std::string kube_namespace;  // empty: all namespaces
  std::chrono::milliseconds dead_node_grace = std::chrono::minutes(5);
  // How often the Kubernetes source posts standing problems' Events again
  // (the API server drops them after its --event-ttl).
  std::chrono::milliseconds event_refresh =
      configuration::KubeConfigurationSource::kDefaultEventRefresh;
};

// When each step of advertising what discovery reported ended, on the core
// thread: the core thread took it, reconciled it (new Instances of local
// devices only pooled), offered CL lists, wrote the new Instances, served IL
// plugins, made the Instances durable.
struct AdvertiseTimes {
  reconcile::Clock::time_point started, reconciled, offered, written, served, synced;
};

class Daemon {
 public:
  explicit Daemon(DaemonOptions options);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Runs until SIGTERM or SIGINT; then stops cleanly (sockets removed).
  // SIGHUP is logged and ignored.
  int run();
  // Called (core thread) when the kubelet directory, deleted, is there again,
  // before the plugins are served in it anew: main takes its lock again.
  void on_kubelet_dir_recreated(std::function<void()> hook) {
    plugins_.set_directory_observer(std::move(hook));
  }

 private:
  using ConfigurationKey = std::pair<std::string, std::string>;

  void start();
  void await_signal();
  void shutdown();
  std::unique_ptr<store::InstanceStore> make_store();
  std::unique_ptr<configuration::ConfigurationSource> make_configuration_source();
  void start_kubernetes_helpers();
  // The store's Instances into the cache; with the Kubernetes store, an API
  // server that does not answer yet is listed again off the core thread.
  void list_instances();
  void instances_listed_late(const std::vector<store::StoredInstance>& instances);

  void configuration_upserted(const configuration::Configuration& configuration);
  void run_or_refuse(const configuration::Configuration& configuration);
  void configuration_error_cleared(const std::string& source);
  void stop_keeping(const ConfigurationKey& key);
  void keeping_ended(const ConfigurationKey& key);
  void resource_name_released(const ConfigurationKey& key);
  void name_held_by_instances_released(const ConfigurationKey& owner);
  // For a name held by another Configuration, or (at a start, see
  // resource_name_holder) by its Instances until every Configuration is read.
  enum class NameWait { for_its_holder, for_the_listing };
  // Posts configuration_upserted for those waiting for a name that `which` picks.
  void retry_waiting_for_name(const std::function<bool(const ConfigurationKey&, NameWait)>& which);
  std::optional<ConfigurationKey> resource_name_holder(const ConfigurationKey& key) const;
  enum class Held { instances, claims };
  bool holds_here(const ConfigurationKey& key, Held what) const;
  std::set<ConfigurationKey> kept_without_running() const;
  const store::Instance* instance_here(
      const std::function<bool(const store::Instance&)>& matches) const;
  void take_names_back_by_claims(std::set<ConfigurationKey>& known);
  void give_name_back(const ConfigurationKey& holder, const ConfigurationKey& owner);
  void wait_for_name(const configuration::Configuration& waiting, const ConfigurationKey& holder,
                     NameWait wait);
  // An Instance (in any namespace) whose IL plugin has the resource name a
  // Configuration named `name` would take for its CL plugin.
  const store::Instance* instance_named(const std::string& name) const;
  // why: for the log line ("removed", or why it is withdrawn).
  void configuration_removed(const ConfigurationKey& key, std::string_view why = "removed");
  void configuration_deleted(const ConfigurationKey& key);
  void discovery_started(const ConfigurationKey& key);
  // Tells the source that what it was told about this version no longer stands.
  void problems_resolved(const configuration::Configuration& configuration);
  void refused_by_handler(const ConfigurationKey& key, const std::string& reason);
  void devices_changed(const ConfigurationKey& key, const host::DeviceChanges& changes);
  void discovery_failed(const ConfigurationKey& key, const std::string& reason);
  void reapply(const ConfigurationKey& key);
  using Reconcile = std::function<std::set<capacity::InstanceKey>(reconcile::Clock::time_point)>;
  AdvertiseTimes reconcile_and_advertise(const ConfigurationKey& key, const Reconcile& reconcile);
  void store_event(const store::WatchEvent& event);

  // Plugin upkeep, batched: Instances whose state changed are marked, and
  // one posted pass brings their IL and CL plugins up to date (or a direct
  // call, which the posted one then skips).
  void mark_dirty(const capacity::InstanceKey& key);
  void mark_dirty(const std::set<capacity::InstanceKey>& keys);
  // Both steps in one: the CL plugins' lists, then the IL plugins.
  void refresh_plugins(plugins::ListDelivery delivery);
  // Takes the marked Instances and offers the CL lists they changed; returns
  // them, for refresh_instance_plugins.
  std::set<capacity::InstanceKey> offer_configuration_lists(plugins::ListDelivery delivery);
  void refresh_instance_plugins(const std::set<capacity::InstanceKey>& keys,
                                plugins::ListDelivery delivery);
  void refresh_instance_plugin(const capacity::InstanceKey& key, plugins::ListDelivery delivery);
  bool nameable_as_resource(const capacity::InstanceKey& key);
  void schedule_expiry();
  void expire_offline();
  // Writes of Instances that failed are tried again, with backoff, until
  // they succeed: the device appears once the cause (a torn file, a full
  // disk) is gone, without waiting for its handler's next report.
  void retry_failed_writes();
  // Reapplies the Configurations within delay (one timer for all, moved
  // sooner if need be); false if it was due sooner already.
  bool reapply_within(std::set<ConfigurationKey> keys, std::chrono::milliseconds delay);
  // This node's claims on the cached Instance, by slot; those a store event
  // takes away (the Instance deleted, or edited to leave this node out).
  std::map<uint32_t, naming::SlotUsage> claims_here(const capacity::InstanceKey& key) const;
  std::map<uint32_t, naming::SlotUsage> claims_taken(const store::WatchEvent& event,
                                                     const capacity::InstanceKey& key) const;
  void restore_lost_claims();

  std::vector<reclaim::HeldSlot> held_slots();
  // An Allocate granted the slot: the reclaimer's grace for it starts over.
  void granted(const capacity::InstanceKey& key, uint32_t slot);
  void release(const reclaim::HeldSlot& slot);
  void unclaimed_in_use(const std::vector<reclaim::DeviceRef>& devices);
  bool claim_again_for_pod_in_use(const reclaim::DeviceRef& device);
  bool claim_slot_again(const capacity::InstanceKey& key, uint32_t slot,
                        const naming::SlotUsage& usage, const reclaim::DeviceRef& device);
  void report_unreadable_slots(const store::Instance& instance);
  void warn_if_state_is_off_the_kubelets_file_system() const;
  // Tells every CL plugin which of its ids the kubelet holds without a claim.
  void hold_configuration_devices(const std::set<reclaim::DeviceRef>& unclaimed);

  // ---- observability (daemon_status.cpp) ----
  // What discovery did for one Configuration, for the status API.
  struct DiscoveryRecord {
    uint64_t snapshots = 0;
    uint64_t errors = 0;
    uint64_t devices = 0;
    bool failing = false;  // the last event was an error
    std::string last_error;
    std::chrono::system_clock::time_point last_error_at;
    std::optional<std::chrono::system_clock::time_point> last_snapshot;
    uint64_t report_problems = 0;
    std::string last_report_problem;
    std::chrono::system_clock::time_point last_report_problem_at;
  };
  // A change waiting to reach the kubelet through one plugin.
  struct KubeletPending {
    std::chrono::steady_clock::time_point since;
    bool list_ready = false;  // computed, but the plugin was not registered yet
  };

  void start_observing();
  void start_status_server();
  void record_discovery_error(const ConfigurationKey& key, const std::string& reason);
  void report_problem(const ConfigurationKey& key, const std::string& problem);
  void record_snapshot(const ConfigurationKey& key, size_t devices);
  // Records (and logs) why the Configuration does not run; the source tells
  // its users too (a Kubernetes Event), unless it found the problem itself
  // (an unresolved reference) or the refusal lasts a moment only.
  enum class Tell { users, log_only };
  void refused(const configuration::Configuration& configuration, const std::string& reason,
               Tell tell = Tell::users);
  void unresolved(const configuration::Configuration& configuration, const std::string& reason,
                  configuration::UnresolvedReference::Cause why);
  std::optional<ConfigurationKey> configuration_error(
      const configuration::ConfigurationError& error);
  void withdraw_orphans();
  std::vector<status_api::ConfigurationErrorStatus> configuration_error_statuses() const;
  void await_kubelet(const ConfigurationKey& configuration,
                     const std::set<capacity::InstanceKey>& changed,
                     std::chrono::steady_clock::time_point since);
  void list_computed(const std::string& resource);
  void registration_answered(const std::string& resource, const plugins::PluginStats& stats);
  BackendHooks backend_hooks(const std::string& kind, const std::string& resource);
  std::string instance_resource(const capacity::InstanceKey& key) const;
  std::string configuration_resource(const ConfigurationKey& key) const;
  status_api::DaemonStatus status();
  status_api::Readiness readiness();  // not const: it reads the store
  std::vector<status_api::ConfigurationStatus> configuration_statuses() const;
  std::vector<status_api::InstanceStatus> instance_statuses() const;
  std::vector<status_api::PluginStatus> plugin_statuses() const;
  void refresh_metrics();

  DaemonOptions options_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  metrics::Registry metrics_registry_;  // before everything that reports into it
  DaemonMetrics metrics_;
  boost::asio::io_context core_;
  boost::asio::signal_set signals_;
  // Set when anything comes from the cluster; before store_, which it makes.
  std::shared_ptr<kubernetes_backend::KubernetesBackend> kubernetes_;
  std::unique_ptr<store::InstanceStore> store_;
  capacity::CapacityManager capacity_;
  reconcile::InstanceReconciler reconciler_;
  plugins::PluginManager plugins_;
  discovery::DiscoveryManager discovery_;
  std::unique_ptr<configuration::ConfigurationSource> configurations_source_;
  std::unique_ptr<reclaim::SlotReclaimer> reclaimer_;
  std::unique_ptr<store::WatchSubscription> store_watch_;
  boost::asio::steady_timer expiry_timer_;
  boost::asio::steady_timer rewrite_timer_;
  bool rewrite_pending_ = false;  // rewrite_timer_ is set
  std::set<ConfigurationKey> rewrites_due_;
  // In use without a claim at the last pass of the reclaimer; warned of.
  std::set<reclaim::DeviceRef> unclaimed_before_, unclaimed_warned_;
  // The deviceUsage problems logged per Instance (report_unreadable_slots).
  std::map<capacity::InstanceKey, std::vector<std::string>> slot_problems_told_;
  std::vector<std::string> unnamed_slots_told_;     // see held_slots
  std::set<capacity::InstanceKey> unnamable_told_;  // see nameable_as_resource
  // This node's claims on Instances deleted from outside, by slot: put back
  // once the Instance is written again (pods here still use those slots).
  std::map<capacity::InstanceKey, std::map<uint32_t, naming::SlotUsage>> lost_claims_;
  // CL claims the reclaimer freed, by the id the kubelet knows them by: a CL
  // id names no slot, so one reported in use again (its pod was only hidden
  // from podresources, as after a kubelet restart without the API server)
  // is claimed again from here. An entry goes when its id is granted or
  // claimed again, or its Configuration goes.
  std::map<reclaim::DeviceRef, std::pair<capacity::InstanceKey, uint32_t>> freed_cl_claims_;
  std::chrono::milliseconds rewrite_delay_;

  std::map<ConfigurationKey, configuration::Configuration> configurations_;
  // The version of each Configuration whose discovery session last started
  // (its handler accepted it): what runs on if a change is refused at start.
  std::map<ConfigurationKey, configuration::Configuration> started_with_;
  std::map<capacity::InstanceKey, std::unique_ptr<Observed<plugins::InstancePluginBackend>>>
      instance_backends_;
  std::map<ConfigurationKey, std::unique_ptr<Observed<plugins::ConfigurationPluginBackend>>>
      configuration_backends_;
  std::set<capacity::InstanceKey> dirty_;
  bool refresh_posted_ = false;

  std::map<ConfigurationKey, DiscoveryRecord> discovery_records_;
  // Configurations their handler refused, with why (a running older
  // version of one, if any, stays in configurations_).
  std::map<ConfigurationKey, std::pair<configuration::Configuration, std::string>> refused_;
  // Refused ones waiting for read access to a kind they reference: their
  // Instances are not orphans (see withdraw_orphans).
  std::set<ConfigurationKey> waiting_for_access_;
  // Kept after their object was fixed, until the source says what came of
  // it (configuration_error_cleared).
  std::set<ConfigurationKey> verdict_pending_;
  // Refused only because another namespace's Configuration (or its
  // Instances here, see resource_name_holder) holds the name; each also in
  // refused_, with the Configuration to retry.
  std::map<ConfigurationKey, NameWait> waiting_for_name_;
  // Manifests (or objects) a source could not use, by source, until it is
  // fixed or goes; with when the error was first seen.
  struct ConfigurationErrorRecord {
    configuration::ConfigurationError error;
    std::chrono::system_clock::time_point since;
  };
  std::map<std::string, ConfigurationErrorRecord> configuration_errors_;
  // withdraw_orphans() waits for configuration_errors_ to clear.
  bool holding_orphans_ = false;
  // The source has given every Configuration it had at start.
  bool configurations_synced_ = false;
  // The Kubernetes source has listed the Configurations (readiness).
  bool configurations_listed_ = false;
  // False while the store's Instances were not listed yet (see list_instances).
  bool instances_listed_ = false;
  std::unique_ptr<InstanceListingRetry> instance_listing_retry_;
  // Deletions the store's watch told while that retry ran, by revision: its
  // listing may predate them, and must not bring those Instances back.
  std::map<capacity::InstanceKey, uint64_t> deleted_while_listing_;
  std::map<std::string, KubeletPending> kubelet_pending_;    // by resource name
  std::unique_ptr<status_api::StatusServer> status_server_;  // last: stops first
};

// One dowserd at a time for what a lock file guards: an exclusive flock on a
// regular file, released when the process ends, however it ends. The holder
// writes its pid into the file, for the message of the next one. Two guards:
//
// - The kubelet directory: <kubelet-dir>/dowserd.lock (the kubelet removes
//   only sockets there). A second dowserd there (a manual run beside the
//   service) re-registered every plugin over the first one's sockets and,
//   once stopped, left the kubelet with none while the first still said it
//   was ready.
// - The node, in the state directory: <state-dir>/node-<name>.lock. A
//   second dowserd with the first one's node name and file store but its
//   own kubelet directory (a debug run beside the service) freed every claim
//   of the first within seconds: its slot reclaimer asked its own kubelet,
//   which lists none of the first one's pods. Nodes of other names may share
//   the state directory (one file store for several nodes). With the
//   Kubernetes store the lock guards only dowserds that share the state
//   directory (accepted-requests is kept there with either store).
class DaemonLock {
 public:
  // What a lock guards, in the words of its messages.
  struct Guarded {
    std::filesystem::path dir;  // holds the lock file; created if missing
    std::string dir_option;     // the option that names dir, e.g. "--kubelet-dir"
    std::string file_name;      // the lock file, in dir
    std::string what;           // what its holder serves, e.g. "the kubelet directory /x"
    std::string remedy;         // what to do instead of running this one as it is
  };
  static Guarded kubelet_dir(const std::filesystem::path& kubelet_dir);
  // node_name is valid (a DNS subdomain), so it can name a file.
  static Guarded node(const std::filesystem::path& state_dir, const std::string& node_name);

  // Creates the directory if missing, then takes the lock, waiting up to
  // wait for a dowserd that is still stopping (a rolling update). Throws
  // std::runtime_error naming what is guarded and the process holding it.
  DaemonLock(const Guarded& guarded, std::chrono::milliseconds wait);
  DaemonLock(const DaemonLock&) = delete;
  DaemonLock& operator=(const DaemonLock&) = delete;
  // Takes the lock again, without waiting, in its directory made anew (the
  // lock file went with the old one). Throws as the constructor does.
  void retake();

 private:
  void lock(std::chrono::milliseconds wait) const;

  Guarded guarded_;
  UniqueFd fd_;  // holds the lock while open
};

}  // namespace dowser::daemon
