// Configuration: Akri's `Configuration` (apiVersion akri.sh/v0) as dowser
// reads it, the parser with errors that name file, field path and reason, and
// the sources that deliver them: a watched directory of manifests, or the
// cluster's API server.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dowser::kube {
class KubeClient;
}

namespace dowser::configuration {

// How the Configuration-level plugin may use one device for one container.
enum class UniqueInstances {
  required,   // every device of a container request is a distinct Instance (default)
  preferred,  // distinct when possible, several slots of one Instance otherwise
};

// A `secretKeyRef` or `configMapKeyRef` of a discovery property.
struct KeyReference {
  std::string name;
  std::string key;
  std::string namespace_name = "default";
  bool optional = false;
  friend bool operator==(const KeyReference&, const KeyReference&) = default;
};

// spec.discoveryHandler.discoveryProperties[i]: `value` wins over `valueFrom`;
// neither means "present without a value" (Akri's absent ByteData).
struct DiscoveryProperty {
  std::string name;
  std::optional<std::string> value;
  std::optional<KeyReference> secret_key_ref;
  std::optional<KeyReference> config_map_key_ref;
  friend bool operator==(const DiscoveryProperty&, const DiscoveryProperty&) = default;
};

struct Configuration {
  std::string namespace_name = "default";  // metadata.namespace
  std::string name;                        // metadata.name
  std::string handler_name;                // spec.discoveryHandler.name
  std::string discovery_details;           // spec.discoveryHandler.discoveryDetails (opaque text)
  std::vector<DiscoveryProperty> discovery_properties;
  uint32_t capacity = 1;                                 // spec.capacity
  std::map<std::string, std::string> broker_properties;  // spec.brokerProperties
  // Kept as opaque YAML text (empty when absent): dowser does not deploy brokers.
  std::string broker_spec;                 // spec.brokerSpec
  std::string instance_service_spec;       // spec.instanceServiceSpec
  std::string configuration_service_spec;  // spec.configurationServiceSpec
  // dowser's optional additions under spec:
  UniqueInstances unique_instances = UniqueInstances::required;  // spec.uniqueInstances
  std::chrono::seconds shared_offline_grace =
      std::chrono::seconds(300);  // spec.sharedOfflineGraceSeconds

  // Same handler, details and properties: no need to restart discovery.
  bool same_discovery(const Configuration& other) const;
  friend bool operator==(const Configuration&, const Configuration&) = default;
};

// What was wrong with a manifest, and where. what() is one line:
// "<source>: <field path>: <reason>", e.g.
// "/etc/dowser/configs/cam.yaml: spec.capacity: must be an integer from 1 to 1000000".
class ConfigurationError : public std::runtime_error {
 public:
  ConfigurationError(std::string source, std::string field_path, std::string reason);
  const std::string& source() const noexcept { return source_; }
  const std::string& field_path() const noexcept { return field_path_; }
  const std::string& reason() const noexcept { return reason_; }
  // The Configuration (namespace, name) the error is about, when the source
  // knows it (a cluster object has its name even when invalid); unset for a
  // file that did not parse, whose Configurations are unknown.
  const std::optional<std::pair<std::string, std::string>>& configuration() const noexcept {
    return configuration_;
  }
  ConfigurationError& about(std::string namespace_name, std::string name) {
    configuration_.emplace(std::move(namespace_name), std::move(name));
    return *this;
  }

 private:
  std::string source_;
  std::string field_path_;
  std::string reason_;
  std::optional<std::pair<std::string, std::string>> configuration_;
};

// A required `valueFrom` reference that did not resolve (see
// resolve_references), and why: one awaiting access is not refused for good.
class UnresolvedReference : public ConfigurationError {
 public:
  enum class Cause { value_missing, unreadable_for_good, awaiting_access };
  UnresolvedReference(std::string source, std::string field_path, std::string reason, Cause cause)
      : ConfigurationError(std::move(source), std::move(field_path), std::move(reason)),
        cause_(cause) {}
  Cause cause() const noexcept { return cause_; }

