// KubeInstanceStore: Instances as akri.sh/v0 objects in the API server.
#include <spdlog/spdlog.h>

#include <charconv>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

#include "change_filter.hpp"
#include "instance_json.hpp"
#include "instance_store.hpp"
#include "kube_client.hpp"
#include "watch_fanout.hpp"

namespace dowser::store {
namespace {

using nlohmann::json;
using Key = std::pair<std::string, std::string>;  // namespace, name

using kube::resources::kConfigurations;
using kube::resources::kInstances;
constexpr std::chrono::seconds kFirstListDeadline{10};

std::string describe(const std::string& namespace_name, const std::string& name) {
  return "Instance " + namespace_name + "/" + name;
}

const json& metadata_member(const json& object, const char* key) {
  static const json kAbsent;
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return kAbsent;
  const auto member = metadata->find(key);
  return member == metadata->end() ? kAbsent : *member;
}

std::string metadata_string(const json& object, const char* key) {
  const json& member = metadata_member(object, key);
  return member.is_string() ? member.get<std::string>() : "";
}

std::optional<uint64_t> parse_revision(const std::string& version) {
  uint64_t revision = 0;
  const auto [end, error] =
      std::from_chars(version.data(), version.data() + version.size(), revision);
  if (version.empty() || error != std::errc() || end != version.data() + version.size())
    return std::nullopt;
  return revision;
}

uint64_t revision_of(const json& object) {
  const std::string version = metadata_string(object, "resourceVersion");
  const std::optional<uint64_t> revision = parse_revision(version);
  if (!revision) {
    throw StoreError(
        StoreError::Kind::io,
        describe(metadata_string(object, "namespace"), metadata_string(object, "name")) +
            ": resourceVersion \"" + version +
            "\" is not an unsigned integer (this store needs the integer "
            "resourceVersions of etcd-backed API servers)");
  }
  return *revision;
}

StoredInstance stored_from_object(const json& object) {
  StoredInstance stored;
  try {
    stored.instance = detail::from_akri_object(object);
  } catch (const detail::InstanceFormatError& error) {
    throw StoreError(StoreError::Kind::io, describe(metadata_string(object, "namespace"),
                                                    metadata_string(object, "name")) +
                                               ": not an Akri Instance: " + error.what());
  }
  stored.revision = revision_of(object);
  return stored;
}

StoreError io_error(const std::string& what, const std::exception& error) {
  return {StoreError::Kind::io, what + ": " + error.what()};
}

// A write's failure: 409 is a lost race, 404 a vanished Instance.
[[noreturn]] void throw_write_error(const kube::ApiError& error, const std::string& what) {
  if (error.conflict()) throw StoreError(StoreError::Kind::conflict, what + ": " + error.what());
  if (error.not_found()) throw StoreError(StoreError::Kind::not_found, what + ": " + error.what());
  throw io_error(what, error);
}

// The newest object seen per Instance, so that an update can PUT back the
// stored metadata without reading it again.
class ObjectCache {
 public:
  struct Entry {
    uint64_t revision;
    json object;
  };

  void remember(const Key& key, uint64_t revision, const json& object) {
    const std::lock_guard lock(mutex_);
    const auto found = objects_.find(key);
    if (found == objects_.end() || found->second.revision < revision) {
      objects_.insert_or_assign(key, Entry{revision, object});
    }
  }
  std::optional<Entry> find(const Key& key) const {
    const std::lock_guard lock(mutex_);
    const auto found = objects_.find(key);
    if (found == objects_.end()) return std::nullopt;
    return found->second;
  }
  void forget(const Key& key) {
    const std::lock_guard lock(mutex_);
    objects_.erase(key);
  }
  // Every object last seen at `revision` or before.
  std::vector<json> objects_up_to(uint64_t revision) const {
    const std::lock_guard lock(mutex_);
    std::vector<json> objects;
    for (const auto& [key, entry] : objects_) {
      if (entry.revision <= revision) objects.push_back(entry.object);
    }
    return objects;
  }

