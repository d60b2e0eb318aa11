// CapacityManager: the one slot pool behind every plugin. A device with
// capacity N has N slots; each is free, held by the Instance-level (IL)
// plugin of a node, or held by the Configuration-level (CL) plugin of a node
// for one virtual device. Every claim or release is one compare-and-swap on
// the Instance in the store, so (# IL + # CL claims) <= capacity holds
// across every node that shares the store.
//
// Not thread-safe: owned by the daemon's core thread.
#pragma once

#include "instance_store.hpp"
#include "naming.hpp"

#include <dowser/handler.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dowser::capacity {

using InstanceKey = std::pair<std::string, std::string>;  // namespace, name

enum class UniqueInstances { required, preferred };

// One device as a kubelet sees it in a ListAndWatch list.
struct PluginDevice {
  std::string id;
  bool healthy = true;
  friend bool operator==(const PluginDevice&, const PluginDevice&) = default;
};
// A list as advertised, shared read-only between threads: whoever holds one
// sees it as it was when taken.
using SharedDeviceList = std::shared_ptr<const std::vector<PluginDevice>>;

// The slots of one Instance, decoded from its deviceUsage. Entries that do
// not decode (unknown slot names, bad values) are kept in `problems` and
// their slots counted as held, never as free: a slot is only handed out
// when it is known to be free.
struct InstanceSlots {
  std::string name;
  uint32_t capacity = 0;
  std::vector<naming::SlotUsage> slots;  // by index
  std::vector<bool> unreadable;          // by index: held by something unparsable
  std::vector<std::string> problems;
  bool offline = false;  // the device is not usable now (DeviceCatalog::offline): all Unhealthy

  static InstanceSlots decode(const store::Instance& instance, bool offline = false);
  bool is_free(uint32_t index) const { return slots[index].is_free() && !unreadable[index]; }
  // The slot exists and is free, or usage holds it already (a claim made again).
  bool claimable_by(uint32_t index, const naming::SlotUsage& usage) const {
    return index < capacity && (is_free(index) || slots[index] == usage);
  }
  uint32_t free_count() const;
  std::optional<uint32_t> first_free() const;
  // The slot usage holds already, else the first free one.
  std::optional<uint32_t> held_by_or_first_free(const naming::SlotUsage& usage) const;
};

// How the slots of some Instances stand, seen from one node: for operators
// (metrics, status), never for deciding a claim.
struct SlotTally {
  uint64_t free = 0;                 // free, on a device that is online
  uint64_t offline = 0;              // free, but the device is offline: not for use now
  uint64_t instance_level = 0;       // held by this node's IL plugin
  uint64_t configuration_level = 0;  // held by this node's CL plugin
  uint64_t other_nodes = 0;          // held by another node's plugins
  uint64_t unreadable = 0;           // held by a value that does not decode
  void add(const InstanceSlots& instance, const std::string& node);
  uint64_t total() const;
};

// The IL plugin's list: slot ids, Healthy when free or held by this node's
// IL plugin, else Unhealthy (and every slot Unhealthy when offline).
std::vector<PluginDevice> instance_level_devices(const InstanceSlots& instance,
                                                 const std::string& node);

// A slot this node's CL plugin holds: its instance and slot index.
struct ClaimedSlot {
  std::string instance;
  uint32_t slot = 0;
  friend bool operator==(const ClaimedSlot&, const ClaimedSlot&) = default;
};

// The order of virtual device ids: the decimal ids dowser makes by value,
// then any others (written by Akri, say) by text. Cheap: no number parsing.
struct VdevOrder {
  bool operator()(std::string_view a, std::string_view b) const;
  using is_transparent = void;
};

// An Instance a new virtual device may go to: online, with free slots.
struct Candidate {
  uint32_t free = 0;
  std::string instance;
};
// Most free slots first, ties by name.
struct CandidateOrder {
  bool operator()(const Candidate& a, const Candidate& b) const;
};

// The virtual devices of one CL plugin (one Configuration on one node):
// every vdev this node holds through it, plus placeholders: one per
// Instance with a free slot (Required) or one per free slot (Preferred).
// Ids are "0", "1", ...: the smallest unused; a placeholder keeps its id
// until consumed, so lists do not churn.
// Kept up to date one Instance at a time (put, remove), the list for the
// kubelet included, so an Allocate or a list update costs what changed, not
// the size of the Configuration.
class VirtualDeviceTable {
 public:
  VirtualDeviceTable(std::string node, UniqueInstances policy);
  // Puts an Instance's current slots in, replacing what it had.
  void put(InstanceSlots instance);
  // Takes an Instance out (no-op if it is not in).
  void remove(const std::string& instance);
  void set_policy(UniqueInstances policy);
  UniqueInstances policy() const { return policy_; }
  // Ids the kubelet reports in use by a container though no claim of this
  // node is on them (a claim removed from outside, or dropped by a smaller
  // capacity). The kubelet still counts them as allocated, so none may be
  // offered as a free placeholder: their ids stay taken, and a placeholder
  // that has one is withdrawn and replaced under a fresh id.
  void set_held_without_claim(const std::set<std::string>& vdevs);

