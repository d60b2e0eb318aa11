// KubeConfigurationSource: Configurations from the API server, their
// discoveryProperties resolved from the Secrets and ConfigMaps watched beside
// them. Three reflectors feed one state under one mutex; events leave in order
// under it, and Kubernetes Events are posted after it is released. Problems the
// daemon reports are posted by a thread of their own, so that it never waits
// for the API server.
#include "configuration.hpp"
#include "kube_client.hpp"
#include "naming.hpp"
#include "thread_names.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <utility>

namespace dowser::configuration {
namespace {

using nlohmann::json;
using Identity = std::pair<std::string, std::string>;  // (namespace, name)
using KeyValues = std::map<std::string, std::string>;

using kube::resources::kConfigMaps;
using kube::resources::kConfigurations;
using kube::resources::kEvents;
using kube::resources::kSecrets;

std::string text_at(const json& object, const json::json_pointer& pointer) {
  return object.contains(pointer) && object.at(pointer).is_string()
             ? object.at(pointer).get<std::string>()
             : std::string();
}

Identity identity_of(const json& object) {
  return {text_at(object, "/metadata/namespace"_json_pointer),
          text_at(object, "/metadata/name"_json_pointer)};
}

std::string identity_text(const Identity& identity) {
  return identity.first + "/" + identity.second;
}

// nullopt when text is not base64.
std::optional<std::string> base64_decode(const std::string& text) {
  try {
    return kube::decode_base64(text);
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

// The string entries of object[field], base64-decoded when asked; entries
// that are not strings (or not base64) are left out, as if absent.
void add_entries(const json& object, const char* field, bool base64, KeyValues& into) {
  auto entries = object.find(field);
  if (entries == object.end() || !entries->is_object()) return;
  for (const auto& [key, value] : entries->items()) {
    if (!value.is_string()) continue;
    std::optional<std::string> text =
        base64 ? base64_decode(value.get<std::string>()) : value.get<std::string>();
    if (text) into.emplace(key, std::move(*text));  // emplace: data wins over binaryData
  }
}

// Secrets: `data` is base64 (`stringData` is write-only, merged by the server).
KeyValues secret_values(const json& secret) {
  KeyValues values;
  add_entries(secret, "data", true, values);
  return values;
}

// ConfigMaps: `data` as it is, else `binaryData` decoded.
KeyValues config_map_values(const json& config_map) {
  KeyValues values;
  add_entries(config_map, "data", false, values);
  add_entries(config_map, "binaryData", true, values);
  return values;
}

std::string rfc3339_now() {
  std::time_t seconds = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text.data();
}

// What a Configuration object last parsed to, with what Events need to name it.
struct Parsed {
  Configuration configuration;
  std::string uid;
  std::string resource_version;
};

// What is known of one kind of object that discoveryProperties reference.
struct ReferencedObjects {
  explicit ReferencedObjects(std::string plural_in) : plural(std::move(plural_in)) {}
  std::string plural;  // "secrets", as in RBAC rules
  bool listed = false;
  // Why the API server refuses to list them (401, 403), until it lists them.
  std::string refusal;
  std::map<Identity, KeyValues> objects;
};

// An object with a deletionTimestamp is on its way out (finalizers, Akri's
// included, may hold it for long): it no longer asks for discovery.
bool terminating(const json& object) {
  auto metadata = object.find("metadata");
  return metadata != object.end() && metadata->is_object() &&
         metadata->contains("deletionTimestamp");
}

}  // namespace

struct KubeConfigurationSource::State {
  State(kube::KubeClient& client_in, std::string namespace_in, std::string node_in,
        Events events_in, std::chrono::milliseconds event_refresh_in)
      : client(client_in),
        namespace_name(std::move(namespace_in)),
        reporting_node(std::move(node_in)),
        events(with_defaults(std::move(events_in))),
        event_refresh(std::max(event_refresh_in, std::chrono::milliseconds(10))) {}

  static Events with_defaults(Events events) {
    if (!events.upserted) events.upserted = [](const Configuration&) {};
    if (!events.removed) events.removed = [](const std::string&, const std::string&) {};
    if (!events.invalid) events.invalid = [](const ConfigurationError&) {};
    if (!events.valid) events.valid = [](const std::string&) {};
    if (!events.unresolved)
      events.unresolved = [](const Configuration&, const std::string&, UnresolvedReference::Cause) {
      };
    if (!events.synced) events.synced = [] {};
    if (!events.listed) events.listed = [] {};
    return events;
  }

  // Kubernetes Events to post once the lock is released.
  using Reports = std::vector<json>;

  // ---- reflector handlers (each on its reflector's thread) ----
  void configurations_listed(const std::vector<json>& objects);
  void configuration_changed(const std::string& type, const json& object);
  void references_listed(ReferencedObjects& kind, const std::vector<json>& objects,
                         KeyValues (*values_of)(const json&));
  void reference_changed(ReferencedObjects& kind, const std::string& type, const json& object,
                         KeyValues (*values_of)(const json&));
  void references_failed(ReferencedObjects& kind, const kube::ApiError& error);

  // ---- state, under mutex ----
  void store(const json& object, Reports& reports);
  void forget(const Identity& identity);
  void evaluate_all(Reports& reports);
  void evaluate(const Identity& identity, Reports& reports);
  void tell_synced_once_complete();
  const ReferencedObjects& objects_of(ReferenceKind kind) const {
    return kind == ReferenceKind::secret ? secrets_ : config_maps_;
  }
  bool outside_scope(const KeyReference& reference) const {
    return !namespace_name.empty() && reference.namespace_name != namespace_name;
  }
  bool waits_for_listing(const Configuration& configuration) const;
  std::optional<std::string> lookup(ReferenceKind kind, const KeyReference& reference) const;
  // What an Event's name tells apart besides the object, reason and message:
  // each version (an invalid version, a refusal, is a problem of its own), or
  // not (a property that does not resolve is one problem across the edits
  // that keep it, and every node, started before or after them, names it alike).
  enum class NamedFor { each_version, the_object };
  json warning(const Identity& identity, const Parsed* parsed, const std::string& reason,
               const std::string& message, NamedFor named_for = NamedFor::each_version) const;
  // What went wrong ("Event REASON on Configuration NS/NAME: WHAT"), nullopt
  // once posted or told already.
  std::optional<std::string> post_one(const json& event);
  void post(const Reports& reports);

  // ---- problems the daemon reports (core thread), and their poster ----
  void report_problem(const Configuration& configuration, const std::string& reason,
                      const std::string& message);
  void problems_resolved(const Configuration& configuration);
  void run_poster();
  Reports standing_warnings();
  void post_standing_warnings();
  void stop_poster();

  kube::KubeClient& client;
  const std::string namespace_name;  // empty: all
  const std::string reporting_node;
  const Events events;
  const std::chrono::milliseconds event_refresh;

  std::mutex mutex;
  std::map<Identity, Parsed> parsed_;  // last good version of each object
  struct ReportedInvalid {
    std::string version;  // the resourceVersion reported bad
    json warning;         // its Event
  };
  std::map<Identity, ReportedInvalid> reported_invalid_;
  ReferencedObjects secrets_{kSecrets.plural}, config_maps_{kConfigMaps.plural};
  // They reference a kind still being listed: no synced until it is.
  std::set<Identity> held_;
  std::map<Identity, Configuration> delivered_;  // resolved, as last upserted
  std::map<Identity, std::string> unresolved_;   // the problem last reported
  // Reported invalid, then parsed again: told `valid` only right before its
  // verdict (upserted, even unchanged, or unresolved), as one locked step.
  // The daemon keeps its Instances while it is invalid; told `valid` alone
  // (a re-list tells others between the two), it would withdraw them.
  std::set<Identity> revalidated_;
  // The daemon's problems, with the Configuration they were told on (as
  // delivered): their Events by message, posted again while it is the one
  // delivered, until the daemon resolves them.
  struct DaemonProblems {
    Configuration configuration;
    std::map<std::string, json> warnings;
  };
  std::map<Identity, DaemonProblems> problems_posted_;
  bool configurations_listed_ = false;
  bool synced_ = false;

  std::vector<std::unique_ptr<kube::Reflector>> reflectors;

  // The poster thread's own: whether the last refresh failed (told once).
  bool refresh_failing = false;
  std::mutex poster_mutex;  // guards what follows
  std::condition_variable poster_wake;
  std::deque<json> poster_queue;
  bool poster_stopping = false;
  std::thread poster;
};

// ---- objects into state ------------------------------------------------------------

void KubeConfigurationSource::State::store(const json& object, Reports& reports) {
  const Identity identity = identity_of(object);
  const std::string source = identity_text(identity);
  const std::string version = text_at(object, "/metadata/resourceVersion"_json_pointer);
  try {
    parsed_.insert_or_assign(identity,
                             Parsed{parse_configuration_object(object.dump(), source),
                                    text_at(object, "/metadata/uid"_json_pointer), version});
    if (reported_invalid_.erase(identity) > 0) revalidated_.insert(identity);
  } catch (const ConfigurationError& error) {
    // A re-list brings the same bad version again: report it once.
    auto reported = reported_invalid_.find(identity);
    if (reported != reported_invalid_.end() && reported->second.version == version) return;
    revalidated_.erase(identity);  // invalid again before it was told valid
    events.invalid(ConfigurationError(error).about(identity.first, identity.second));
    Parsed named{{}, text_at(object, "/metadata/uid"_json_pointer), version};
    reports.push_back(warning(identity, &named, "InvalidConfiguration", error.what()));
    reported_invalid_.insert_or_assign(identity, ReportedInvalid{version, reports.back()});
  }
}

// The object is gone: a report that it is invalid no longer holds. One
// reported invalid and never delivered is removed too (evaluate tells the
// rest: one delivered, or unresolved): the daemon keeps its Instances, and
// its resource name with them, until told it is gone.
void KubeConfigurationSource::State::forget(const Identity& identity) {
  const bool invalid = reported_invalid_.erase(identity) > 0;
  const bool fixed_since = revalidated_.erase(identity) > 0;  // not told valid yet
  events.valid(identity_text(identity));
  if ((invalid || fixed_since) && delivered_.count(identity) == 0 &&
      unresolved_.count(identity) == 0)
    events.removed(identity.first, identity.second);
}

// Whether a value the Configuration needs comes from a kind still being
// listed: a Secret not listed yet is not a missing one. References that
// cannot be read anyway (out of scope, refused) are not waited for.
bool KubeConfigurationSource::State::waits_for_listing(const Configuration& configuration) const {
  return std::any_of(
      configuration.discovery_properties.begin(), configuration.discovery_properties.end(),
      [this](const DiscoveryProperty& property) {
        const auto& reference =
            property.secret_key_ref ? property.secret_key_ref : property.config_map_key_ref;
        if (property.value || !reference || outside_scope(*reference)) return false;
        const ReferencedObjects& kind =
            objects_of(property.secret_key_ref ? ReferenceKind::secret : ReferenceKind::config_map);
        return !kind.listed && kind.refusal.empty();
      });
}

std::optional<std::string> KubeConfigurationSource::State::lookup(
    ReferenceKind kind, const KeyReference& reference) const {
  if (outside_scope(reference)) {
    // Akri's default namespace for a reference is "default", whatever the
    // Configuration's: dowserd keeps it, and says why it cannot follow it.
    throw UnreadableReference::for_good(
        "outside namespace " + namespace_name + ", the only one dowserd reads (--namespace " +
        namespace_name + "); a reference without a namespace means \"default\", as in Akri");
  }
  const ReferencedObjects& objects = objects_of(kind);
  if (!objects.listed) {
    // Roles in the namespaces that hold the objects do not allow a list
    // across all namespaces: say what dowserd asks for.
    throw UnreadableReference::awaiting_access(
        "dowserd cannot read " + objects.plural + ": it lists and watches them " +
        (namespace_name.empty()
             ? "in all namespaces, which needs a ClusterRole (or --namespace and a Role there)"
             : "in namespace " + namespace_name) +
        ", and the API server refused: " + objects.refusal);
  }
  const auto& cache = objects.objects;
  auto object = cache.find({reference.namespace_name, reference.name});
  if (object == cache.end()) return std::nullopt;
  auto value = object->second.find(reference.key);
  if (value == object->second.end()) return std::nullopt;
  return value->second;
}

void KubeConfigurationSource::State::evaluate(const Identity& identity, Reports& reports) {
  auto parsed = parsed_.find(identity);
  if (parsed == parsed_.end()) {
    held_.erase(identity);
    // One reported unresolved and never delivered is removed too: the
    // daemon holds it as refused until told it is gone.
    const bool was_unresolved = unresolved_.erase(identity) > 0;
    if (delivered_.erase(identity) > 0 || was_unresolved)
      events.removed(identity.first, identity.second);
    return;
  }
  const Configuration& configuration = parsed->second.configuration;
  // Held for synced while a kind it references is being listed: until then
  // it is neither delivered nor unresolved, and its Instances would look
  // orphaned. One whose kind dowserd may not read is told unresolved.
  if (waits_for_listing(configuration)) {
    held_.insert(identity);
    return;
  }
  held_.erase(identity);
  const bool was_invalid = revalidated_.erase(identity) > 0;
  if (was_invalid) events.valid(identity_text(identity));
  try {
    Configuration resolved = resolve_references(
        configuration, [this](ReferenceKind kind, const KeyReference& reference) {
          return lookup(kind, reference);
        });
    // Resolved again to the version delivered (a Secret re-created with
    // the same value), or parsed again after an invalid version: delivered
    // again all the same, so that the daemon no longer holds it as refused
    // (or keeps it for its error).
    const bool was_unresolved = unresolved_.erase(identity) > 0;
    auto delivered = delivered_.find(identity);
    if (!was_unresolved && !was_invalid && delivered != delivered_.end() &&
        delivered->second == resolved)
      return;
    delivered_.insert_or_assign(identity, resolved);
    events.upserted(resolved);
  } catch (const UnresolvedReference& problem) {
    // The message says which (and so why): told again only when it changes,
    // or after an invalid version.
    std::string& last = unresolved_[identity];
    if (last == problem.what() && !was_invalid) return;
    last = problem.what();
    // The daemon names the Configuration itself; the Event stands alone.
    events.unresolved(configuration, problem.field_path() + ": " + problem.reason(),
                      problem.cause());
    reports.push_back(
        warning(identity, &parsed->second, "UnresolvedProperty", last, NamedFor::the_object));
  }
}

// Configurations are evaluated once listed, each as soon as the kinds it
// references are listed too: one that references nothing does not wait for
// Secrets that take long to list, or that dowserd may not read.
void KubeConfigurationSource::State::evaluate_all(Reports& reports) {
  if (!configurations_listed_) return;
  std::set<Identity> identities;
  for (const auto& [identity, parsed] : parsed_) identities.insert(identity);
  for (const auto& [identity, configuration] : delivered_) identities.insert(identity);
  for (const auto& [identity, problem] : unresolved_) identities.insert(identity);  // gone too?
  for (const auto& identity : identities) evaluate(identity, reports);
  tell_synced_once_complete();
}

// synced lets the daemon withdraw what no Configuration claims: not while
// one is held back, whose Instances would go with it.
void KubeConfigurationSource::State::tell_synced_once_complete() {
  if (synced_ || !configurations_listed_ || !held_.empty()) return;
  synced_ = true;
  events.synced();
}

// ---- reflector handlers ------------------------------------------------------------

void KubeConfigurationSource::State::configurations_listed(const std::vector<json>& objects) {
  Reports reports;
  {
    std::lock_guard lock(mutex);
    std::set<Identity> present;
    for (const auto& object : objects) {
      if (terminating(object)) continue;
      present.insert(identity_of(object));
      store(object, reports);
    }
    std::erase_if(parsed_, [&](const auto& entry) { return present.count(entry.first) == 0; });
    std::erase_if(problems_posted_,
                  [&](const auto& entry) { return present.count(entry.first) == 0; });
    std::vector<Identity> gone_invalid;
    for (const auto& [identity, reported] : reported_invalid_)
      if (present.count(identity) == 0) gone_invalid.push_back(identity);
    for (const auto& identity : revalidated_)
      if (present.count(identity) == 0) gone_invalid.push_back(identity);
    for (const auto& identity : gone_invalid) forget(identity);
    if (!std::exchange(configurations_listed_, true)) events.listed();
    evaluate_all(reports);
  }
  post(reports);
}

void KubeConfigurationSource::State::configuration_changed(const std::string& type,
                                                           const json& object) {
  Reports reports;
  {
    std::lock_guard lock(mutex);
    const Identity identity = identity_of(object);
    if (type == "DELETED" || terminating(object)) {
      parsed_.erase(identity);
      problems_posted_.erase(identity);
      forget(identity);
    } else {
      store(object, reports);
    }
    if (configurations_listed_) evaluate(identity, reports);
    tell_synced_once_complete();
  }
  post(reports);
}

void KubeConfigurationSource::State::references_listed(ReferencedObjects& kind,
                                                       const std::vector<json>& objects,
                                                       KeyValues (*values_of)(const json&)) {
  Reports reports;
  {
    std::lock_guard lock(mutex);
    kind.objects.clear();
    for (const auto& object : objects) kind.objects.emplace(identity_of(object), values_of(object));
    kind.listed = true;
    kind.refusal.clear();
    evaluate_all(reports);
  }
  post(reports);
}

void KubeConfigurationSource::State::reference_changed(ReferencedObjects& kind,
                                                       const std::string& type, const json& object,
                                                       KeyValues (*values_of)(const json&)) {
  Reports reports;
  {
    std::lock_guard lock(mutex);
    if (type == "DELETED")
      kind.objects.erase(identity_of(object));
    else
      kind.objects.insert_or_assign(identity_of(object), values_of(object));
    evaluate_all(reports);  // only Configurations whose resolution changed are re-delivered
  }
  post(reports);
}

// Refused credentials will not pass by retrying alone: the Configurations
// that need these objects are told why they cannot run (they are retried
// with the listing, which starts them once someone grants access). Other
// failures (timeouts, a server restarting) keep them waiting, logged only.
void KubeConfigurationSource::State::references_failed(ReferencedObjects& kind,
                                                       const kube::ApiError& error) {
  if (error.status() != 401 && error.status() != 403) return;
  Reports reports;
  {
    std::lock_guard lock(mutex);
    if (kind.listed || kind.refusal == error.what()) return;
    kind.refusal = error.what();
    evaluate_all(reports);
  }
  post(reports);
}

// ---- Kubernetes Events -------------------------------------------------------------

json KubeConfigurationSource::State::warning(const Identity& identity, const Parsed* parsed,
                                             const std::string& reason, const std::string& message,
                                             NamedFor named_for) const {
  const std::string now = rfc3339_now();
  json involved = {{"apiVersion", "akri.sh/v0"},
                   {"kind", "Configuration"},
                   {"namespace", identity.first},
                   {"name", identity.second}};
  if (parsed != nullptr && !parsed->uid.empty()) involved["uid"] = parsed->uid;
  if (parsed != nullptr && !parsed->resource_version.empty())
    involved["resourceVersion"] = parsed->resource_version;
  json named = involved;
  if (named_for == NamedFor::the_object) named.erase("resourceVersion");
  const std::string problem = named.dump() + "\n" + reason + "\n" + message;
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata",
           {{"name", naming::event_name(identity.second, problem)}, {"namespace", identity.first}}},
          {"involvedObject", involved},
          {"reason", reason},
          {"message", message},
          {"type", "Warning"},
          {"count", 1},
          {"firstTimestamp", now},
          {"lastTimestamp", now},
          {"source", {{"component", "dowserd"}, {"host", reporting_node}}},
          {"reportingComponent", "dowserd"},
          {"reportingInstance", reporting_node}};
}

std::optional<std::string> KubeConfigurationSource::State::post_one(const json& event) {
  try {
    client.create(kEvents, event["metadata"]["namespace"].get<std::string>(), event);
    return std::nullopt;
  } catch (const std::exception& e) {
    // The same name is the same problem: told already (by another node,
    // or by this one before a restart).
    // Nor is one cut off by a shutdown.
    if (const auto* refused = dynamic_cast<const kube::ApiError*>(&e);
        refused && (refused->conflict() || refused->stopped()))
      return std::nullopt;
    // Not only API errors: an object with no namespace (a CRD installed
    // cluster-scoped) is refused by the client, and this runs on the
    // poster's thread or the reflector's, which an exception would end.
    return "Event " + event["reason"].get<std::string>() + " on Configuration " +
           event["involvedObject"]["namespace"].get<std::string>() + "/" +
           event["involvedObject"]["name"].get<std::string>() + ": " + e.what();
  }
}

// The log line (from `invalid` / `unresolved`) already says what is wrong.
void KubeConfigurationSource::State::post(const Reports& reports) {
  for (const auto& event : reports) {
    if (auto failed = post_one(event)) spdlog::warn("cannot post {}", *failed);
  }
}

void KubeConfigurationSource::State::report_problem(const Configuration& configuration,
                                                    const std::string& reason,
                                                    const std::string& message) {
  const Identity identity{configuration.namespace_name, configuration.name};
  json event;
  {
    std::lock_guard lock(mutex);
    const auto parsed = parsed_.find(identity);
    const auto delivered = delivered_.find(identity);
    // Gone meanwhile, or told on a version replaced since: nothing to tell.
    if (parsed == parsed_.end() || delivered == delivered_.end() ||
        !(delivered->second == configuration))
      return;
    DaemonProblems& problems = problems_posted_[identity];
    if (!(problems.configuration == configuration)) problems = {configuration, {}};
    const auto [told, added] = problems.warnings.try_emplace(message);
    if (!added) return;
    told->second = event = warning(identity, &parsed->second, reason, message);
  }
  {
    std::lock_guard lock(poster_mutex);
    if (poster_stopping) return;
    poster_queue.push_back(std::move(event));
  }
  poster_wake.notify_one();
}

// Only for the version the problems were told on: the daemon may run an
// older one (its handler refused the change), whose start resolves nothing
// of this one.
void KubeConfigurationSource::State::problems_resolved(const Configuration& configuration) {
  std::lock_guard lock(mutex);
  const auto posted = problems_posted_.find({configuration.namespace_name, configuration.name});
  if (posted != problems_posted_.end() && posted->second.configuration == configuration)
    posted->second.warnings.clear();
}

// The Events of the problems that stand now, stamped now: posted again, each
// is created anew if the API server dropped it, and left alone if not (its
// name is the problem's). An invalid object's Event is the one kept (no
// parsed version to build it from); an unresolved one's is built anew, so
// that it names the version now running. The daemon's problems stand while
// the Configuration they were told on is the one delivered, until the daemon
// says they are resolved.
KubeConfigurationSource::State::Reports KubeConfigurationSource::State::standing_warnings() {
  std::lock_guard lock(mutex);
  Reports reports;
  const std::string now = rfc3339_now();
  const auto restamped = [&now](json event) {
    event["firstTimestamp"] = event["lastTimestamp"] = now;
    return event;
  };
  for (const auto& [identity, reported] : reported_invalid_)
    reports.push_back(restamped(reported.warning));
  for (const auto& [identity, problem] : unresolved_) {
    const auto parsed = parsed_.find(identity);
    if (parsed != parsed_.end())
      reports.push_back(
          warning(identity, &parsed->second, "UnresolvedProperty", problem, NamedFor::the_object));
  }
  for (const auto& [identity, problems] : problems_posted_) {
    const auto delivered = delivered_.find(identity);
    if (delivered == delivered_.end() || !(delivered->second == problems.configuration)) continue;
    for (const auto& [message, warning] : problems.warnings) reports.push_back(restamped(warning));
  }
  return reports;
}

namespace {

// Nodes started together would refresh together: each waits 3/4 to 5/4 of
// the period, drawn anew every time.
std::chrono::steady_clock::time_point next_refresh(std::chrono::milliseconds period) {
  thread_local std::mt19937 random{std::random_device{}()};
  std::uniform_int_distribution<std::chrono::milliseconds::rep> spread(period.count() * 3 / 4,
                                                                       period.count() * 5 / 4);
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(spread(random));
}

}  // namespace

// One at a time: a stop must not wait for every post to a server that does
// not answer (each may take the request timeout).
void KubeConfigurationSource::State::run_poster() {
  std::unique_lock lock(poster_mutex);
  auto refresh_at = next_refresh(event_refresh);
  while (true) {
    const bool woken = poster_wake.wait_until(
        lock, refresh_at, [this] { return poster_stopping || !poster_queue.empty(); });
    if (poster_stopping) return;
    const Reports reports(poster_queue.begin(), poster_queue.end());
    poster_queue.clear();
    lock.unlock();
    for (const json& event : reports) {
      post({event});
      if (const std::lock_guard stopping(poster_mutex); poster_stopping) return;
    }
    if (!woken) {
      refresh_at = next_refresh(event_refresh);
      post_standing_warnings();
    }
    lock.lock();
  }
}

// A refresh that fails (Events forbidden by RBAC, the server away) fails
// alike for every problem and every period: told once, until one succeeds.
void KubeConfigurationSource::State::post_standing_warnings() {
  const Reports standing = standing_warnings();
  size_t failures = 0;
  std::string first_failure;
  for (const json& event : standing) {
    if (auto failed = post_one(event); failed && failures++ == 0) first_failure = *failed;
    if (const std::lock_guard stopping(poster_mutex); poster_stopping) return;
  }
  if (failures == 0) {
    refresh_failing = false;
    return;
  }
  const auto level = refresh_failing ? spdlog::level::debug : spdlog::level::warn;
  spdlog::log(level,
              "cannot refresh {} of {} Events of standing problems (said once until a refresh "
              "works); the first: cannot post {}",
              failures, standing.size(), first_failure);
  refresh_failing = true;
}

void KubeConfigurationSource::State::stop_poster() {
  {
    std::lock_guard lock(poster_mutex);
    poster_stopping = true;
  }
  poster_wake.notify_one();
  if (poster.joinable()) poster.join();
}

// ---- public face -------------------------------------------------------------------

KubeConfigurationSource::KubeConfigurationSource(kube::KubeClient& client,
                                                 std::string namespace_name,
                                                 std::string reporting_node, Events events,
                                                 std::chrono::milliseconds event_refresh)
    : state_(std::make_unique<State>(client, std::move(namespace_name), std::move(reporting_node),
                                     std::move(events), event_refresh)) {}

KubeConfigurationSource::~KubeConfigurationSource() { stop(); }

void KubeConfigurationSource::start() {
  State& state = *state_;
  if (!state.reflectors.empty()) throw std::logic_error("KubeConfigurationSource already started");
  auto failed = [](const std::string& plural) {
    return [plural](const kube::ApiError& error) {
      spdlog::warn("Kubernetes {}: {} (retrying)", plural, error.what());
    };
  };
  auto reference_failed = [&state, failed](ReferencedObjects& kind) {
    return [&state, &kind, log = failed(kind.plural)](const kube::ApiError& error) {
      log(error);
      state.references_failed(kind, error);
    };
  };
  auto add = [&](const kube::ResourceType& type, kube::Reflector::Handlers handlers) {
    state.reflectors.push_back(std::make_unique<kube::Reflector>(
        state.client, type, state.namespace_name, std::move(handlers)));
  };
  add(kConfigurations, {[&state](const kube::Reflector::Listing& listing) {
                          state.configurations_listed(listing.objects);
                        },
                        [&state](const std::string& type, const json& object) {
                          state.configuration_changed(type, object);
                        },
                        failed(kConfigurations.plural), /*current=*/{}});
  add(kSecrets, {[&state](const kube::Reflector::Listing& listing) {
                   state.references_listed(state.secrets_, listing.objects, secret_values);
                 },
                 [&state](const std::string& type, const json& object) {
                   state.reference_changed(state.secrets_, type, object, secret_values);
                 },
                 reference_failed(state.secrets_), /*current=*/{}});
  add(kConfigMaps, {[&state](const kube::Reflector::Listing& listing) {
                      state.references_listed(state.config_maps_, listing.objects,
                                              config_map_values);
                    },
                    [&state](const std::string& type, const json& object) {
                      state.reference_changed(state.config_maps_, type, object, config_map_values);
                    },
                    reference_failed(state.config_maps_), /*current=*/{}});
  state.poster = std::thread([&state] {
    name_this_thread("kube-events");
    state.run_poster();
  });
  for (auto& reflector : state.reflectors) reflector->start();
}

void KubeConfigurationSource::stop() {
  for (auto& reflector : state_->reflectors) reflector->stop();
  state_->stop_poster();
}

void KubeConfigurationSource::report_problem(const Configuration& configuration,
                                             const std::string& reason,
                                             const std::string& message) {
  state_->report_problem(configuration, reason, message);
}

void KubeConfigurationSource::problems_resolved(const Configuration& configuration) {
  state_->problems_resolved(configuration);
}

}  // namespace dowser::configuration
