// InstanceReconciler: turns each discovery snapshot of a Configuration into
// Instances in the store. This node joins the Instances of the devices it
// sees and withdraws from the ones it no longer sees: at once for local
// devices, after the Configuration's grace period for shared ones (all
// their slots Unhealthy meanwhile). The last node out deletes an Instance.
// It is also the daemon's catalog of discovered devices.
//
// Not thread-safe: owned by the daemon's core thread.
#pragma once

#include "capacity_manager.hpp"
#include "configuration.hpp"
#include "handler_registry.hpp"
#include "instance_store.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dowser::reconcile {

using Clock = std::chrono::steady_clock;
using ConfigurationKey = std::pair<std::string, std::string>;  // namespace, name

// The Instance a device becomes: name, cdiName, capacity, brokerProperties
// (device properties with the Configuration's laid over), shared; nodes and
// deviceUsage are left to the caller.
store::Instance instance_for(const configuration::Configuration& configuration,
                             const Device& device, const std::string& node,
                             const std::string& resource_domain);

class InstanceReconciler : public capacity::DeviceCatalog {
 public:
  InstanceReconciler(store::InstanceStore& store, capacity::CapacityManager& capacity,
                     std::string node, std::string resource_domain);

  // Applies a complete snapshot. Returns the Instances whose visibility or
  // offline state changed on this node (their plugins need a look). A device
  // missing from it goes offline (every slot Unhealthy) and stays while a
  // shared device's grace lasts, or while this node's pods still hold slots
  // of it: they keep their claims, which hold again if the device comes
  // back. Otherwise this node withdraws from it.
  std::set<capacity::InstanceKey> reconcile(const configuration::Configuration& configuration,
                                            const host::Snapshot& devices, Clock::time_point now);

  // Applies what changed since the Configuration's previous snapshot, with
  // the effect of reconciling the snapshot it describes, at a cost that
  // follows the changes rather than the devices (unless the Configuration
  // changed, or a write failed: then every device is written again).
  std::set<capacity::InstanceKey> apply(const configuration::Configuration& configuration,
                                        const host::DeviceChanges& changes, Clock::time_point now);

  // Applies a changed Configuration (capacity, brokerProperties) to the
  // devices last reported; nothing before its first snapshot.
  std::set<capacity::InstanceKey> reapply(const configuration::Configuration& configuration,
                                          Clock::time_point now);

  // The store has a new version of the Instance, or none: if its device is
  // reported but the Instance no longer lists this node (someone deleted it,
  // or took this node out), the Configuration's next snapshot or reapply()
  // joins it again; returns that Configuration, the first time.
  std::optional<ConfigurationKey> stored_instance_changed(const capacity::InstanceKey& instance);

  // The Configurations one of whose Instances could not be written since the
  // last call (a torn file in the way, a full disk): reapply() them later.
  std::set<ConfigurationKey> take_failed_writes() { return std::exchange(failed_writes_, {}); }

  // Withdrawals that could not be written (the store failed): this node
  // still stands in those Instances. retry_withdrawals() tries each again,
  // unless its device was reported again since; returns those it tried.
  bool withdrawals_failed() const { return !failed_withdrawals_.empty(); }
  std::set<capacity::InstanceKey> retry_withdrawals();

  // Discovery of the Configuration failed (the handler ended its session,
  // or could not start it): what it last reported is unknown now, not gone.
  // Its devices stay, with those stored before a restart and not reported
  // since, and all their slots are Unhealthy until the next complete
  // snapshot says what is there. Returns them (their plugins need a look).
  std::set<capacity::InstanceKey> discovery_failed(const ConfigurationKey& configuration);

  // Withdraws this node from every Instance of the Configuration (it was
  // deleted or withdrawn, or its discovery changed handler), reported or
  // only stored.
  std::set<capacity::InstanceKey> withdraw_all(const ConfigurationKey& configuration);

  // Withdraws this node from stored Instances of Configurations not in
  // `known` (deleted while the daemon was down, or refused). The log says
  // why(owner): "is gone", say.
  std::set<capacity::InstanceKey> withdraw_unknown(
      const std::set<ConfigurationKey>& known,
      const std::function<std::string(const ConfigurationKey&)>& why);

  // Withdraws from offline devices whose grace ran out and whose slots this
  // node no longer holds. Call it again when claims are released.
  std::set<capacity::InstanceKey> expire(Clock::time_point now);

  // When the next grace period runs out, if any (devices held by claims
  // wait for their release instead).
  std::optional<Clock::time_point> next_expiry() const;

  // DeviceCatalog
  const Device* device(const capacity::InstanceKey& instance) const override;
  bool offline(const capacity::InstanceKey& instance) const override;
  std::vector<capacity::InstanceKey> instances_of(const std::string& namespace_name,
                                                  const std::string& configuration) const override;
  bool is_instance_of(const capacity::InstanceKey& instance,
                      const std::string& configuration) const override;

  // Instances (from the capacity manager's cache) that list this node.
  bool visible_here(const store::Instance& instance) const;

