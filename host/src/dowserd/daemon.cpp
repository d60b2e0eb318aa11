#include "daemon.hpp"

#include "thread_names.hpp"

#include <sys/stat.h>

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <thread>

namespace dowser::daemon {
namespace {

constexpr auto kApiProbeInterval = std::chrono::seconds(5);
// Backoff of listing Instances again when the API server did not answer at start.
constexpr std::chrono::milliseconds kFirstListingRetry{500};
constexpr std::chrono::milliseconds kMaxListingRetry{15'000};
// Backoff of retrying Instance writes that failed.
constexpr std::chrono::milliseconds kFirstRewriteDelay{1000};
constexpr std::chrono::milliseconds kMaxRewriteDelay{60'000};

capacity::UniqueInstances policy_of(const configuration::Configuration& configuration) {
  return configuration.unique_instances == configuration::UniqueInstances::preferred
             ? capacity::UniqueInstances::preferred
             : capacity::UniqueInstances::required;
}

// Where a report's way to the kubelet went, for whoever looks into a slow
// one (and bench/dowser-bench --discovery-split, which parses it).
void log_report(const std::pair<std::string, std::string>& key, const host::DeviceChanges& changes,
                const AdvertiseTimes& times) {
  auto micros = [](auto from, auto to) {
    return std::chrono::duration_cast<std::chrono::microseconds>(to - from).count();
  };
  spdlog::debug(
      "Configuration {}/{}: {} devices ({} new or changed, {} gone) advertised: {} us waiting "
      "for the core thread, {} us reconciling, {} us offering CL lists, {} us writing new "
      "Instances, {} us serving IL plugins, {} us handing their sync to the store",
      key.first, key.second, changes.devices, changes.reported.size(), changes.gone.size(),
      micros(changes.reported_at, times.started), micros(times.started, times.reconciled),
      micros(times.reconciled, times.offered), micros(times.offered, times.written),
      micros(times.written, times.served), micros(times.served, times.synced));
}

}  // namespace

// Lists the store's Instances on a thread of its own, again and again with
// backoff, until a listing succeeds; hands it to `listed` (on that thread).
// Off the core thread: each try may wait for a connection timeout.
// Destroying it stops the retries, after a listing in progress returns.
class InstanceListingRetry {
 public:
  using Listed = std::function<void(const std::vector<store::StoredInstance>&)>;
  InstanceListingRetry(store::InstanceStore& store, Listed listed)
      : thread_([&store, listed = std::move(listed)](const std::stop_token& stop) {
          retry(stop, store, listed);
        }) {}

 private:
  static void retry(const std::stop_token& stop, store::InstanceStore& store,
                    const Listed& listed) {
    name_this_thread("store-list");
    std::mutex mutex;
    std::condition_variable_any stopped;
    for (auto delay = kFirstListingRetry;; delay = std::min(delay * 2, kMaxListingRetry)) {
      std::unique_lock lock(mutex);
      stopped.wait_for(lock, stop, delay, [] { return false; });
      if (stop.stop_requested()) return;
      try {
        listed(store.list());
        return;
      } catch (const std::exception& e) {  // whatever it was, it is tried again
        spdlog::debug("listing Instances failed again: {}", e.what());
      }
    }
  }

  std::jthread thread_;
};

Daemon::Daemon(DaemonOptions options)
    : options_(std::move(options)),
      metrics_(metrics_registry_, options_.version),
      signals_(core_, SIGTERM, SIGINT, SIGHUP),
      kubernetes_(options_.kubernetes),
      store_(make_store()),
      capacity_(*store_, options_.node_name),
      reconciler_(*store_, capacity_, options_.node_name, options_.resource_domain),
      plugins_(core_, plugins::PluginManagerOptions{options_.kubelet_dir}),
      discovery_(core_,
                 discovery::DiscoveryOptions{
                     .handler_dir = options_.handler_dir,
                     .handler_rescan = options_.handler_rescan,
                     .accepted_requests_file = options_.state_dir / "accepted-requests"},
                 discovery::DiscoveryManager::Events{
                     [this](const ConfigurationKey& key, const host::DeviceChanges& changes) {
                       devices_changed(key, changes);
                     },
                     [this](const ConfigurationKey& key, const std::string& reason) {
                       discovery_failed(key, reason);
                     },
                     [this](const ConfigurationKey& key, const std::string& reason) {
                       refused_by_handler(key, reason);
                     },
                     [this](const ConfigurationKey& key, const std::string& problem) {
                       report_problem(key, problem);
                     },
                     [this](const ConfigurationKey& key) { discovery_started(key); }}),
      expiry_timer_(core_),
      rewrite_timer_(core_),
      rewrite_delay_(kFirstRewriteDelay) {}

Daemon::~Daemon() { shutdown(); }

int Daemon::run() {
  start();
  await_signal();
  core_.run();
  return 0;
}

void Daemon::await_signal() {
  signals_.async_wait([this](const boost::system::error_code& error, int signal) {
    if (error) return;
    if (signal == SIGHUP) {
      spdlog::info(
          "SIGHUP received and ignored: dowserd has nothing to reload, it follows its "
          "Configurations and its handler directory as they change");
      await_signal();
      return;
    }
    spdlog::info("signal {}: stopping", signal);
    shutdown();
    core_.stop();
  });
}

// An Allocate's claim is durable with the next flush of the state
// directory's disk, the kubelet's record of it with the next of its own
// (docs/operators.md): on two disks a power cut could keep only the second.
void Daemon::warn_if_state_is_off_the_kubelets_file_system() const {
  struct stat state {};
  struct stat kubelet {};
  if (::stat(options_.state_dir.c_str(), &state) != 0 ||
      ::stat(options_.kubelet_dir.c_str(), &kubelet) != 0 || state.st_dev == kubelet.st_dev)
    return;
  spdlog::warn(
      "the state directory {} is on another file system than the kubelet directory {}: if that "
      "is another disk, a power cut within a millisecond of an Allocate can lose its claim while "
      "the kubelet keeps it (see docs/operators.md, State directory)",
      options_.state_dir.string(), options_.kubelet_dir.string());
}

std::unique_ptr<store::InstanceStore> Daemon::make_store() {
  if (options_.store == StoreKind::file)
    return std::make_unique<store::FileInstanceStore>(options_.state_dir / "instances");
  if (!kubernetes_) throw std::invalid_argument("the Kubernetes store needs an API server");
  return kubernetes_->make_instance_store();
}

std::unique_ptr<configuration::ConfigurationSource> Daemon::make_configuration_source() {
  auto post = [this](auto work) { boost::asio::post(core_, std::move(work)); };
  configuration::ConfigurationSource::Events events{
      .upserted =
          [post, this](const configuration::Configuration& c) {
            post([this, c] { configuration_upserted(c); });
          },
      .removed =
          [post, this](const std::string& ns, const std::string& name) {
            post([this, key = ConfigurationKey{ns, name}] { configuration_deleted(key); });
          },
      .invalid =
          [post, this](const configuration::ConfigurationError& error) {
            const bool whole_source = error.field_path() == "(directory)";
            spdlog::error("{}: {}",
                          whole_source ? "configuration directory" : "invalid Configuration",
                          error.what());
            post([this, error] {
              // A file that duplicated one Configuration and now cannot be
              // read (or duplicates another) no longer keeps the first.
              if (const auto no_longer_named = configuration_error(error))
                keeping_ended(*no_longer_named);
              // A file read again that names what it holds (a duplicate) is
              // no longer one that cannot be read.
              if (holding_orphans_ && error.configuration()) withdraw_orphans();
            });
          },
      .valid =
          [post, this](const std::string& source) {
            post([this, source] {
              configuration_error_cleared(source);
              if (holding_orphans_) withdraw_orphans();
            });
          },
      .unresolved =
          [post, this](const configuration::Configuration& c, const std::string& reason,
                       configuration::UnresolvedReference::Cause why) {
            post([this, c, reason, why] { unresolved(c, reason, why); });
          },
      // Runs after the initial Configurations (posted before it).
      .synced =
          [post, this] {
            post([this] {
              configurations_synced_ = true;
              withdraw_orphans();
            });
          },
      .listed = [post, this] { post([this] { configurations_listed_ = true; }); }};
  if (options_.config_source == ConfigSourceKind::directory) {
    return std::make_unique<configuration::FileConfigurationSource>(
        options_.config_dir, std::move(events), options_.state_dir / "configuration-owners");
  }
  if (!kubernetes_)
    throw std::invalid_argument("the Kubernetes Configuration source needs an API server");
  return kubernetes_->make_configuration_source(std::move(events), options_.event_refresh);
}

void Daemon::start_kubernetes_helpers() {
  if (!kubernetes_) return;
  kubernetes_->start_api_probe(kApiProbeInterval);
  if (options_.store == StoreKind::kubernetes)
    kubernetes_->start_node_cleaner(*store_, options_.dead_node_grace);
}

void Daemon::start() {
  const bool kube_store = options_.store == StoreKind::kubernetes;
  const bool kube_source = options_.config_source == ConfigSourceKind::kubernetes;
  spdlog::info(
      "dowserd on node {}: configurations {}, handlers {}, store {}, kubelet {}",
      options_.node_name, kube_source ? "from the API server" : options_.config_dir.string(),
      options_.handler_dir.string(), kube_store ? "on the API server" : options_.state_dir.string(),
      options_.kubelet_dir.string());
  if (!kube_store) warn_if_state_is_off_the_kubelets_file_system();
  if (kubernetes_) {
    spdlog::info("Kubernetes API server {}, {}", kubernetes_->server(),
                 options_.kube_namespace.empty() ? "all namespaces"
                                                 : "namespace " + options_.kube_namespace);
  }
  capacity_.set_change_listener([this](const store::StoredInstance& now) {
    report_unreadable_slots(now.instance);
    mark_dirty(capacity::InstanceKey{now.instance.namespace_name, now.instance.name});
  });
  start_observing();
  start_kubernetes_helpers();
  // Watch first, then list: nothing written in between is missed.
  store_watch_ = store_->watch([this](const store::WatchEvent& event) {
    boost::asio::post(core_, [this, event] { store_event(event); });
  });
  list_instances();

  plugins_.start();
  discovery_.start();
  configurations_source_ = make_configuration_source();
  configurations_source_->start();

  reclaimer_ = std::make_unique<reclaim::SlotReclaimer>(
      core_, options_.podresources_socket, options_.reclaim_interval, options_.reclaim_grace,
      [this] { return held_slots(); }, [this](const reclaim::HeldSlot& slot) { release(slot); });
  reclaimer_->set_unclaimed_listener(
      [this](const std::vector<reclaim::DeviceRef>& devices) { unclaimed_in_use(devices); });
  reclaimer_->start();
  capacity_.set_grant_listener(
      [this](const capacity::InstanceKey& key, uint32_t slot) { granted(key, slot); });
  start_status_server();
}

// An API server that does not answer at start (a node booting while the
// control plane restarts) is no reason to exit: local devices are discovered
// and advertised all the same, claims fail until it answers, and the
// Instances come in as soon as it does. Without a listing, the cache holds
// what the store's watch and this node's own writes brought.
void Daemon::list_instances() {
  try {
    for (const auto& stored : store_->list()) capacity_.apply(stored);
    instances_listed_ = true;
  } catch (const store::StoreError& e) {
    if (options_.store != StoreKind::kubernetes) throw;  // an unreadable state directory
    spdlog::warn("cannot list Instances yet ({}); serving on, listing them again until it works",
                 e.what());
    instance_listing_retry_ = std::make_unique<InstanceListingRetry>(
        *store_, [this](const std::vector<store::StoredInstance>& instances) {
          boost::asio::post(core_, [this, instances] { instances_listed_late(instances); });
        });
  }
}

void Daemon::instances_listed_late(const std::vector<store::StoredInstance>& instances) {
  for (const auto& stored : instances) {
    auto deleted = deleted_while_listing_.find(
        capacity::InstanceKey{stored.instance.namespace_name, stored.instance.name});
    if (deleted == deleted_while_listing_.end() || deleted->second < stored.revision)
      capacity_.apply(stored);
  }
  deleted_while_listing_.clear();
  instance_listing_retry_.reset();  // its thread has handed this over and returns
  instances_listed_ = true;
  spdlog::info("listed {} Instance{} once the store answered", instances.size(),
               instances.size() == 1 ? "" : "s");
  // Those of Configurations deleted meanwhile are only known now.
  if (configurations_synced_) withdraw_orphans();
}

void Daemon::shutdown() {
  // Before anything else, and even when start() failed half-way: every
  // request to the API server ends (no thread waits for a slow one), and the
  // node cleaner, which runs on store_ (it goes with this object), stops; so
  // does the listing retry.
  if (kubernetes_) kubernetes_->stop();
  instance_listing_retry_.reset();
  if (!configurations_source_) return;
  if (status_server_) status_server_->stop();
  configurations_source_->stop();
  configurations_source_.reset();
  if (reclaimer_) reclaimer_->stop();
  expiry_timer_.cancel();
  rewrite_timer_.cancel();
  discovery_.shutdown();
  plugins_.stop_all();
  store_watch_.reset();
  signals_.cancel();
}

// ---- Configurations -----------------------------------------------------------

// Whatever this node holds for a Configuration that no longer exists is
// withdrawn, but not while a source of Configurations cannot be read: the
// Configuration of an invalid file (or of a lost directory) is unknown, not
// gone, and withdrawing would free the slots of its running pods. Done once
// the last such error clears. An error that names its Configuration (an
// invalid cluster object, a file's duplicate definition) keeps only that
// one's Instances, as do the other reasons of kept_without_running.
void Daemon::withdraw_orphans() {
  std::set<ConfigurationKey> known = kept_without_running();
  for (const auto& [key, configuration] : configurations_) known.insert(key);
  size_t unreadable = 0;
  const ConfigurationErrorRecord* first_unreadable = nullptr;
  for (const auto& [source, record] : configuration_errors_)
    if (!record.error.configuration() && ++unreadable == 1) first_unreadable = &record;
  if (first_unreadable != nullptr) {
    if (!std::exchange(holding_orphans_, true)) {
      spdlog::warn(
          "keeping the Instances of Configurations not found while {} source{} of Configurations "
          "cannot be read ({}: {}); they are withdrawn once every one can",
          unreadable, unreadable == 1 ? "" : "s", first_unreadable->error.source(),
          first_unreadable->error.reason());
    }
    return;
  }
  holding_orphans_ = false;
  take_names_back_by_claims(known);
  mark_dirty(reconciler_.withdraw_unknown(known, [this](const ConfigurationKey& owner) {
    auto refusal = refused_.find(owner);
    return refusal == refused_.end() ? std::string("is gone")
                                     : "is not served (" + refusal->second.second + ")";
  }));
  retry_failed_writes();  // a withdrawal the store refused
  // Names held by the Instances of Configurations that did not come are
  // free; those that came hold theirs (told so again: the reason changed).
  retry_waiting_for_name([this](const ConfigurationKey& waiting, NameWait wait) {
    return wait == NameWait::for_the_listing || !resource_name_holder(waiting);
  });
}

// One refused for its name, whose pods hold slots here while the holder's
// do not (its Instances were listed after it was refused), takes the name
// back (give_name_back) before its Instances are judged orphans; run at
// once, not posted, and so known.
void Daemon::take_names_back_by_claims(std::set<ConfigurationKey>& known) {
  const auto waiting = waiting_for_name_;  // run_or_refuse edits it
  for (const auto& [key, wait] : waiting) {
    if (waiting_for_name_.count(key) == 0 || !holds_here(key, Held::claims)) continue;
    const auto holder = resource_name_holder(key);
    if (holder && holds_here(*holder, Held::claims)) continue;  // it would wait again
    // Not configuration_upserted: this runs inside withdraw_orphans, which
    // judges whatever it leaves.
    const configuration::Configuration retried = refused_.at(key).first;
    run_or_refuse(retried);
    if (configurations_.count(key) > 0) known.insert(key);
  }
}

// Resource names carry no namespace: one name may serve one Configuration on
// a node. One kept without running (kept_without_running) holds it too while
// this node keeps its Instances: their pods use it. So, until every
// Configuration is read (or while a source cannot be read), do this node's
// Instances of one not heard of yet: it held the name before this start,
// and would lose its Instances if a same-named one read first took it.
std::optional<Daemon::ConfigurationKey> Daemon::resource_name_holder(
    const ConfigurationKey& key) const {
  if (configurations_.count(key) > 0) return std::nullopt;  // it runs: the name is its own
  const auto same_name = [&key](const ConfigurationKey& other) {
    return other.second == key.second && other.first != key.first;
  };
  for (const auto& [other, configuration] : configurations_)
    if (same_name(other)) return other;
  const bool may_still_come = !configurations_synced_ || holding_orphans_;
  const auto kept = kept_without_running();
  if (!may_still_come && kept.empty()) return std::nullopt;
  const auto* held = instance_here([&](const store::Instance& instance) {
    const ConfigurationKey owner{instance.namespace_name, instance.configuration_name};
    return same_name(owner) &&
           (kept.count(owner) > 0 || (may_still_come && refused_.count(owner) == 0));
  });
  if (held == nullptr) return std::nullopt;
  return ConfigurationKey{held->namespace_name, held->configuration_name};
}

// Its Instances are kept though it does not run: it waits for read access,
// or an error names it (its object is invalid, and its last good version is
// not known after a restart; or a file duplicates it, and which definition
// serves is not settled), or its object was fixed and the source has yet to
// say what came of it. It is not gone, and its pods use them. The one list
// of these reasons, which every judge of orphans and names must agree on.
std::set<Daemon::ConfigurationKey> Daemon::kept_without_running() const {
  std::set<ConfigurationKey> kept = waiting_for_access_;
  kept.insert(verdict_pending_.begin(), verdict_pending_.end());
  for (const auto& [source, record] : configuration_errors_)
    if (const auto& about = record.error.configuration()) kept.insert(*about);
  return kept;
}

// This node's first Instance that matches: another node's Instances say
// nothing of resource names here.
const store::Instance* Daemon::instance_here(
    const std::function<bool(const store::Instance&)>& matches) const {
  for (const auto& [key, stored] : capacity_.instances())
    if (matches(stored.instance) && reconciler_.visible_here(stored.instance))
      return &stored.instance;
  return nullptr;
}

// Whether this node has Instances of the Configuration (another node's say
// nothing of the name here), or, with Held::claims, Instances whose slots
// pods here hold: the one whose claims are in the store held the name before
// (the other's were withdrawn when it was refused, or were written since
// this start and hold none yet).
bool Daemon::holds_here(const ConfigurationKey& key, Held what) const {
  return instance_here([&](const store::Instance& instance) {
           if (instance.namespace_name != key.first || instance.configuration_name != key.second)
             return false;
           if (what == Held::instances) return true;
           const auto slots = capacity::InstanceSlots::decode(instance);
           return std::any_of(slots.slots.begin(), slots.slots.end(), [this](const auto& slot) {
             return !slot.is_free() && slot.node == options_.node_name;
           });
         }) != nullptr;
}

// The one whose claims are in the store held the resource name before (see
// holds_here). At a start the other waits for the listing
// (resource_name_holder), so this is for what that cannot see: Instances
// listed late, or an owner that was refused (by its handler) when the other
// came. It gets the name back; the holder waits.
void Daemon::give_name_back(const ConfigurationKey& holder, const ConfigurationKey& owner) {
  const configuration::Configuration displaced = configurations_.at(holder);
  configuration_removed(holder, "gives its resource name back to Configuration " + owner.first +
                                    "/" + owner.second + ", whose claims are in the store");
  wait_for_name(displaced, owner, NameWait::for_its_holder);  // owner runs next
}

// Refused, and started again (retry_waiting_for_name) once the holder goes,
// stops being kept without running (keeping_ended), or loses its last
// Instance here; or, waiting for the listing, once every Configuration is
// read. That wait lasts a moment: logged, not told as an Event, which would
// stand until the Configuration runs.
void Daemon::wait_for_name(const configuration::Configuration& waiting,
                           const ConfigurationKey& holder, NameWait wait) {
  const std::string holder_name = "Configuration " + holder.first + "/" + holder.second;
  if (wait == NameWait::for_its_holder) {
    refused(waiting, "its resource name is taken by " + holder_name +
                         " (resource names carry no namespace)");
  } else {
    refused(waiting,
            "its resource name was held by " + holder_name +
                " before this start (its Instances are in the store); waiting until every "
                "Configuration is read",
            Tell::log_only);
  }
  waiting_for_name_[{waiting.namespace_name, waiting.name}] = wait;
}

const store::Instance* Daemon::instance_named(const std::string& name) const {
  for (const auto& [key, stored] : capacity_.instances())
    if (key.second == name) return &stored.instance;
  return nullptr;
}

void Daemon::configuration_upserted(const configuration::Configuration& configuration) {
  run_or_refuse(configuration);
  stop_keeping({configuration.namespace_name, configuration.name});
}

// A source's error on source cleared (its file or object is valid, or
// gone). A Kubernetes object fixed stays kept until the source tells what
// came of it, which it does next (configuration.hpp): whatever the core
// thread does in between must not judge its Instances orphans. The file
// source tells no verdict: what its error named (a duplicate definition) is
// judged now, unless something else still keeps it.
void Daemon::configuration_error_cleared(const std::string& source) {
  const auto record = configuration_errors_.find(source);
  if (record == configuration_errors_.end()) return;
  const auto named = record->second.error.configuration();
  configuration_errors_.erase(record);
  if (!named || configurations_.count(*named) > 0) return;
  if (options_.config_source == ConfigSourceKind::kubernetes)
    verdict_pending_.insert(*named);
  else
    keeping_ended(*named);
}

// Its verdict came (it runs, is refused, or is gone) or it no longer waits
// for access.
void Daemon::stop_keeping(const ConfigurationKey& key) {
  if (waiting_for_access_.erase(key) + verdict_pending_.erase(key) > 0) keeping_ended(key);
}

// Kept while it did not run (kept_without_running), its Instances here, and
// its resource name with them, are judged from here on as those of any
// Configuration refused, or gone. Only where a keeping ends: a refusal alone
// releases nothing (two refused ones would retry each other without end).
void Daemon::keeping_ended(const ConfigurationKey& key) {
  if (configurations_.count(key) > 0 || kept_without_running().count(key) > 0 ||
      !holds_here(key, Held::instances))
    return;
  if (configurations_synced_) withdraw_orphans();
  resource_name_released(key);
}

// A same-named Configuration of another namespace, refused while this one
// held the resource name, may take it now.
void Daemon::resource_name_released(const ConfigurationKey& key) {
  retry_waiting_for_name([&key](const ConfigurationKey& other, NameWait) {
    return other.second == key.second && other != key;
  });
}

// Once this node's last Instance of one that does not run (waiting for read
// access) is deleted from outside, or edited to leave this node out, its
// name is free. Looked up only when some Configuration waits for that name:
// a withdrawal deletes thousands.
void Daemon::name_held_by_instances_released(const ConfigurationKey& owner) {
  const bool someone_waits =
      std::any_of(waiting_for_name_.begin(), waiting_for_name_.end(), [&owner](const auto& entry) {
        return entry.first.second == owner.second && entry.first != owner;
      });
  if (someone_waits && configurations_.count(owner) == 0 && !holds_here(owner, Held::instances))
    resource_name_released(owner);
}

void Daemon::retry_waiting_for_name(
    const std::function<bool(const ConfigurationKey&, NameWait)>& which) {
  for (const auto& [other, wait] : waiting_for_name_) {
    if (!which(other, wait)) continue;
    // Posted, as configuration_upserted edits the map; skipped if an earlier
    // retry got there first. A copy: it erases its entry in refused_.
    boost::asio::post(core_, [this, other = other] {
      if (waiting_for_name_.count(other) == 0) return;
      const configuration::Configuration waiting = refused_.at(other).first;
      configuration_upserted(waiting);
    });
  }
}

void Daemon::run_or_refuse(const configuration::Configuration& configuration) {
  ConfigurationKey key{configuration.namespace_name, configuration.name};
  std::string resource;
  std::optional<ConfigurationKey> displaced;  // once this one is sure to run
  try {
    resource = naming::resource_name(options_.resource_domain, configuration.name);
    if (auto holder = resource_name_holder(key)) {
      if (!holds_here(key, Held::claims) || holds_here(*holder, Held::claims)) {
        const bool heard_of = configurations_.count(*holder) > 0 || refused_.count(*holder) > 0 ||
                              kept_without_running().count(*holder) > 0;
        wait_for_name(configuration, *holder,
                      heard_of ? NameWait::for_its_holder : NameWait::for_the_listing);
        return;
      }
      // One that does not run holds it with Instances no pod uses: not
      // against one whose pods do.
      if (configurations_.count(*holder) > 0) displaced = holder;
    }
    // An Instance's IL plugin is named after it: "cams-1f0893" is taken by
    // an Instance of "cams", whose plugin would lose its name.
    if (const auto* instance = instance_named(key.second)) {
      refused(configuration, "its resource name is taken by the device plugin of Instance " +
                                 instance->name + " (of Configuration " + instance->namespace_name +
                                 "/" + instance->configuration_name +
                                 "); rename this Configuration");
      return;
    }
    discovery_.validate(configuration);
  } catch (const host::HandlerCallError& e) {
    refused(configuration, "refused by handler " + configuration.handler_name + ": " + e.reason());
    return;
  } catch (const std::invalid_argument& e) {
    refused(configuration, e.what());
    return;
  } catch (const std::runtime_error& e) {
    // No handler yet: the session waits for it and validates by starting.
    spdlog::warn("Configuration {}/{}: not validated: {}", key.first, key.second, e.what());
    if (configurations_source_)
      configurations_source_->report_problem(configuration, "NotValidated", e.what());
  }
  if (displaced) give_name_back(*displaced, key);
  const auto running = configurations_.find(key);
  const bool known = running != configurations_.end();
  // Told again as it runs (an object fixed back to it, or resolved again
  // once a missing Secret it reads is back): nothing to apply.
  const bool unchanged = known && running->second == configuration;
  configurations_[key] = configuration;
  // A change its running session takes without a restart (capacity,
  // brokerProperties, policy) is the accepted version from here on.
  if (auto started = started_with_.find(key);
      started != started_with_.end() && started->second.same_discovery(configuration)) {
    started->second = configuration;
    problems_resolved(configuration);  // runs on without a start
  }
  refused_.erase(key);
  waiting_for_name_.erase(key);
  const char* what = !known ? "added" : unchanged ? "unchanged" : "changed";
  spdlog::info("Configuration {}/{} {} (handler {}, capacity {})", key.first, key.second, what,
               configuration.handler_name, configuration.capacity);

  auto& backend = configuration_backends_[key];
  if (!backend) {
    backend = std::make_unique<Observed<plugins::ConfigurationPluginBackend>>(
        backend_hooks("configuration", resource), capacity_, reconciler_, key.first, key.second,
        policy_of(configuration));
    plugins_.add(resource, *backend);
  }
  backend->set_policy(policy_of(configuration));
  plugins_.changed(resource);
  discovery_.run(configuration);
  if (known && !unchanged) reapply(key);  // capacity or brokerProperties may have changed
}

// Its handler took this version: what was reported on it (not validated,
// waiting for its resource name) no longer stands.
void Daemon::discovery_started(const ConfigurationKey& key) {
  auto current = configurations_.find(key);
  if (current == configurations_.end()) return;
  started_with_.insert_or_assign(key, current->second);
  problems_resolved(current->second);
}

void Daemon::problems_resolved(const configuration::Configuration& configuration) {
  if (configurations_source_) configurations_source_->problems_resolved(configuration);
}

// As if it had been refused when it was added (its handler was not loaded
// then, or offers no validate_request): a change is refused and the version
// its handler last accepted runs on, as when validate_request refuses the
// change; a Configuration never accepted is withdrawn. Either is tried again
// when the Configuration changes.
void Daemon::refused_by_handler(const ConfigurationKey& key, const std::string& reason) {
  auto found = configurations_.find(key);
  if (found == configurations_.end()) return;
  const configuration::Configuration configuration = found->second;
  problems_resolved(configuration);  // "not validated" no longer: refused
  const std::string why = "refused by handler " + configuration.handler_name + ": " + reason;
  auto previous = started_with_.find(key);
  if (previous == started_with_.end() || previous->second == configuration) {
    configuration_removed(key, "withdrawn: its handler refused it");
    refused(configuration, why);
    return;
  }
  spdlog::warn(
      "Configuration {}/{}: its change was refused as discovery started; the version "
      "its handler accepted before runs on",
      key.first, key.second);
  found->second = previous->second;
  refused(configuration, why);
  discovery_.run(found->second);
  if (auto backend = configuration_backends_.find(key); backend != configuration_backends_.end())
    backend->second->set_policy(policy_of(found->second));
  plugins_.changed(configuration_resource(key));
  reapply(key);  // its capacity and brokerProperties, if the change had others
}

// Refused until it resolves; one waiting for read access keeps its
// Instances meanwhile, and once it waits for something else (the access came,
// a value is missing) they are handled as any refused Configuration's.
void Daemon::unresolved(const configuration::Configuration& configuration,
                        const std::string& reason, configuration::UnresolvedReference::Cause why) {
  const ConfigurationKey key{configuration.namespace_name, configuration.name};
  refused(configuration, reason, Tell::log_only);  // the source told them
  if (why == configuration::UnresolvedReference::Cause::awaiting_access) {
    verdict_pending_.erase(key);  // kept on: it waits for access
    waiting_for_access_.insert(key);
  } else {
    stop_keeping(key);
  }
}

// Gone from its source, unlike one withdrawn (refused, or giving its resource
// name back): nothing of it is kept.
void Daemon::configuration_deleted(const ConfigurationKey& key) {
  discovery_.forget(key);
  configuration_removed(key);
}

void Daemon::configuration_removed(const ConfigurationKey& key, std::string_view why) {
  refused_.erase(key);
  waiting_for_name_.erase(key);
  stop_keeping(key);  // one never run here: what was kept for it goes now
  if (!configurations_.erase(key)) return;
  started_with_.erase(key);
  spdlog::info("Configuration {}/{} {}", key.first, key.second, why);
  discovery_.stop(key);
  discovery_records_.erase(key);
  kubelet_pending_.erase(configuration_resource(key));
  std::erase_if(freed_cl_claims_, [&](const auto& freed) {
    return freed.first.first == configuration_resource(key);  // its claims go with it
  });
  mark_dirty(reconciler_.withdraw_all(key));
  retry_failed_writes();  // a withdrawal the store refused
  plugins_.remove(options_.resource_domain + "/" + key.second);
  configuration_backends_.erase(key);
  resource_name_released(key);
}

// ---- discovery into Instances ---------------------------------------------------

// Only what changed reaches the core thread: the discovery side diffs each
// snapshot against the one before, so one new device among thousands costs
// one device here.
void Daemon::devices_changed(const ConfigurationKey& key, const host::DeviceChanges& changes) {
  auto configuration = configurations_.find(key);
  if (configuration == configurations_.end()) return;
  record_snapshot(key, changes.devices);
  const auto times = reconcile_and_advertise(
      key, [&](auto now) { return reconciler_.apply(configuration->second, changes, now); });
  if (spdlog::should_log(spdlog::level::debug)) log_report(key, changes, times);
}

// What the failed session last reported is unknown now, not gone: its
// devices stay (pods keep their claims) but are offered as Unhealthy until
// the restarted session reports again.
void Daemon::discovery_failed(const ConfigurationKey& key, const std::string& reason) {
  record_discovery_error(key, reason);
  if (configurations_.count(key)) mark_dirty(reconciler_.discovery_failed(key));
}

void Daemon::reapply(const ConfigurationKey& key) {
  auto configuration = configurations_.find(key);
  if (configuration == configurations_.end()) return;
  reconcile_and_advertise(
      key, [&](auto now) { return reconciler_.reapply(configuration->second, now); });
}

// The plugins advertise new Instances before they are durable (those of
// local devices before they are even written: InstanceReconciler::
// stage_creates), and one sync, on the store's own thread, then makes all of
// them durable: a new device reaches the kubelet without waiting for the
// store, and this thread does not wait for the disk. Nothing is promised on
// them meanwhile: a claim on one of them takes every record before its own
// to the disk with it (the store keeps order). A crash before the sync loses
// only Instances that discovery finds again.
AdvertiseTimes Daemon::reconcile_and_advertise(const ConfigurationKey& key,
                                               const Reconcile& reconcile) {
  AdvertiseTimes times;
  times.started = reconcile::Clock::now();
  {
    const store::DeferredSync batch(*store_, store::DeferredSync::SyncOn::store_thread);
    reconciler_.stage_creates();
    auto changed = reconcile(times.started);
    times.reconciled = reconcile::Clock::now();
    await_kubelet(key, changed, times.started);
    mark_dirty(changed);
    schedule_expiry();
    const auto offered = offer_configuration_lists(plugins::ListDelivery::prompt);
    times.offered = reconcile::Clock::now();
    mark_dirty(reconciler_.write_staged());  // what did not end as offered
    times.written = reconcile::Clock::now();
    refresh_instance_plugins(offered, plugins::ListDelivery::prompt);
    times.served = reconcile::Clock::now();
  }
  times.synced = reconcile::Clock::now();
  retry_failed_writes();
  return times;
}

// Instances that could not be written, and withdrawals from Instances that
// could not be, are tried again later, less often while they keep failing.
void Daemon::retry_failed_writes() {
  auto failed = reconciler_.take_failed_writes();
  if (failed.empty() && !reconciler_.withdrawals_failed()) return;
  if (!reapply_within(std::move(failed), rewrite_delay_)) return;  // sooner anyway
  spdlog::info("trying the Instances that could not be written again in {} ms",
               rewrite_delay_.count());
  rewrite_delay_ = std::min(rewrite_delay_ * 2, kMaxRewriteDelay);
}

bool Daemon::reapply_within(std::set<ConfigurationKey> keys, std::chrono::milliseconds delay) {
  rewrites_due_.merge(keys);
  const auto due = std::chrono::steady_clock::now() + delay;
  if (rewrite_pending_ && rewrite_timer_.expiry() <= due) return false;
  rewrite_pending_ = true;
  rewrite_timer_.expires_at(due);  // a wait set for later ends with operation_aborted
  rewrite_timer_.async_wait([this](const boost::system::error_code& error) {
    if (error) return;
    rewrite_pending_ = false;
    for (const auto& key : std::exchange(rewrites_due_, {})) reapply(key);
    restore_lost_claims();
    mark_dirty(reconciler_.retry_withdrawals());
    // reapply() retried each (and set the timer again for what failed again).
    retry_failed_writes();  // withdrawals refused again (returns if none)
    if (rewrites_due_.empty() && !reconciler_.withdrawals_failed())
      rewrite_delay_ = kFirstRewriteDelay;
  });
  return true;
}

std::map<uint32_t, naming::SlotUsage> Daemon::claims_taken(const store::WatchEvent& event,
                                                           const capacity::InstanceKey& key) const {
  const bool deleted = event.type == store::WatchEvent::Type::deleted;
  // Only an edit that takes this node out: it joins again, and puts back its claims.
  if (!deleted && event.object.instance.nodes.count(options_.node_name) > 0) return {};
  auto taken = claims_here(key);
  if (deleted || taken.empty()) return taken;
  const auto now = capacity::InstanceSlots::decode(event.object.instance);
  std::erase_if(taken, [&](const auto& claim) {
    return claim.first < now.capacity && now.slots[claim.first] == claim.second;
  });
  return taken;
}

std::map<uint32_t, naming::SlotUsage> Daemon::claims_here(const capacity::InstanceKey& key) const {
  std::map<uint32_t, naming::SlotUsage> claims;
  const auto* cached = capacity_.find(key);
  if (!cached) return claims;
  const auto slots = capacity::InstanceSlots::decode(cached->instance);
  for (uint32_t slot = 0; slot < slots.capacity; ++slot)
    if (!slots.slots[slot].is_free() && slots.slots[slot].node == options_.node_name)
      claims.emplace(slot, slots.slots[slot]);
  return claims;
}

// Instances not written again yet keep theirs for the next round; those
// whose device went meanwhile are dropped (nothing will write them).
void Daemon::restore_lost_claims() {
  for (auto it = lost_claims_.begin(); it != lost_claims_.end();) {
    const auto& [key, claims] = *it;
    if (!capacity_.find(key)) {
      it = reconciler_.device(key) ? std::next(it) : lost_claims_.erase(it);
      continue;
    }
    for (const auto& [slot, usage] : claims) {
      try {
        const bool restored = capacity_.restore(key, slot, usage);
        spdlog::log(restored ? spdlog::level::info : spdlog::level::warn,
                    "Instance {}: {} the claim {} of slot {} held here before it was deleted",
                    key.second, restored ? "restored" : "could not restore (slot taken)",
                    naming::format_usage(usage), slot);
      } catch (const store::StoreError& e) {
        spdlog::warn("Instance {}: could not restore the claim of slot {}: {}", key.second, slot,
                     e.what());
      }
    }
    mark_dirty(key);
    it = lost_claims_.erase(it);
  }
}

void Daemon::schedule_expiry() {
  auto next = reconciler_.next_expiry();
  if (!next) return;
  expiry_timer_.expires_at(*next);
  expiry_timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) expire_offline();
  });
}

