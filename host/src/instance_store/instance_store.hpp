// InstanceStore: where Instances live, shared by every node that sees them.
// Every update is a compare-and-swap on a per-Instance revision; watchers see
// every change, whoever made it. The file store is the embedded default;
// several daemons on one machine may share one store directory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace dowser::kube {
class KubeClient;
}

namespace dowser::store {

// An Akri Instance (akri.sh/v0), the fields dowser uses.
struct Instance {
  std::string namespace_name = "default";
  std::string name;                // <configuration>-<6 hex>
  std::string configuration_name;  // spec.configurationName
  std::string cdi_name;            // spec.cdiName: <domain>/<configuration>=<6 hex>
  uint32_t capacity = 1;           // spec.capacity
  std::map<std::string, std::string> broker_properties;  // spec.brokerProperties
  bool shared = false;                                   // spec.shared
  std::set<std::string> nodes;                           // spec.nodes (a set)
  // spec.deviceUsage: slot name (<instance>-<i>) -> "<node>" | "C:<vdev>:<node>".
  // A free slot is absent (an empty value is read as free too).
  std::map<std::string, std::string> device_usage;
  friend bool operator==(const Instance&, const Instance&) = default;
};

struct StoredInstance {
  Instance instance;
  uint64_t revision = 0;  // changes on every write; never reused for one name
};

class StoreError : public std::runtime_error {
 public:
  enum class Kind { conflict, not_found, already_exists, io };
  StoreError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

struct WatchEvent {
  enum class Type { upserted, deleted };
  Type type;
  StoredInstance object;  // for deleted: the last state seen
};

// A live watch; destroying it stops the callbacks (and waits for a running one).
class WatchSubscription {
 public:
  virtual ~WatchSubscription() = default;
};

// Thread-safe. Calls block on I/O: keep them off latency-critical threads
// where the store is remote.
class InstanceStore {
 public:
  virtual ~InstanceStore() = default;
  virtual std::vector<StoredInstance> list() = 0;
  virtual std::optional<StoredInstance> get(const std::string& namespace_name,
                                            const std::string& name) = 0;
  // Throws StoreError(already_exists | io). Returns the new revision.
  virtual uint64_t create(const Instance& instance) = 0;
  // Writes instance if its stored revision is still expected_revision.
  // Throws StoreError(conflict | not_found | io). Returns the new revision.
  virtual uint64_t update(const Instance& instance, uint64_t expected_revision) = 0;
  // Throws StoreError(conflict | not_found | io).
  virtual void remove(const std::string& namespace_name, const std::string& name,
                      uint64_t expected_revision) = 0;
  // Calls back, on a store thread, for every change after this call, by this
  // process or any other sharing the store; per Instance in revision order.
  // Rapid changes to one Instance may be coalesced into its latest state (one
  // created and deleted in between may not show at all), so treat events as
  // states, not as a log; an Instance that was reported gets its deleted
  // event. To miss nothing, watch() first, then list(), and keep per Instance
  // whichever state has the larger revision.
  // A callback may destroy its own subscription; it must not destroy the store.
  virtual std::unique_ptr<WatchSubscription> watch(
      std::function<void(const WatchEvent&)> callback) = 0;
  // Group commit: from defer_sync() on, writes this thread makes return
  // before they are durable, as `deferring` says; sync() makes them durable
  // together and ends the deferral. Every other write, and every other
  // thread's, is durable when it returns, and makes the deferred ones before
  // it durable too. One thread defers at a time. A store whose writes are
  // durable when they return anyway (the API server's) ignores both. sync()
  // throws StoreError(io).
  // - Deferring::creates: the Instances this thread creates are stored
  //   (readers see them) but may be in memory only. A new Instance holds no
  //   claim, so a crash before sync() loses nothing a pod relies on:
  //   discovery finds the device again.
  // - Deferring::flush (an Allocate's claims): every write of this thread
  //   returns once it is written to the disk, before the disk's volatile
  //   cache is flushed. A crash of dowserd loses nothing; a power cut loses
  //   it only if no flush of that disk came after, and the one that makes
  //   the kubelet's own record of the allocation durable does (with the
  //   state directory on the kubelet's disk): after a power cut dowser still
  //   knows every claim the kubelet knows of.
  enum class Deferring { creates, flush };
  virtual void defer_sync(Deferring /*deferring*/) {}
  virtual void sync() {}
  // Ends the deferral like sync(), but the store's own thread makes the
  // Instances durable, soon after, and this one goes on at once. A failure
  // is logged; the next durable write covers them.
  virtual void sync_in_background() { sync(); }
  // How many times the store made its journal durable (one fdatasync each)
  // since it opened, from any thread; nullopt for a store without one.
  virtual std::optional<uint64_t> journal_syncs() const { return std::nullopt; }
  // Instances the store cannot read now ("<path>: <reason>" each): list()
  // skips them, and their claims count for nothing until they are fixed.
  virtual std::vector<std::string> skipped() const { return {}; }
  // Throws StoreError when the store cannot be used at all; cheap (no
  // Instance is read), for readiness probes.
  virtual void check_access() {}
  // Why the last create, update or remove failed with StoreError(io) (a full
  // disk, say), until one succeeds; nullopt while the last one succeeded.
  // For readiness probes: a store that cannot write cannot claim slots.
  virtual std::optional<std::string> write_failure() const { return std::nullopt; }
};

// Defers the sync of the Instances this thread creates until it goes (see
// InstanceStore::defer_sync), then syncs them on this thread (a failed sync
// is logged as an error) or hands the sync to the store's own thread.
class DeferredSync {
 public:
  enum class SyncOn { this_thread, store_thread };
  explicit DeferredSync(InstanceStore& store, SyncOn sync_on = SyncOn::this_thread,
                        InstanceStore::Deferring deferring = InstanceStore::Deferring::creates)
      : store_(store), sync_on_(sync_on) {
    store_.defer_sync(deferring);
  }
  ~DeferredSync();
  DeferredSync(const DeferredSync&) = delete;
  DeferredSync& operator=(const DeferredSync&) = delete;