  // Every vdev, in VdevOrder: claimed ones (Unhealthy when their device is
  // offline) and placeholders.
  const std::vector<PluginDevice>& devices() const { return *list_; }
  // The same list, shared: it never changes while someone holds it (the
  // table copies it before its next change), so a holder may compare it to
  // a later one by address.
  SharedDeviceList shared_devices() const { return list_; }
  const std::map<std::string, ClaimedSlot, VdevOrder>& claimed() const { return claimed_; }
  bool is_placeholder(const std::string& vdev) const { return placeholders_.count(vdev) > 0; }
  // A vdev this node holds on a device that is offline (listed Unhealthy).
  bool is_offline(const std::string& vdev) const { return offline_claims_.count(vdev) > 0; }
  const std::set<Candidate, CandidateOrder>& candidates() const { return candidates_; }
  bool contains(const std::string& instance) const { return instances_.count(instance) > 0; }
  std::vector<std::string> instance_names() const;

 private:
  // What one Instance adds to the table; subtract(add(x)) leaves it as before.
  void add(const InstanceSlots& instance);
  void subtract(const InstanceSlots& instance);
  size_t placeholders_wanted(const InstanceSlots& instance) const;
  // The vdevs this node holds in an Instance, as listed (with their health).
  std::vector<PluginDevice> listed_claims(const InstanceSlots& instance) const;
  // Placeholders for wanted_: consumed ones go, surplus ones go from the
  // top, missing ones take the smallest unused ids.
  void settle_placeholders();
  // Makes the list's entry for a vdev say what claimed_ and placeholders_ say.
  void sync_listed(const std::string& vdev);
  std::vector<PluginDevice>& writable_list();
  void take_id(const std::string& vdev);
  void release_id(const std::string& vdev);

  std::string node_;
  UniqueInstances policy_;
  std::map<std::string, InstanceSlots> instances_;  // by name
  std::map<std::string, ClaimedSlot, VdevOrder> claimed_;
  std::set<std::string> offline_claims_;  // claimed vdevs whose device is offline
  std::set<std::string, VdevOrder> placeholders_;
  std::set<std::string, VdevOrder> held_without_claim_;
  std::set<Candidate, CandidateOrder> candidates_;
  size_t wanted_ = 0;  // placeholders to advertise
  std::shared_ptr<std::vector<PluginDevice>> list_ = std::make_shared<std::vector<PluginDevice>>();
  // The numbers of the decimal ids in claimed_, placeholders_ or
  // held_without_claim_, sorted, so
  // the smallest unused one is a binary search away.
  std::vector<uint64_t> numbers_taken_;
};

// For one container request of a CL Allocate: which vdevs reuse a slot this
// node already holds, and which are new (to claim on the table's candidates).
struct ContainerPlan {
  std::vector<std::pair<std::string, ClaimedSlot>> reused;
  std::vector<std::string> new_vdevs;
};

// Throws std::invalid_argument with a message the kubelet will show.
ContainerPlan plan_container(const std::vector<std::string>& vdevs,
                             const VirtualDeviceTable& table);

// What an Allocate claimed, per container request: (instance, slot index).
using ContainerClaims = std::vector<std::pair<std::string, uint32_t>>;

// What the daemon knows about the pool's devices (core thread).
class DeviceCatalog {
 public:
  virtual ~DeviceCatalog() = default;
  // The device discovered behind an Instance (mounts, device nodes), if seen.
  virtual const Device* device(const InstanceKey& instance) const = 0;
  // Not usable now, every slot Unhealthy: a device not reported now (kept
  // for its grace period or its claims), or one whose discovery failed.
  virtual bool offline(const InstanceKey& instance) const = 0;
  // The Configuration's Instances this node can use now, by name.
  virtual std::vector<InstanceKey> instances_of(const std::string& namespace_name,
                                                const std::string& configuration) const = 0;
  // Whether instances_of would list this Instance, at the cost of one lookup.
  virtual bool is_instance_of(const InstanceKey& instance,
                              const std::string& configuration) const = 0;
};

class AllocationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An allocation the instance store failed (an I/O error: a full disk, an
// unreadable file), not one the pool could not meet: an error, not a refusal.
class AllocationStoreError : public AllocationError {
 public:
  using AllocationError::AllocationError;
};

class CapacityManager {
 public:
  // Called after a cached Instance changed (claim, release, store watch);
  // not for a new revision of the same content (a staged Instance written).
  using ChangeListener = std::function<void(const store::StoredInstance& now)>;
  // What the pool wrote, for metrics: a slot claimed, released, or restored
  // (see restore), or a compare-and-swap lost to another writer (and retried).
  enum class SlotEvent { claimed, released, restored, lost_race };
  using SlotObserver = std::function<void(SlotEvent, const naming::SlotUsage& usage)>;
  // Called for every slot an Allocate grants, newly claimed or held before
  // (a container restarted), once the whole call has succeeded.
  using GrantListener = std::function<void(const InstanceKey& instance, uint32_t slot)>;

  CapacityManager(store::InstanceStore& store, std::string node);

  const std::string& node() const { return node_; }

  // The cache of Instances, fed by the store watch and by our own writes.
  // Returns false (and changes nothing) for a revision older than cached.
  bool apply(const store::StoredInstance& stored);
  void forget(const InstanceKey& key);
  const store::StoredInstance* find(const InstanceKey& key) const;
  const std::map<InstanceKey, store::StoredInstance>& instances() const { return cache_; }
  void set_change_listener(ChangeListener listener) { listener_ = std::move(listener); }
  void set_slot_observer(SlotObserver observer) { slot_observer_ = std::move(observer); }
  void set_grant_listener(GrantListener listener) { grant_listener_ = std::move(listener); }

  // IL Allocate: claims the named slots (ids "<instance>-<i>") for this
  // node, per container request; a slot this node's IL already holds is
  // reused. All or nothing: on failure every claim of the call is undone.
  // Its writes are on the disk when it returns, and the store's thread
  // flushes them right after (InstanceStore::Deferring::flush).
  std::vector<ContainerClaims> allocate_instance_level(
      const InstanceKey& instance, const std::vector<std::vector<std::string>>& container_ids,
      bool offline);

  // CL Allocate: per container request, vdevs this node holds are reused and
  // the others claim slots of distinct Instances (Required; Preferred may
  // fall back to more slots of one) among the table's candidates, as planned
  // by plan_container. All or nothing, like allocate_instance_level. The
  // table may be stale: every claim is decided again on the stored Instance.
  std::vector<ContainerClaims> allocate_configuration_level(
      const std::string& namespace_name,
      const std::vector<std::vector<std::string>>& container_vdevs, const VirtualDeviceTable& table,
      UniqueInstances policy);

  // Frees a slot if (and only if) it still holds `expected`. Returns true
  // when it was freed.
  bool release(const InstanceKey& instance, uint32_t slot, const naming::SlotUsage& expected);

  // Writes usage into the slot if it is free (or holds it already): a claim
  // of this node's that the store lost (the Instance deleted from outside)
  // while a pod here still uses the slot. Returns whether the slot holds it.
  bool restore(const InstanceKey& instance, uint32_t slot, const naming::SlotUsage& usage);

 private:
  struct Claim {
    InstanceKey instance;
    uint32_t slot;
    naming::SlotUsage usage;
    bool newly_claimed;  // false when the slot already held this usage (re-allocation)
  };
  using ChooseSlot = std::function<std::optional<uint32_t>(const InstanceSlots&)>;

  // One compare-and-swap: writes `wanted` into the slot `choose` picks, and
  // reports `written` if it did. nullopt when the Instance is gone or no slot fits.
  std::optional<Claim> claim(const InstanceKey& instance, const ChooseSlot& choose,
                             const naming::SlotUsage& wanted,
                             SlotEvent written = SlotEvent::claimed);
  // claim() of one named slot, if it is free or already holds `usage`.
  std::optional<Claim> claim_slot(const InstanceKey& instance, uint32_t slot,
                                  const naming::SlotUsage& usage, SlotEvent written);
  std::string refusal_of_slot(const InstanceKey& instance, const std::string& id,
                              uint32_t index) const;
  // Confirms on the stored Instance that a vdev the table shows held by this
  // node still is (or takes its slot again if it was freed meanwhile).
  Claim claim_reused(const std::string& namespace_name, const std::string& vdev,
                     const ClaimedSlot& held);
  std::optional<Claim> claim_for_vdev(const std::string& namespace_name, const std::string& vdev,
                                      const VirtualDeviceTable& table, std::set<std::string>& used,
                                      UniqueInstances policy);
  void rollback(const std::vector<Claim>& claims);
  // Runs body, which records every claim it makes; if it fails, every one of
  // them is undone (a call claims all it was asked for or nothing). If it
  // succeeds, every slot granted (in namespace_name) goes to the grant listener.
  using AllocationBody = std::function<std::vector<ContainerClaims>(std::vector<Claim>& made)>;
  std::vector<ContainerClaims> all_or_nothing(const std::string& namespace_name,
                                              const AllocationBody& body);
  // Reports the races lost, then `event` (unless nullopt).
  void observe(std::optional<SlotEvent> event, const naming::SlotUsage& usage, int lost_races);

  store::InstanceStore& store_;
  std::string node_;
  std::map<InstanceKey, store::StoredInstance> cache_;
  ChangeListener listener_;
  SlotObserver slot_observer_;
  GrantListener grant_listener_;
};

}  // namespace dowser::capacity