// Offline devices whose grace ended, and that no pod here holds, go.
void Daemon::expire_offline() {
  mark_dirty(reconciler_.expire(reconcile::Clock::now()));
  schedule_expiry();
  retry_failed_writes();  // a withdrawal the store refused
}

void Daemon::store_event(const store::WatchEvent& event) {
  const auto& instance = event.object.instance;
  capacity::InstanceKey key{instance.namespace_name, instance.name};
  std::map<uint32_t, naming::SlotUsage> lost = claims_taken(event, key);
  if (event.type == store::WatchEvent::Type::deleted) {
    if (instance_listing_retry_) deleted_while_listing_[key] = event.object.revision;
    capacity_.forget(key);
    slot_problems_told_.erase(key);
    mark_dirty(key);
    if (reconciler_.visible_here(instance))
      name_held_by_instances_released({instance.namespace_name, instance.configuration_name});
  } else {
    const auto* cached = capacity_.find(key);
    const bool left_here =
        cached && reconciler_.visible_here(cached->instance) && !reconciler_.visible_here(instance);
    capacity_.apply(event.object);  // marks it dirty through the listener
    if (left_here)
      name_held_by_instances_released({instance.namespace_name, instance.configuration_name});
  }
  // Deleted (or this node taken out) from outside while its device is still
  // here: written again, or its plugin would stay down until the handler
  // happens to report a change.
  if (auto configuration = reconciler_.stored_instance_changed(key)) {
    spdlog::warn(
        "Instance {} was {} while its device is still discovered here: writing it again in {} "
        "ms{}",
        key.second,
        event.type == store::WatchEvent::Type::deleted
            ? "deleted from outside"
            : "edited from outside to leave this node out",
        kFirstRewriteDelay.count(), lost.empty() ? "" : ", with this node's claims");
    if (!lost.empty()) lost_claims_[key] = std::move(lost);
    reapply_within({*configuration}, kFirstRewriteDelay);
  }
  // Its claims may have been released from outside (an edit of the store):
  // an offline device kept only for them goes now, not at a later report.
  if (reconciler_.offline(key)) expire_offline();
}