 private:
  InstanceStore& store_;
  SyncOn sync_on_;
};

// Re-reads and re-decides until a write wins (bounded): decide returns the
// Instance to write (same namespace and name), or nullopt to leave it as it
// is; an unchanged Instance is not written. Returns what is stored afterwards
// (nullopt if the Instance does not exist). Lost races back off with random
// jitter. Throws StoreError(io) or StoreError(conflict) after max_attempts
// lost races.
// `cached`, if given, is a copy believed current: the first attempt decides
// on it without reading the store, if that leads to a write (the
// compare-and-swap on its revision checks the belief). Saves a read per write.
inline constexpr int kUpdateAttempts = 16;  // lost races before update_with_retry gives up

std::optional<StoredInstance> update_with_retry(
    InstanceStore& store, const std::string& namespace_name, const std::string& name,
    const std::function<std::optional<Instance>(const Instance& current)>& decide,
    int max_attempts = kUpdateAttempts, const StoredInstance* cached = nullptr);

// One JSON file per Instance under <directory>/<namespace>/<name>.json, in
// Akri's Instance shape plus a top-level "revision". A flock on
// <directory>/.lock makes compare-and-swap safe across processes (readers take
// it shared), and revisions come from a store-wide counter in
// <directory>/.revision. Every write is first made durable in a write-ahead
// journal, <directory>/.journal (one fdatasync, no file created; a deferred
// sync, see Deferring, differs), then the Instance file is rewritten in place;
// opening the store redoes journalled writes a machine crash took from the
// files; from a quarter full, a thread of the store fsyncs the files the
// journal covers and empties it, and writes help only if it falls behind
// (journal_capacity bytes, zero-filled as it grows; by that thread, ahead, when
// it flushes deferred writes). Creates of a deferred sync share one fdatasync
// of the journal (a power cut before it could leave a new file torn:
// unreadable, holding no claim, logged). One inotify thread per store drives
// watches: it reads a changed file under the shared lock, except that the
// store's own writes, when nothing else touched the file since, it reports from
// memory (so it does not hold up the store's next write). Namespaces and names
// that are empty, contain '/' or start with '.' are refused (StoreError io).
// list() skips an unreadable file with a logged warning; get() of one throws
// StoreError(io) naming it. A full disk fails a write, not its file: the room a
// longer file needs is reserved before its old bytes are overwritten (a new
// file is not left empty); a file another I/O error left torn is rewritten from
// the journal by the next write, and the journal keeps the write until then.
inline constexpr size_t kDefaultJournalCapacity = size_t{16} << 20;

class FileInstanceStore : public InstanceStore {
 public:
  // Creates the directory if missing; redoes what the journal holds.
  explicit FileInstanceStore(std::filesystem::path directory,
                             size_t journal_capacity = kDefaultJournalCapacity);
  ~FileInstanceStore() override;
  std::vector<StoredInstance> list() override;
  std::optional<StoredInstance> get(const std::string& namespace_name,
                                    const std::string& name) override;
  uint64_t create(const Instance& instance) override;
  uint64_t update(const Instance& instance, uint64_t expected_revision) override;
  void remove(const std::string& namespace_name, const std::string& name,
              uint64_t expected_revision) override;
  std::unique_ptr<WatchSubscription> watch(
      std::function<void(const WatchEvent&)> callback) override;
  void defer_sync(Deferring deferring) override;
  void sync() override;
  void sync_in_background() override;
  std::optional<uint64_t> journal_syncs() const override;
  std::vector<std::string> skipped() const override;
  void check_access() override;
  std::optional<std::string> write_failure() const override;
  // How many Instance files the watch thread read back for events so far.
  uint64_t watch_file_reads() const;