 private:
  mutable std::mutex mutex_;
  std::map<Key, Entry> objects_;
};

json owner_reference(const std::string& configuration_name, const std::string& uid) {
  return {{"apiVersion", "akri.sh/v0"}, {"kind", "Configuration"},
          {"name", configuration_name}, {"uid", uid},
          {"controller", true},         {"blockOwnerDeletion", true}};
}

class KubeWatchSubscription : public WatchSubscription {
 public:
  KubeWatchSubscription(std::shared_ptr<detail::WatchFanout> fanout, uint64_t id)
      : fanout_(std::move(fanout)), id_(id) {}
  ~KubeWatchSubscription() override { fanout_->remove(id_); }
  KubeWatchSubscription(const KubeWatchSubscription&) = delete;
  KubeWatchSubscription& operator=(const KubeWatchSubscription&) = delete;

 private:
  std::shared_ptr<detail::WatchFanout> fanout_;
  uint64_t id_;
};

}  // namespace

struct KubeInstanceStore::State {
  State(std::shared_ptr<kube::KubeClient> client_in, std::string namespace_in)
      : client(std::move(client_in)), scope(std::move(namespace_in)) {}

  std::shared_ptr<kube::KubeClient> client;
  std::string scope;  // list and watch this namespace; "" for all
  ObjectCache cache;
  std::mutex warned_mutex;
  // Key, deletionTimestamp; forgotten with the object.
  std::set<std::pair<Key, std::string>> kept_in_deletion_warned;
  std::shared_ptr<detail::WatchFanout> fanout = std::make_shared<detail::WatchFanout>();

  // Watching: the reflector thread alone touches the filter.
  detail::ChangeFilter filter;
  std::mutex watch_mutex;
  std::condition_variable first_list_done;
  bool first_list_is_baseline = true;  // false once watch() stopped waiting for it
  bool listed_once = false;
  std::unique_ptr<kube::Reflector> reflector;  // started by the first watch()

  StoredInstance remember(const json& object) {
    StoredInstance stored = stored_from_object(object);
    const Key key{stored.instance.namespace_name, stored.instance.name};
    cache.remember(key, stored.revision, object);
    warn_if_kept_in_deletion(key, object);
    return stored;
  }

  // Gone from the API server: nothing cached or warned of for it stays.
  void forget(const Key& key) {
    cache.forget(key);
    const std::lock_guard lock(warned_mutex);
    std::erase_if(kept_in_deletion_warned, [&](const auto& warned) { return warned.first == key; });
  }

  // Deleted, but kept by finalizers (none is dowser's; Akri's agent leaves
  // node-named ones): while its device is found, its plugin serves on the
  // terminating object and claims go into it. Said once per deletion.
  void warn_if_kept_in_deletion(const Key& key, const json& object) {
    const std::string since = metadata_string(object, "deletionTimestamp");
    const json& finalizers = metadata_member(object, "finalizers");
    if (since.empty() || !finalizers.is_array() || finalizers.empty()) return;
    {
      const std::lock_guard lock(warned_mutex);
      if (!kept_in_deletion_warned.emplace(key, since).second) return;
    }
    spdlog::warn(
        "instance store: {} is being deleted (since {}) but finalizers {} keep it: while its "
        "device is found, dowserd serves it and writes claims into it; remove the finalizers "
        "unless a controller still needs them (Akri's agent leaves node-named ones, see "
        "docs/migrating-from-akri.md)",
        describe(key.first, key.second), since, finalizers.dump());
  }

  // The stored object to PUT back, if it is still at expected_revision.
  json current_object(const Key& key, uint64_t expected_revision, const std::string& what) {
    std::optional<ObjectCache::Entry> cached = cache.find(key);
    // Seen newer: resourceVersions only grow, so expected_revision is stale.
    if (!cached || cached->revision < expected_revision) {
      try {
        const json object = client->get(kInstances, key.first, key.second);
        cached = ObjectCache::Entry{remember(object).revision, object};
      } catch (const kube::ApiError& error) {
        throw_write_error(error, what);
      }
    }
    if (cached->revision != expected_revision) {
      throw StoreError(StoreError::Kind::conflict,
                       what + ": expected revision " + std::to_string(expected_revision) +
                           ", stored revision is " + std::to_string(cached->revision));
    }
    return std::move(cached->object);
  }