// ---- plugins ----------------------------------------------------------------------

void Daemon::mark_dirty(const capacity::InstanceKey& key) {
  dirty_.insert(key);
  if (refresh_posted_) return;
  refresh_posted_ = true;
  // Posted, not run here: an Allocate in progress must finish before lists
  // move. The publisher thread writes them: what changed here (claims, store
  // edits, expiries) is not news the kubelet waits for, while the next
  // Allocate may be waiting for this thread.
  boost::asio::post(core_, [this] {
    if (refresh_posted_) refresh_plugins(plugins::ListDelivery::background);
  });
}

void Daemon::mark_dirty(const std::set<capacity::InstanceKey>& keys) {
  for (const auto& key : keys) mark_dirty(key);
}

void Daemon::refresh_plugins(plugins::ListDelivery delivery) {
  refresh_instance_plugins(offer_configuration_lists(delivery), delivery);
}

std::set<capacity::InstanceKey> Daemon::offer_configuration_lists(plugins::ListDelivery delivery) {
  refresh_posted_ = false;
  auto dirty = std::exchange(dirty_, {});
  // Every CL plugin hears of every change and reads again only the Instances
  // that are (or were) its own; it sends only when its list changed. (A
  // vanished Instance no longer names its Configuration, so none is skipped.)
  // CL lists go first: a new IL plugin's socket and server take longer to set
  // up than a list takes to send.
  for (const auto& [key, backend] : configuration_backends_) {
    backend->instances_changed(dirty);
    plugins_.changed(options_.resource_domain + "/" + key.second, delivery);
  }
  return dirty;
}