  // Advertise first, write after: from here until write_staged(), the new
  // Instance of a local device goes into the capacity pool (revision 0, so
  // that the stored copy replaces it) without a write, and its plugins may
  // be offered at once. The caller must not let a claim in before
  // write_staged() (the core thread does both in one task). Shared devices
  // are still created first: another node may hold slots of theirs.
  void stage_creates() { staging_ = true; }
  // Creates the staged Instances and ends staging. Returns those that did
  // not end as staged (written to an Instance another writer created, or
  // not written and withdrawn from the pool): their plugins need a look.
  std::set<capacity::InstanceKey> write_staged();

 private:
  struct Seen {
    ConfigurationKey configuration;
    Device device;
    std::optional<Clock::time_point> offline_until;  // set while the device is missing
    uint64_t snapshot = 0;  // the last snapshot that held the device (snapshots_)
    // A stored Instance not reported since the restart (adopt_stored): its
    // device is not known, so any device that makes its name may take it.
    bool adopted = false;
  };

  // A device whose Instance name another device of its Configuration holds
  // (the name keeps 24 bits of a digest of the id, as Akri's does: about 3 %
  // of 1000-device Configurations have such a pair). The device that holds
  // the name keeps it while it has an entry in seen_ (reported, or kept
  // offline); the others are left out, said once, and one of them takes the
  // name when it is free (offer_waiting).
  struct Waiting {
    ConfigurationKey configuration;
    Device device;
  };
  using WaitingKey = std::pair<capacity::InstanceKey, std::string>;  // name, device id

  bool holds_claims(const capacity::InstanceKey& key) const;  // this node's, IL or CL
  std::set<capacity::InstanceKey> instance_keys_of(const ConfigurationKey& configuration) const;
  bool lists_this_node(const capacity::InstanceKey& key) const;  // the cached Instance

  // A device of a snapshot: written unless known as it is (same
  // Configuration, online, in an Instance that lists this node).
  void report(const configuration::Configuration& configuration, const Device& device,
              bool same_configuration, uint64_t snapshot, std::set<capacity::InstanceKey>& changed);
  // The device of `seen` is no longer reported; false if its entry is gone.
  bool went_missing(const capacity::InstanceKey& key, Seen& seen, std::chrono::seconds grace,
                    Clock::time_point now, std::set<capacity::InstanceKey>& changed);
  // The devices the Configuration's last snapshot held, with `changes`.
  host::Snapshot reported_devices(const ConfigurationKey& configuration,
                                  const host::DeviceChanges& changes) const;
  void rejoin_unlisted(const configuration::Configuration& configuration, uint64_t snapshot,
                       std::set<capacity::InstanceKey>& changed);
  // True if another device holds the name `instance` (device waits then).
  bool name_held_by_another(const ConfigurationKey& configuration,
                            const capacity::InstanceKey& instance, const Device& device);
  // Reports the waiting devices of the Configuration whose name is free now.
  void offer_waiting(const configuration::Configuration& configuration, uint64_t snapshot,
                     std::set<capacity::InstanceKey>& changed);
  capacity::InstanceKey key_of(const configuration::Configuration& configuration,
                               const Device& device) const;
  void adopt_stored(const ConfigurationKey& configuration);
  // Erases an entry of seen_ (and of offline_).
  std::map<capacity::InstanceKey, Seen>::iterator forget(
      std::map<capacity::InstanceKey, Seen>::iterator seen);
  void join(const store::Instance& wanted);
  // Creates wanted with this node in it (or stages it, see stage_creates);
  // false if it exists already.
  bool create(const store::Instance& wanted);
  // Logs a failed write of the Configuration's Instance; the next snapshot
  // writes every Instance again.
  void write_failed(const ConfigurationKey& configuration, const std::string& instance,
                    const store::StoreError& error);
  void withdraw(const capacity::InstanceKey& key);
  bool try_withdraw(const capacity::InstanceKey& key);
  void remove_last_node_out(const capacity::InstanceKey& key, uint64_t revision);

  store::InstanceStore& store_;
  capacity::CapacityManager& capacity_;
  std::string node_;
  std::string domain_;
  std::map<capacity::InstanceKey, Seen> seen_;
  std::set<capacity::InstanceKey> offline_;  // the entries of seen_ with offline_until
  uint64_t snapshots_ = 0;                   // snapshots reconciled, of any Configuration
  // The Configuration each one's last snapshot was applied with: a changed
  // one (capacity, brokerProperties) rewrites every Instance.
  std::map<ConfigurationKey, configuration::Configuration> reconciled_with_;
  std::set<ConfigurationKey> reported_;  // Configurations with a snapshot applied
  // Configurations whose discovery failed since their last complete snapshot.
  std::set<ConfigurationKey> discovery_failed_;
  std::set<ConfigurationKey> failed_writes_;
  std::set<capacity::InstanceKey> failed_withdrawals_;
  // Reported devices whose Instance the store no longer shows with this node.
  std::set<capacity::InstanceKey> unlisted_;
  std::map<WaitingKey, Waiting> waiting_for_name_;
  // (name, device id) pairs whose clash was logged: said once, not per snapshot.
  std::set<std::pair<capacity::InstanceKey, std::string>> clashes_told_;
  bool staging_ = false;
  std::map<capacity::InstanceKey, store::Instance> staged_;  // pooled, not written yet
};

}  // namespace dowser::reconcile
