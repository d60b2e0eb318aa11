#include "daemon_metrics.hpp"

namespace dowser::daemon {

DaemonMetrics::DaemonMetrics(metrics::Registry& registry, const std::string& version)
    : configurations(registry.gauge("dowser_configurations",
                                    "Configurations by state (starting, discovering, failing, "
                                    "refused, change_refused: an earlier version runs).",
                                    {"state"})),
      instances(registry.gauge("dowser_instances",
                               "Instances of a Configuration visible on this node.",
                               {"namespace", "configuration", "shared"})),
      slots(registry.gauge("dowser_slots",
                           "Slots of the Instances of a Configuration visible on this node, by "
                           "state: free, offline (free on a device that is offline), "
                           "instance_level and configuration_level (held by this node's plugins), "
                           "other_nodes, unreadable.",
                           {"namespace", "configuration", "state"})),
      configuration_errors(registry
                               .gauge("dowser_configuration_errors",
                                      "Configuration manifests (or cluster objects) the daemon "
                                      "could not use: they do not parse, or repeat a name.")
                               .with()),
      discovered_devices(registry.gauge("dowser_discovered_devices",
                                        "Devices in the last discovery snapshot of a "
                                        "Configuration.",
                                        {"namespace", "configuration"})),
      discovery_snapshots(registry.counter("dowser_discovery_snapshots_total",
                                           "Discovery snapshots received, per handler.",
                                           {"handler"})),
      discovery_errors(registry.counter("dowser_discovery_errors_total",
                                        "Discovery sessions that failed or could not start, per "
                                        "handler.",
                                        {"handler"})),
      discovery_report_problems(
          registry.counter("dowser_discovery_report_problems_total",
                           "What the host did not take from handlers' reports, per handler: "
                           "a report refused, a device left out of a snapshot (each told once "
                           "until it changes), a report after stop.",
                           {"handler"})),
      discovery_to_kubelet(
          registry
              .histogram("dowser_discovery_to_kubelet_seconds",
                         "From applying a snapshot that adds, removes or takes offline a device "
                         "to its plugins' lists being ready for a kubelet that accepted them.",
                         metrics::latency_buckets())
              .with()),
      allocations(registry.counter("dowser_allocate_total",
                                   "Allocate calls from the kubelet, by plugin kind and result "
                                   "(ok, refused, error: the instance store failed).",
                                   {"kind", "result"})),
      allocation_seconds(registry.histogram("dowser_allocate_duration_seconds",
                                            "Time to serve an Allocate call (claims written).",
                                            metrics::latency_buckets(), {"kind"})),
      slot_claims(registry.counter("dowser_slot_claims_total",
                                   "Slots newly claimed by this node, by plugin kind.", {"kind"})),
      slot_releases(registry.counter("dowser_slot_releases_total",
                                     "Slots this node freed (rollbacks and reclaims), by plugin "
                                     "kind.",
                                     {"kind"})),
      slot_restores(registry.counter("dowser_slot_restores_total",
                                     "Claims of this node written back while a pod here used "
                                     "the slot: lost from outside (the Instance deleted or "
                                     "edited), or freed by the reclaimer while the kubelet "
                                     "listed no pods, by plugin kind.",
                                     {"kind"})),
      slot_reclaims(registry
                        .counter("dowser_slot_reclaims_total",
                                 "Claims freed because no container held them for the grace "
                                 "period.")
                        .with()),
      slot_conflicts(registry
                         .counter("dowser_slot_conflicts_total",
                                  "Slot writes that lost a compare-and-swap race and were "
                                  "retried.")
                         .with()),
      registrations(registry.counter("dowser_kubelet_registrations_total",
                                     "Answers to plugin registrations with the kubelet (ok, "
                                     "failed).",
                                     {"result"})),
      reregistrations(registry
                          .counter("dowser_kubelet_reregistrations_total",
                                   "Successful registrations of plugins that had registered "
                                   "before (kubelet restarts, deleted sockets).")
                          .with()),
      plugins(registry.gauge("dowser_plugins", "Device plugins served, by kind and registration.",
                             {"kind", "registered"})),
      handlers_loaded(
          registry.gauge("dowser_handlers_loaded", "Discovery handlers loaded.").with()),
      handler_load_failures(registry.gauge("dowser_handler_load_failures",
                                           "Handler files refused at the last scan, by stage.",
                                           {"stage"})) {
  registry.gauge("dowser_build_info", "dowserd's version.", {"version"}).with({version}).set(1);
}

BackendHooks DaemonMetrics::backend_hooks(const std::string& kind,
                                          std::function<void()> list_computed) {
  return {&allocations.with({kind, "ok"}), &allocations.with({kind, "refused"}),
          &allocations.with({kind, "error"}), &allocation_seconds.with({kind}),
          std::move(list_computed)};
}

}  // namespace dowser::daemon