void Daemon::refresh_instance_plugins(const std::set<capacity::InstanceKey>& keys,
                                      plugins::ListDelivery delivery) {
  for (const auto& key : keys) refresh_instance_plugin(key, delivery);
}

void Daemon::refresh_instance_plugin(const capacity::InstanceKey& key,
                                     plugins::ListDelivery delivery) {
  const auto* stored = capacity_.find(key);
  // A served plugin's name was checked when it was made: not again per refresh.
  bool usable = stored && reconciler_.visible_here(stored->instance) && reconciler_.device(key) &&
                (instance_backends_.count(key) > 0 || nameable_as_resource(key));
  std::string resource = options_.resource_domain + "/" + key.second;
  if (!usable) {
    if (!stored) unnamable_told_.erase(key);  // gone: a new one is told of again
    plugins_.remove(resource);
    instance_backends_.erase(key);
    kubelet_pending_.erase(resource);
    return;
  }
  auto& backend = instance_backends_[key];
  if (!backend) {
    backend = std::make_unique<Observed<plugins::InstancePluginBackend>>(
        backend_hooks("instance", resource), capacity_, reconciler_, key);
    plugins_.add(resource, *backend);
  }
  plugins_.changed(resource, delivery);
}

// dowser names its Instances so that they make valid resource names; one
// written by someone else (another tool, a hand edit) may not, and gets no
// plugin rather than being sent to the kubelet. Said once per Instance.
bool Daemon::nameable_as_resource(const capacity::InstanceKey& key) {
  try {
    naming::resource_name(options_.resource_domain, key.second);
    return true;
  } catch (const std::invalid_argument& e) {
    if (unnamable_told_.insert(key).second) {
      spdlog::error("Instance {}/{}: no device plugin: {}", key.first, key.second, e.what());
    }
    return false;
  }
}