 private:
  Cause cause_;
};

// A Secret or ConfigMap that cannot be looked up at all (see
// resolve_references), and why. Its cause is one of two: never (outside the
// namespace it reads), or not until dowserd is granted read access to the
// object's kind (the API server refused it), which may come while it runs.
class UnreadableReference : public std::runtime_error {
 public:
  static UnreadableReference for_good(const std::string& why) {
    return {why, UnresolvedReference::Cause::unreadable_for_good};
  }
  static UnreadableReference awaiting_access(const std::string& why) {
    return {why, UnresolvedReference::Cause::awaiting_access};
  }
  UnresolvedReference::Cause cause() const noexcept { return cause_; }

 private:
  UnreadableReference(const std::string& why, UnresolvedReference::Cause cause)
      : std::runtime_error(why), cause_(cause) {}
  UnresolvedReference::Cause cause_;
};

// Parses every YAML document in text (documents separated by ---; empty ones
// are skipped). source names the text in errors (usually the file path).
// Throws ConfigurationError for the first problem found.
std::vector<Configuration> parse_configurations(std::string_view text, const std::string& source);

// Parses one Configuration object as the API server returns it (JSON text is
// YAML), with the same checks and errors as parse_configurations.
Configuration parse_configuration_object(std::string_view json_text, const std::string& source);

// Empty when name may name a Configuration (metadata.name), else the reason.
std::string configuration_name_problem(std::string_view name);
// Why name is not a valid namespace name; empty when it is.
std::string namespace_name_problem(std::string_view name);

// Whether a file of a manifest directory is read as a manifest: *.yaml,
// *.yml, *.json, except hidden files and editor temporaries.
bool is_manifest_name(std::string_view file_name);

// The manifest files of a directory, by name. Throws ConfigurationError
// (field path "(directory)") when it cannot be read.
std::vector<std::filesystem::path> manifest_files(const std::filesystem::path& directory);

// What read_manifest does with what is not a regular file (a FIFO, a device):
// refuses it, as dowserd does in a manifest directory, or reads it as a
// stream (a path named on a command line: /dev/stdin).
enum class NonRegular { refused, read };

// A manifest file's text. Throws ConfigurationError (field path "(file)")
// naming why it cannot be read, or that it is too large to be a manifest.
std::string read_manifest(const std::filesystem::path& file,
                          NonRegular non_regular = NonRegular::refused);

// Where Configurations come from: a watched directory or the cluster. Events
// are delivered in order, on the source's own threads (or on the caller of
// start()); handlers must be quick (post elsewhere), must not throw and must
// not call stop(). Identity is (namespace, name).
class ConfigurationSource {
 public:
  struct Events {
    std::function<void(const Configuration&)> upserted;  // new, or changed in any field
    // Gone: one delivered, or reported unresolved, or reported invalid with
    // its identity (ConfigurationError::configuration), maybe never delivered.
    std::function<void(const std::string& namespace_name, const std::string& name)> removed;
    std::function<void(const ConfigurationError&)> invalid;
    // The source (a file path, or "<namespace>/<name>" of an object) now
    // parses cleanly, or is gone: earlier `invalid` reports on it no longer hold.
    // The Kubernetes source tells it of a fixed object right before that
    // object's upserted (also of an unchanged version) or unresolved, with
    // no other event of its own in between.
    std::function<void(const std::string& source)> valid = {};
    // A Configuration that cannot run yet (a Secret or ConfigMap it needs is
    // missing, or dowserd may not read that kind), with why; its previous
    // version, if any, keeps running, and upserted follows once it resolves
    // (also to the version running).
    std::function<void(const Configuration&, const std::string& reason,
                       UnresolvedReference::Cause why)>
        unresolved = {};
    // Once, when the Configurations present at start have all been delivered
    // or told unresolved: anything still unknown then is gone for good.
    std::function<void()> synced = {};
    // Once, when the Configurations themselves were first listed (by the
    // Kubernetes source; synced may wait longer, for the Secrets and
    // ConfigMaps they reference). Readiness: the API server lets us read them.
    std::function<void()> listed = {};
  };