  // The Configuration's uid, or "" if it does not exist.
  std::string configuration_uid(const Instance& instance) {
    if (instance.configuration_name.empty()) return "";
    try {
      return metadata_string(
          client->get(kConfigurations, instance.namespace_name, instance.configuration_name),
          "uid");
    } catch (const kube::ApiError& error) {
      if (!error.not_found()) {
        throw io_error(
            describe(instance.namespace_name, instance.name) + ": looking up its Configuration",
            error);
      }
      spdlog::debug(
          "instance store: Configuration {}/{} does not exist (yet); {} gets no owner reference",
          instance.namespace_name, instance.configuration_name,
          describe(instance.namespace_name, instance.name));
      return "";
    }
  }

  // Reflector handlers, on its thread.
  void listed(const std::vector<json>& objects, const std::string& version) {
    std::vector<StoredInstance> present;
    // Listed but not readable: it exists, so it is not deleted; its last
    // good state stands, as when a watch event brings such a version.
    std::set<Key> listed_keys;
    for (const json& object : objects) {
      try {
        present.push_back(remember(object));
      } catch (const StoreError& error) {
        spdlog::warn("instance store: skipping an Instance: {}", error.what());
      }
      listed_keys.emplace(metadata_string(object, "namespace"), metadata_string(object, "name"));
    }
    bool first = false;
    bool baseline = false;
    {
      const std::lock_guard lock(watch_mutex);
      first = !listed_once;
      baseline = first_list_is_baseline && first;
    }
    if (baseline) {
      for (const StoredInstance& stored : present) filter.remember(stored);
    } else {
      if (first) remember_known_before_watching(listed_keys, version);
      deliver_differences(present, listed_keys);
    }
    {
      const std::lock_guard lock(watch_mutex);
      listed_once = true;
    }
    first_list_done.notify_all();
  }

  // A first list that came after watch() stopped waiting for it: watchers
  // may have learnt of Instances since (list(), get(), their own writes).
  // Those this process saw at the list's version or before and the list no
  // longer has were deleted meanwhile; the filter learns them so that their
  // deleted events go out. Newer ones were written after the list was served,
  // and ones out of the watched namespace were never listed.
  void remember_known_before_watching(const std::set<Key>& listed_keys,
                                      const std::string& version) {
    const std::optional<uint64_t> listed_at = parse_revision(version);
    if (!listed_at) return;
    for (const json& object : cache.objects_up_to(*listed_at)) {
      StoredInstance known = stored_from_object(object);  // it parsed when cached
      const Key key{known.instance.namespace_name, known.instance.name};
      // Written by this process out of the watched namespace: not listed, not gone.
      const bool watched = scope.empty() || key.first == scope;
      if (watched && listed_keys.count(key) == 0) filter.remember(known);
    }
  }

  // Upserts what changed and deletes what is no longer listed.
  void deliver_differences(const std::vector<StoredInstance>& present,
                           const std::set<Key>& listed_keys) {
    for (const StoredInstance& stored : present) {
      if (auto event = filter.present(stored)) fanout->deliver(*event);
    }
    for (const Key& key : filter.present_keys()) {
      if (listed_keys.count(key) != 0) continue;
      forget(key);
      if (auto event = filter.absent(key.first, key.second)) fanout->deliver(*event);
    }
  }

  void changed(const std::string& type, const json& object) {
    try {
      if (type == "DELETED") {
        const Key key{metadata_string(object, "namespace"), metadata_string(object, "name")};
        forget(key);
        if (auto event = filter.absent(key.first, key.second)) fanout->deliver(*event);
      } else if (auto event = filter.present(remember(object))) {
        fanout->deliver(*event);
      }
    } catch (const StoreError& error) {
      spdlog::warn("instance store: skipping a watch event: {}", error.what());
    }
  }