// ---- reclaiming ----------------------------------------------------------------------

std::vector<reclaim::HeldSlot> Daemon::held_slots() {
  std::vector<std::string> unnamed;
  auto held = reclaim::held_slots(options_.resource_domain, options_.node_name,
                                  capacity_.instances(), &unnamed);
  if (!unnamed.empty() && unnamed != unnamed_slots_told_) {
    std::string text;
    for (const auto& slot : unnamed) text += (text.empty() ? "" : "; ") + slot;
    spdlog::warn("claims of this node the slot reclaimer cannot name, so never frees: {}", text);
  }
  unnamed_slots_told_ = std::move(unnamed);
  return held;
}

void Daemon::granted(const capacity::InstanceKey& key, uint32_t slot) {
  const auto* stored = capacity_.find(key);
  if (!reclaimer_ || !stored) return;
  auto slots = capacity::InstanceSlots::decode(stored->instance);
  if (slot >= slots.capacity) return;
  auto held = reclaim::held_slot(options_.resource_domain, options_.node_name, key,
                                 stored->instance, slots, slot);
  if (!held) return;
  reclaimer_->granted(*held);
  freed_cl_claims_.erase({held->resource, held->device_id});  // the id names this claim now
}

// A device the kubelet reports in use with no claim on it, from its second
// pass on (a claim taken away by a deletion is put back within a second):
// an Instance-level slot, or a CL id this node's reclaimer freed, is claimed
// again for the pod using it if its slot is free; otherwise (taken, or a CL
// id whose slot nothing here remembers) warned of once while it stays so,
// since another pod may be given its slot; a CL device's id is not offered
// as a free placeholder meanwhile.
void Daemon::unclaimed_in_use(const std::vector<reclaim::DeviceRef>& devices) {
  std::set<reclaim::DeviceRef> ours;
  std::set<reclaim::DeviceRef> warned;
  for (const auto& device : devices) {
    if (!device.first.starts_with(options_.resource_domain + "/")) continue;  // not our plugins'
    ours.insert(device);
    if (unclaimed_before_.count(device) == 0) continue;  // once more first
    if (claim_again_for_pod_in_use(device)) continue;
    warned.insert(device);
    if (unclaimed_warned_.count(device)) continue;
    spdlog::warn(
        "the kubelet reports device {} of {} in use, but no claim of this node's is on it: its "
        "slot may be given to another pod (was its Configuration's capacity lowered below the "
        "slots in use, its Instance deleted or edited from outside, or its Configuration removed "
        "while the pod runs?)",
        device.second, device.first);
  }
  unclaimed_before_ = std::move(ours);
  hold_configuration_devices(warned);
  unclaimed_warned_ = std::move(warned);
}