 private:
  // The writes themselves; the public ones note whether they failed.
  uint64_t create_instance_file(const Instance& instance);
  uint64_t update_instance_file(const Instance& instance, uint64_t expected_revision);
  void remove_instance_file(const std::string& namespace_name, const std::string& name,
                            uint64_t expected_revision);

  struct State;
  std::unique_ptr<State> state_;
};

// Instances as Akri's `instances.akri.sh` (v0) objects in a Kubernetes API
// server, so that Akri's controller and kubectl read them as Akri's own:
// - create gives the Instance an owner reference (controller,
//   blockOwnerDeletion) to its Configuration (same namespace, uid looked up),
//   so deleting the Configuration garbage-collects it; if the Configuration
//   does not exist (yet) the Instance is created without one (logged at debug);
// - the revision is metadata.resourceVersion read as an unsigned integer.
//   Kubernetes calls it opaque, but etcd-backed API servers (and the test
//   server) give the etcd revision, which grows cluster-wide; any other form
//   is refused with StoreError(io);
// - update is a PUT carrying metadata.resourceVersion (409 -> conflict) that
//   keeps the rest of the stored metadata (owner references, labels, ...);
//   remove is a DELETE with a resourceVersion precondition;
// - deviceUsage is written as given: the capacity manager leaves free slots
//   out, as Akri's agent does, and "" (Akri's older pre-filled form) is read
//   as free by Akri's agent and controller alike;
// - watch() shares one Reflector (list + watch, re-list on 410) per store
//   among its subscriptions; the first watch() waits (up to 10 s) for the
//   first list, so every change after it returns is reported. A first list
//   that comes later reports every listed Instance as upserted, and every
//   one this process read or wrote before it and it lacks as deleted.
// namespace_name scopes list() and watch() to one namespace; "" is all.
class KubeInstanceStore : public InstanceStore {
 public:
  explicit KubeInstanceStore(std::shared_ptr<kube::KubeClient> client,
                             std::string namespace_name = "");
  ~KubeInstanceStore() override;
  std::vector<StoredInstance> list() override;
  std::optional<StoredInstance> get(const std::string& namespace_name,
                                    const std::string& name) override;
  uint64_t create(const Instance& instance) override;
  uint64_t update(const Instance& instance, uint64_t expected_revision) override;
  void remove(const std::string& namespace_name, const std::string& name,
              uint64_t expected_revision) override;
  std::unique_ptr<WatchSubscription> watch(
      std::function<void(const WatchEvent&)> callback) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dowser::store