  virtual ~ConfigurationSource() = default;
  // Throws std::runtime_error when the source cannot be followed at all.
  virtual void start() = 0;
  virtual void stop() = 0;  // idempotent; no event is delivered after it returns
  // The daemon refused this version of a Configuration, or cannot run it yet
  // (reason: one CamelCase word such as "Refused"; message: why). A source
  // whose users look elsewhere than dowserd's log tells them there: the
  // Kubernetes source posts a Warning Event on the object, once per version
  // and message, and again after the Event's TTL until problems_resolved.
  // Called on the daemon's core thread: does not block.
  virtual void report_problem(const Configuration& /*configuration*/, const std::string& /*reason*/,
                              const std::string& /*message*/) {}
  // The problems reported on this version so far no longer stand: its
  // handler took it (discovery started, or runs on with it), or has just
  // judged it anew (a refusal follows). The Kubernetes source stops posting
  // their Events again. Called on the core thread: does not block.
  virtual void problems_resolved(const Configuration& /*configuration*/) {}
};

// Watches a directory of manifests (*.yaml, *.yml, *.json; other files and
// hidden/editor temporary files ignored). Events of the first scan are
// delivered on the caller of start() (synced included), later ones on the
// source's own thread. A file that turns invalid keeps its last good
// Configurations; a definition already made by another file is refused
// (`invalid`) and takes over only when that other one goes. Discovery
// properties taken from Secrets or ConfigMaps are left unresolved: the
// daemon refuses those that are not optional.
// With owners_file, which file's definition is in effect for a name that
// several files define is kept there, so that a restart (which reads files
// in name order) keeps the same one.
class FileConfigurationSource : public ConfigurationSource {
 public:
  FileConfigurationSource(std::filesystem::path directory, Events events,
                          std::filesystem::path owners_file = {});
  ~FileConfigurationSource() override;  // stops
  FileConfigurationSource(const FileConfigurationSource&) = delete;
  FileConfigurationSource& operator=(const FileConfigurationSource&) = delete;

  // Reads the directory (delivering its Configurations before returning),
  // then follows changes with inotify until stop(). Throws std::runtime_error
  // when the directory cannot be read or watched.
  void start() override;
  void stop() override;

 private:
  struct Watcher;
  std::unique_ptr<Watcher> watcher_;
};

// The value of every discovery property: plain values stay, `valueFrom`
// references are looked up with find (nullopt: that Secret or ConfigMap, or
// that key in it, does not exist; UnreadableReference: it cannot be looked
// up at all, and why). A missing or unreadable optional reference drops the
// property; a required one throws UnresolvedReference (source
// "<namespace>/<name>", the reference's field path, a reason naming the
// property, the object and the key, and why, never a value). References are
// kept, so a changed value makes same_discovery() false.
enum class ReferenceKind { secret, config_map };
using ReferenceLookup =
    std::function<std::optional<std::string>(ReferenceKind, const KeyReference&)>;
Configuration resolve_references(const Configuration& configuration, const ReferenceLookup& find);

// Configurations (configurations.akri.sh/v0) from the cluster, in one
// namespace or all (empty namespace_name), each checked by the same parser as
// files (parse_configuration_object). A bad object is reported through
// `invalid` and as a Warning Event on it (reason InvalidConfiguration), and
// skipped; its last good version keeps running. discoveryProperties taken
// from Secrets and ConfigMaps (watched in the same namespaces) are resolved
// before delivery; a change to one re-delivers the Configurations using it. A
// required one that is missing is reported through `unresolved` and as a
// Warning Event (reason UnresolvedProperty), and retried when it appears; so
// is one of a kind dowserd may not list (UnresolvedReference::Cause::awaiting_access).
// start() returns at once; `synced` follows the first complete listing, once
// no Configuration waits for a kind still being listed.
class KubeConfigurationSource : public ConfigurationSource {
 public:
  static constexpr std::chrono::minutes kDefaultEventRefresh{10};
  // Warning Events of problems that stand (an invalid object, a property
  // that does not resolve) are posted again about every event_refresh (3/4
  // to 5/4 of it, drawn each time, so that nodes spread their posts) once the
  // API server has dropped them (Events live an hour by default: --event-ttl).
  KubeConfigurationSource(kube::KubeClient& client, std::string namespace_name,
                          std::string reporting_node, Events events,
                          std::chrono::milliseconds event_refresh = kDefaultEventRefresh);
  ~KubeConfigurationSource() override;  // stops
  KubeConfigurationSource(const KubeConfigurationSource&) = delete;
  KubeConfigurationSource& operator=(const KubeConfigurationSource&) = delete;

  void start() override;
  void stop() override;
  void report_problem(const Configuration& configuration, const std::string& reason,
                      const std::string& message) override;
  void problems_resolved(const Configuration& configuration) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dowser::configuration