// A deviceUsage entry dowser cannot read (a hand edit, or a value Akri's
// agents disagree on, like "C:node-a") holds its slot until it is fixed:
// said once per Instance and set of problems, as only `dowserctl slots`
// would show it otherwise.
void Daemon::report_unreadable_slots(const store::Instance& instance) {
  const capacity::InstanceKey key{instance.namespace_name, instance.name};
  auto problems = capacity::InstanceSlots::decode(instance).problems;
  if (problems.empty()) {
    slot_problems_told_.erase(key);
    return;
  }
  auto& told = slot_problems_told_[key];
  if (told == problems) return;
  std::string text;
  for (const auto& problem : problems) text += (text.empty() ? "" : "; ") + problem;
  spdlog::warn(
      "Instance {}: deviceUsage has what dowser cannot read ({}); such a slot is held, never "
      "given out, until its value is fixed or removed (a value is \"<node>\" or "
      "\"C:<vdev>:<node>\")",
      instance.name, text);
  told = std::move(problems);
}

void Daemon::hold_configuration_devices(const std::set<reclaim::DeviceRef>& unclaimed) {
  for (const auto& [key, backend] : configuration_backends_) {
    const std::string resource = options_.resource_domain + "/" + key.second;
    std::set<std::string> held;
    for (const auto& [held_resource, id] : unclaimed)
      if (held_resource == resource) held.insert(id);
    backend->set_held_without_claim(held);
    plugins_.changed(resource);  // sent only if the list changed
  }
}

