// Configuration: Akri's `Configuration` (apiVersion akri.sh/v0) as dowser
// reads it, the parser with errors that name file, field path and reason, and
// the file source that watches a directory of manifests.
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

 private:
  std::string source_;
  std::string field_path_;
  std::string reason_;
};

// Parses every YAML document in text (documents separated by ---; empty ones
// are skipped). source names the text in errors (usually the file path).
// Throws ConfigurationError for the first problem found.
std::vector<Configuration> parse_configurations(std::string_view text, const std::string& source);

// Watches a directory of manifests (*.yaml, *.yml, *.json; other files and
// hidden/editor temporary files ignored). Events are delivered in order: those
// of the first scan on the caller of start(), later ones on the source's own
// thread; handlers must be quick (post elsewhere), must not throw and must not
// call stop(). Identity is (namespace, name): a file that turns invalid keeps
// its last good Configurations; a definition already made by another file is
// refused (`invalid`) and takes over only when that other one goes.
class FileConfigurationSource {
 public:
  struct Events {
    std::function<void(const Configuration&)> upserted;  // new, or changed in any field
    std::function<void(const std::string& namespace_name, const std::string& name)> removed;
    std::function<void(const ConfigurationError&)> invalid;
  };

  FileConfigurationSource(std::filesystem::path directory, Events events);
  ~FileConfigurationSource();  // stops
  FileConfigurationSource(const FileConfigurationSource&) = delete;
  FileConfigurationSource& operator=(const FileConfigurationSource&) = delete;

  // Reads the directory (delivering its Configurations before returning),
  // then follows changes with inotify until stop(). Throws std::runtime_error
  // when the directory cannot be read or watched.
  void start();
  void stop();  // idempotent; joins the thread

 private:
  struct Watcher;
  std::unique_ptr<Watcher> watcher_;
};

}  // namespace dowser::configuration