  void start_watching() {
    kube::Reflector::Handlers handlers;
    handlers.listed = [this](const kube::Reflector::Listing& listing) {
      listed(listing.objects, listing.resource_version);
    };
    handlers.changed = [this](const std::string& type, const json& object) {
      changed(type, object);
    };
    handlers.failed = [](const kube::ApiError& error) {
      spdlog::warn("instance store: watching Instances: {} (retrying)", error.what());
    };
    reflector = std::make_unique<kube::Reflector>(*client, kInstances, scope, std::move(handlers));
    reflector->start();
  }
};

KubeInstanceStore::KubeInstanceStore(std::shared_ptr<kube::KubeClient> client,
                                     std::string namespace_name)
    : state_(std::make_unique<State>(std::move(client), std::move(namespace_name))) {}

KubeInstanceStore::~KubeInstanceStore() {
  if (state_->reflector) state_->reflector->stop();
}

std::vector<StoredInstance> KubeInstanceStore::list() {
  json list;
  try {
    list = state_->client->list(kInstances, state_->scope);
  } catch (const kube::ApiError& error) {
    throw io_error("listing Instances", error);
  }
  std::vector<StoredInstance> instances;
  const auto items = list.find("items");
  if (items == list.end() || !items->is_array()) return instances;
  for (const json& object : *items) {
    try {
      instances.push_back(state_->remember(object));
    } catch (const StoreError& error) {
      spdlog::warn("instance store: skipping an Instance: {}", error.what());
    }
  }
  return instances;
}

std::optional<StoredInstance> KubeInstanceStore::get(const std::string& namespace_name,
                                                     const std::string& name) {
  try {
    return state_->remember(state_->client->get(kInstances, namespace_name, name));
  } catch (const kube::ApiError& error) {
    if (!error.not_found()) throw io_error(describe(namespace_name, name), error);
    state_->forget({namespace_name, name});
    return std::nullopt;
  }
}

uint64_t KubeInstanceStore::create(const Instance& instance) {
  const std::string what = describe(instance.namespace_name, instance.name);
  json object = detail::to_akri_object(instance);
  const std::string uid = state_->configuration_uid(instance);
  if (!uid.empty()) {
    object["metadata"]["ownerReferences"] =
        json::array({owner_reference(instance.configuration_name, uid)});
  }
  try {
    return state_->remember(state_->client->create(kInstances, instance.namespace_name, object))
        .revision;
  } catch (const kube::ApiError& error) {
    if (error.conflict())
      throw StoreError(StoreError::Kind::already_exists, what + " already exists");
    throw io_error(what, error);
  } catch (const json::exception& error) {
    throw io_error(what + " cannot be stored", error);  // e.g. a string that is not UTF-8
  }
}

uint64_t KubeInstanceStore::update(const Instance& instance, uint64_t expected_revision) {
  const std::string what = describe(instance.namespace_name, instance.name);
  json object =
      state_->current_object({instance.namespace_name, instance.name}, expected_revision, what);
  object["spec"] = detail::to_akri_object(instance)["spec"];
  object["metadata"]["resourceVersion"] = std::to_string(expected_revision);
  try {
    return state_->remember(state_->client->replace(kInstances, instance.namespace_name, object))
        .revision;
  } catch (const kube::ApiError& error) {
    throw_write_error(error, what);
  } catch (const json::exception& error) {
    throw io_error(what + " cannot be stored", error);
  }
}

void KubeInstanceStore::remove(const std::string& namespace_name, const std::string& name,
                               uint64_t expected_revision) {
  try {
    state_->client->remove(kInstances, namespace_name, name, std::to_string(expected_revision));
  } catch (const kube::ApiError& error) {
    throw_write_error(error, describe(namespace_name, name));
  }
  state_->forget({namespace_name, name});
}

std::unique_ptr<WatchSubscription> KubeInstanceStore::watch(
    std::function<void(const WatchEvent&)> callback) {
  State& state = *state_;
  const uint64_t id = state.fanout->add(std::move(callback));
  std::unique_lock lock(state.watch_mutex);
  if (!state.reflector) state.start_watching();
  if (!state.first_list_done.wait_for(lock, kFirstListDeadline,
                                      [&] { return state.listed_once; })) {
    // The first list, whenever it comes, reports everything as changes.
    state.first_list_is_baseline = false;
    spdlog::warn("instance store: Instances not listed after {} s; watching anyway",
                 kFirstListDeadline.count());
  }
  return std::make_unique<KubeWatchSubscription>(state.fanout, id);
}

}  // namespace dowser::store