// A device in use with no claim, back in this node's hands if its slot is
// free: a CL id this node's reclaimer freed, on the slot it had; an IL
// device (resource <domain>/<instance>, id <instance>-<slot>) on the slot it
// names. False if it is neither, or the slot is taken.
bool Daemon::claim_again_for_pod_in_use(const reclaim::DeviceRef& device) {
  if (auto freed = freed_cl_claims_.find(device); freed != freed_cl_claims_.end()) {
    const auto [key, slot] = freed->second;
    if (!claim_slot_again(key, slot,
                          naming::SlotUsage::configuration_level(device.second, options_.node_name),
                          device))
      return false;
    freed_cl_claims_.erase(freed);
    return true;
  }
  const std::string instance = device.first.substr(options_.resource_domain.size() + 1);
  for (const auto& [key, stored] : capacity_.instances()) {
    if (key.second != instance) continue;
    const auto slot = naming::slot_index(device.second, instance, stored.instance.capacity);
    return slot && claim_slot_again(key, *slot,
                                    naming::SlotUsage::instance_level(options_.node_name), device);
  }
  return false;
}

bool Daemon::claim_slot_again(const capacity::InstanceKey& key, uint32_t slot,
                              const naming::SlotUsage& usage, const reclaim::DeviceRef& device) {
  // Asked on every pass while the pod runs: an Instance gone or a slot taken
  // by the cache's word costs no store read (its watch keeps the cache new).
  const auto* cached = capacity_.find(key);
  if (!cached) return false;
  if (!capacity::InstanceSlots::decode(cached->instance).claimable_by(slot, usage)) return false;
  try {
    if (!capacity_.restore(key, slot, usage)) return false;
  } catch (const store::StoreError& e) {
    spdlog::warn("Instance {}: could not claim slot {} again: {}", key.second, slot, e.what());
    return false;
  }
  spdlog::info(
      "Instance {}: claimed slot {} again: the kubelet reports device {} of {} in use, and no "
      "claim was on it",
      key.second, slot, device.second, device.first);
  mark_dirty(key);
  return true;
}

void Daemon::release(const reclaim::HeldSlot& slot) {
  try {
    if (capacity_.release(slot.instance, slot.slot, slot.usage)) {
      metrics_.slot_reclaims.inc();
      if (slot.usage.kind == naming::SlotUsage::Kind::configuration)
        freed_cl_claims_[{slot.resource, slot.device_id}] = {slot.instance, slot.slot};
    }
  } catch (const store::StoreError& e) {
    spdlog::error("cannot free slot {} of {}: {}", slot.slot, slot.instance.second, e.what());
  }
  // An offline device kept for the pods that held its slots may go now.
  expire_offline();
}

}  // namespace dowser::daemon
