// The Configuration parser: Akri's `Configuration` manifest, checked field by
// field so that every problem is reported with its source, field path and reason.
#include "configuration.hpp"

#include "device_rules.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <utility>

namespace dowser::configuration {
namespace {

constexpr std::string_view kApiVersion = "akri.sh/v0";
constexpr std::string_view kKind = "Configuration";
// Instance names are `<name>-<6 hex>` and must stay valid 63-character
// extended-resource name parts.
constexpr std::size_t kMaxNameLength = 56;
constexpr std::size_t kMaxLabelLength = 63;
constexpr int64_t kMaxCapacity = 1'000'000;
// Kubernetes integer fields are int32; this also keeps deadlines computed
// from the grace period far from clock overflow.
constexpr int64_t kMaxGraceSeconds = 2'147'483'647;

// Where the document being parsed came from; every error goes through here.
class ErrorContext {
 public:
  ErrorContext(const std::string& source, std::string document_note)
      : source_(source), document_note_(std::move(document_note)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& reason) const {
    throw ConfigurationError(source_, path, reason + document_note_);
  }

 private:
  const std::string& source_;
  std::string document_note_;  // " (document N)" when the text holds several
};

std::string child_path(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

std::string item_path(const std::string& parent, std::size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

bool present(const YAML::Node& node) { return node.IsDefined() && !node.IsNull(); }

const char* describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    default:
      return "null";
  }
}

// Quoted scalars carry the tag "!", plain ones "?": `capacity: "3"` is a
// string, not a number.
bool is_plain_scalar(const YAML::Node& node) { return node.IsScalar() && node.Tag() == "?"; }

// The entries of one YAML mapping, refused when a key repeats. take() records
// which keys the caller knows, so that the others can be refused as unknown.
class Fields {
 public:
  Fields(const YAML::Node& node, std::string path, const ErrorContext& errors)
      : path_(std::move(path)), errors_(errors) {
    if (!node.IsMap())
      errors_.fail(path_.empty() ? "(document)" : path_,
                   std::string("must be a mapping, not ") + describe(node));
    for (const auto& entry : node) {
      if (!entry.first.IsScalar()) errors_.fail(path_, "keys must be strings");
      const std::string& key = entry.first.Scalar();
      if (find(key) != nullptr) errors_.fail(path_of(key), "appears twice");
      entries_.emplace_back(key, entry.second);
    }
  }

  // The value of key; a null Node when absent.
  YAML::Node take(std::string_view key) {
    known_.emplace(key);
    const YAML::Node* value = find(key);
    return value != nullptr ? *value : YAML::Node();
  }

  YAML::Node take_required(std::string_view key) {
    YAML::Node value = take(key);
    if (!present(value)) errors_.fail(path_of(key), "is required");
    return value;
  }

  // Typos must not pass silently.
  void refuse_unknown() const {
    for (const auto& [key, value] : entries_) {
      if (known_.count(key) == 0) errors_.fail(path_of(key), "unknown field; " + known_list());
    }
  }

  std::string path_of(std::string_view key) const { return child_path(path_, key); }
  const ErrorContext& errors() const { return errors_; }

 private:
  const YAML::Node* find(std::string_view key) const {
    for (const auto& entry : entries_)
      if (entry.first == key) return &entry.second;
    return nullptr;
  }

  std::string known_list() const {
    std::string text = "expected one of:";
    for (const auto& key : known_) text += " " + key;
    return text;
  }

  std::vector<std::pair<std::string, YAML::Node>> entries_;
  std::set<std::string, std::less<>> known_;
  std::string path_;
  const ErrorContext& errors_;
};

// ---- scalars ---------------------------------------------------------------

// Any scalar as its text: YAML users write `WIDTH: 800` for a string "800".
std::string text_of(const YAML::Node& node, const std::string& path, const ErrorContext& errors) {
  if (!node.IsScalar()) errors.fail(path, std::string("must be a string, not ") + describe(node));
  return node.Scalar();
}

std::string required_text(Fields& fields, std::string_view key) {
  std::string text = text_of(fields.take_required(key), fields.path_of(key), fields.errors());
  if (text.empty()) fields.errors().fail(fields.path_of(key), "must not be empty");
  return text;
}

std::optional<int64_t> parse_decimal(const std::string& text) {
  int64_t value = 0;
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (begin != end && *begin == '+') ++begin;
  auto [stop, error] = std::from_chars(begin, end, value);
  if (error != std::errc() || stop != end || begin == end) return std::nullopt;
  return value;
}

int64_t integer_in_range(const YAML::Node& node, const std::string& path, int64_t min, int64_t max,
                         const ErrorContext& errors) {
  std::optional<int64_t> value;
  if (is_plain_scalar(node)) value = parse_decimal(node.Scalar());
  if (!value || *value < min || *value > max) {
    errors.fail(path,
                "must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return *value;
}

// YAML 1.2 core schema booleans only (not yes/no/on/off).
bool boolean(const YAML::Node& node, const std::string& path, const ErrorContext& errors) {
  static const std::set<std::string, std::less<>> truths{"true", "True", "TRUE"};
  static const std::set<std::string, std::less<>> falsehoods{"false", "False", "FALSE"};
  if (is_plain_scalar(node)) {
    if (truths.count(node.Scalar()) != 0) return true;
    if (falsehoods.count(node.Scalar()) != 0) return false;
  }
  errors.fail(path, "must be true or false");
}

// ---- names -----------------------------------------------------------------

bool is_lower_alphanumeric(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// RFC 1123 label: lowercase alphanumerics and '-', starting and ending alphanumeric.
bool is_dns_label(std::string_view text) {
  if (text.empty() || text.size() > kMaxLabelLength) return false;
  if (!is_lower_alphanumeric(text.front()) || !is_lower_alphanumeric(text.back())) return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return is_lower_alphanumeric(c) || c == '-'; });
}

// RFC 1123 subdomain: labels separated by '.'.
bool is_dns_subdomain(std::string_view text) {
  while (true) {
    std::size_t dot = text.find('.');
    if (!is_dns_label(text.substr(0, dot))) return false;
    if (dot == std::string_view::npos) return true;
    text.remove_prefix(dot + 1);
  }
}

// A name whose first character is a letter or one of `punctuation`, and the
// rest also digits.
bool is_name_of(std::string_view text, std::string_view punctuation) {
  auto is_start = [&](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           punctuation.find(c) != std::string_view::npos;
  };
  auto is_rest = [&](char c) { return is_start(c) || (c >= '0' && c <= '9'); };
  return !text.empty() && is_start(text.front()) &&
         std::all_of(text.begin() + 1, text.end(), is_rest);
}

bool is_c_identifier(std::string_view text) { return is_name_of(text, "_"); }

void check_namespace(const std::string& value, const std::string& path,
                     const ErrorContext& errors) {
  if (auto problem = namespace_name_problem(value); !problem.empty()) errors.fail(path, problem);
}

// ---- metadata --------------------------------------------------------------

// Labels, annotations, uid and the like are accepted and ignored.
void parse_metadata(const YAML::Node& node, Configuration& out, const ErrorContext& errors) {
  if (!present(node)) errors.fail("metadata.name", "is required");
  Fields metadata(node, "metadata", errors);
  out.name = required_text(metadata, "name");
  if (auto problem = configuration_name_problem(out.name); !problem.empty())
    errors.fail("metadata.name", problem);
  YAML::Node namespace_node = metadata.take("namespace");
  if (present(namespace_node)) {
    out.namespace_name = text_of(namespace_node, "metadata.namespace", errors);
    check_namespace(out.namespace_name, "metadata.namespace", errors);
  }
  // Exported while being deleted (held by a finalizer): served, it would
  // come back to life. (The cluster source drops such objects before this.)
  if (present(metadata.take("deletionTimestamp"))) {
    errors.fail("metadata.deletionTimestamp",
                "the object was being deleted when it was exported; remove the file (or this "
                "field, to keep the Configuration)");
  }
}

// ---- discoveryHandler ------------------------------------------------------

KeyReference parse_key_reference(const YAML::Node& node, const std::string& path,
                                 const ErrorContext& errors) {
  Fields fields(node, path, errors);
  KeyReference reference;
  reference.name = required_text(fields, "name");
  reference.key = required_text(fields, "key");
  YAML::Node namespace_node = fields.take("namespace");
  if (present(namespace_node)) {
    reference.namespace_name = text_of(namespace_node, fields.path_of("namespace"), errors);
    check_namespace(reference.namespace_name, fields.path_of("namespace"), errors);
  }
  YAML::Node optional_node = fields.take("optional");
  if (present(optional_node))
    reference.optional = boolean(optional_node, fields.path_of("optional"), errors);
  fields.refuse_unknown();
  return reference;
}

void parse_value_from(const YAML::Node& node, const std::string& path, DiscoveryProperty& out,
                      const ErrorContext& errors) {
  Fields fields(node, path, errors);
  YAML::Node secret = fields.take("secretKeyRef");
  YAML::Node config_map = fields.take("configMapKeyRef");
  fields.refuse_unknown();
  if (present(secret) == present(config_map))
    errors.fail(path, "must have exactly one of secretKeyRef or configMapKeyRef");
  if (present(secret))
    out.secret_key_ref = parse_key_reference(secret, fields.path_of("secretKeyRef"), errors);
  else
    out.config_map_key_ref =
        parse_key_reference(config_map, fields.path_of("configMapKeyRef"), errors);
}

DiscoveryProperty parse_discovery_property(const YAML::Node& node, const std::string& path,
                                           const ErrorContext& errors) {
  Fields fields(node, path, errors);
  DiscoveryProperty property;
  property.name = required_text(fields, "name");
  if (!is_c_identifier(property.name))
    errors.fail(fields.path_of("name"), "must match ^[_A-Za-z][_A-Za-z0-9]*$");
  YAML::Node value = fields.take("value");
  if (present(value)) property.value = text_of(value, fields.path_of("value"), errors);
  YAML::Node value_from = fields.take("valueFrom");
  if (present(value_from))
    parse_value_from(value_from, fields.path_of("valueFrom"), property, errors);
  fields.refuse_unknown();
  return property;
}

std::vector<DiscoveryProperty> parse_discovery_properties(const YAML::Node& node,
                                                          const std::string& path,
                                                          const ErrorContext& errors) {
  std::vector<DiscoveryProperty> properties;
  if (!present(node)) return properties;
  if (!node.IsSequence()) errors.fail(path, std::string("must be a list, not ") + describe(node));
  for (std::size_t i = 0; i < node.size(); ++i) {
    DiscoveryProperty property = parse_discovery_property(node[i], item_path(path, i), errors);
    for (std::size_t j = 0; j < properties.size(); ++j) {
      if (properties[j].name == property.name) {
        errors.fail(item_path(path, i) + ".name", "duplicate property name " + property.name +
                                                      " (also at [" + std::to_string(j) + "])");
      }
    }
    properties.push_back(std::move(property));
  }
  return properties;
}

void parse_discovery_handler(const YAML::Node& node, Configuration& out,
                             const ErrorContext& errors) {
  Fields fields(node, "spec.discoveryHandler", errors);
  out.handler_name = required_text(fields, "name");
  YAML::Node details = fields.take("discoveryDetails");
  if (present(details)) {
    if (!details.IsScalar()) {
      errors.fail(fields.path_of("discoveryDetails"),
                  std::string("must be a string (write it as a YAML block with |), not ") +
                      describe(details));
    }
    out.discovery_details = details.Scalar();
  }
  out.discovery_properties = parse_discovery_properties(
      fields.take("discoveryProperties"), fields.path_of("discoveryProperties"), errors);
  fields.refuse_unknown();
}

// ---- the rest of spec ------------------------------------------------------

std::string yaml_text(const YAML::Node& node) {
  YAML::Emitter out;
  out << node;
  return out.c_str();
}

// Kept as text: dowser does not deploy brokers, but a later controller may.
std::string opaque_mapping(const YAML::Node& node, const std::string& path,
                           const ErrorContext& errors) {
  if (!present(node)) return "";
  if (!node.IsMap()) errors.fail(path, std::string("must be a mapping, not ") + describe(node));
  return yaml_text(node);
}

// Akri panics on both; we refuse cleanly.
std::string parse_broker_spec(const YAML::Node& node, const ErrorContext& errors) {
  if (!present(node)) return "";
  const std::string path = "spec.brokerSpec";
  Fields fields(node, path, errors);
  YAML::Node pod = fields.take("brokerPodSpec");
  YAML::Node job = fields.take("brokerJobSpec");
  fields.refuse_unknown();
  if (present(pod) == present(job))
    errors.fail(path, "must have exactly one of brokerPodSpec or brokerJobSpec");
  if (present(pod)) opaque_mapping(pod, fields.path_of("brokerPodSpec"), errors);
  if (present(job)) opaque_mapping(job, fields.path_of("brokerJobSpec"), errors);
  return yaml_text(node);
}

std::map<std::string, std::string> parse_broker_properties(const YAML::Node& node,
                                                           const ErrorContext& errors) {
  std::map<std::string, std::string> properties;
  if (!present(node)) return properties;
  const std::string path = "spec.brokerProperties";
  if (!node.IsMap()) errors.fail(path, std::string("must be a mapping, not ") + describe(node));
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) errors.fail(path, "keys must be strings");
    const std::string& key = entry.first.Scalar();
    // What brokerProperties become in every Allocate answer, as device
    // properties do: the same rule.
    if (!host::is_environment_variable_name(key)) {
      errors.fail(path, "'" + key +
                            "' is not an environment variable name (^[-._a-zA-Z][-._a-zA-Z0-9]*$): "
                            "containers get each property as one");
    }
    std::string value = text_of(entry.second, child_path(path, key), errors);
    if (!properties.emplace(key, std::move(value)).second)
      errors.fail(child_path(path, key), "appears twice");
  }
  return properties;
}

UniqueInstances parse_unique_instances(const YAML::Node& node, const ErrorContext& errors) {
  const std::string path = "spec.uniqueInstances";
  std::string text = text_of(node, path, errors);
  if (text == "Required") return UniqueInstances::required;
  if (text == "Preferred") return UniqueInstances::preferred;
  errors.fail(path, "must be Required or Preferred");
}

void parse_spec(const YAML::Node& node, Configuration& out, const ErrorContext& errors) {
  if (!present(node)) errors.fail("spec", "is required");
  Fields spec(node, "spec", errors);
  parse_discovery_handler(spec.take_required("discoveryHandler"), out, errors);
  if (YAML::Node capacity = spec.take("capacity"); present(capacity)) {
    out.capacity =
        static_cast<uint32_t>(integer_in_range(capacity, "spec.capacity", 1, kMaxCapacity, errors));
  }
  out.broker_properties = parse_broker_properties(spec.take("brokerProperties"), errors);
  out.broker_spec = parse_broker_spec(spec.take("brokerSpec"), errors);
  out.instance_service_spec =
      opaque_mapping(spec.take("instanceServiceSpec"), "spec.instanceServiceSpec", errors);
  out.configuration_service_spec = opaque_mapping(spec.take("configurationServiceSpec"),
                                                  "spec.configurationServiceSpec", errors);
  if (YAML::Node unique = spec.take("uniqueInstances"); present(unique))
    out.unique_instances = parse_unique_instances(unique, errors);
  if (YAML::Node grace = spec.take("sharedOfflineGraceSeconds"); present(grace)) {
    out.shared_offline_grace = std::chrono::seconds(
        integer_in_range(grace, "spec.sharedOfflineGraceSeconds", 0, kMaxGraceSeconds, errors));
  }
  spec.refuse_unknown();
}

// ---- documents -------------------------------------------------------------

void check_type(Fields& document, const ErrorContext& errors) {
  YAML::Node kind = document.take("kind");
  // What `kubectl get akric -o yaml` prints for several objects.
  if (present(kind) && kind.IsScalar() && kind.Scalar() == "List") {
    errors.fail("kind",
                "is List (kubectl get -o yaml of several objects); write each Configuration as a "
                "document of its own (separated by ---) or a file of its own, e.g. kubectl get "
                "akric -n NAMESPACE NAME -o yaml");
  }
  YAML::Node api_version = document.take("apiVersion");
  if (!present(api_version) || text_of(api_version, "apiVersion", errors) != kApiVersion)
    errors.fail("apiVersion", "must be akri.sh/v0");
  if (!present(kind) || text_of(kind, "kind", errors) != kKind)
    errors.fail("kind", "must be Configuration");
}

// Top-level fields other than these (status, ...) are ignored.
Configuration parse_document(const YAML::Node& node, const ErrorContext& errors) {
  Fields document(node, "", errors);
  check_type(document, errors);
  Configuration configuration;
  parse_metadata(document.take("metadata"), configuration, errors);
  parse_spec(document.take("spec"), configuration, errors);
  return configuration;
}

std::vector<YAML::Node> load_documents(std::string_view text, const std::string& source) {
  try {
    return YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    std::string reason = "invalid YAML";
    if (!e.mark.is_null()) {
      reason += " at line " + std::to_string(e.mark.line + 1) + ", column " +
                std::to_string(e.mark.column + 1);
    }
    throw ConfigurationError(source, "(document)", reason + ": " + e.msg);
  }
}

std::string document_note(std::size_t index, std::size_t count) {
  return count > 1 ? " (document " + std::to_string(index + 1) + ")" : "";
}

}  // namespace

ConfigurationError::ConfigurationError(std::string source, std::string field_path,
                                       std::string reason)
    : std::runtime_error(source + ": " + field_path + ": " + reason),
      source_(std::move(source)),
      field_path_(std::move(field_path)),
      reason_(std::move(reason)) {}

bool Configuration::same_discovery(const Configuration& other) const {
  return handler_name == other.handler_name && discovery_details == other.discovery_details &&
         discovery_properties == other.discovery_properties;
}

std::vector<Configuration> parse_configurations(std::string_view text, const std::string& source) {
  std::vector<YAML::Node> documents = load_documents(text, source);
  std::vector<Configuration> configurations;
  std::map<std::pair<std::string, std::string>, std::size_t> document_of;  // identity -> index
  for (std::size_t i = 0; i < documents.size(); ++i) {
    if (!present(documents[i])) continue;
    ErrorContext errors(source, document_note(i, documents.size()));
    try {
      configurations.push_back(parse_document(documents[i], errors));
    } catch (const YAML::Exception& e) {  // defensive: yaml-cpp node access
      errors.fail("(document)", e.what());
    }
    const Configuration& added = configurations.back();
    auto [previous, inserted] = document_of.emplace(std::pair(added.namespace_name, added.name), i);
    if (!inserted) {
      errors.fail("metadata.name", added.namespace_name + "/" + added.name +
                                       " is already defined in document " +
                                       std::to_string(previous->second + 1));
    }
  }
  return configurations;
}

std::string namespace_name_problem(std::string_view name) {
  if (is_dns_label(name)) return "";
  return "must be a DNS-1123 label (at most 63 lowercase letters, digits and '-', starting and "
         "ending with a letter or digit)";
}

std::string configuration_name_problem(std::string_view name) {
  // The length first: a longer name may well be a subdomain (labels of 63).
  if (name.size() > kMaxNameLength) {
    return "must be at most 56 characters (it has " + std::to_string(name.size()) +
           "), so that Instance names <name>-<6 hex digits> stay valid 63-character resource "
           "names";
  }
  if (!is_dns_subdomain(name)) {
    return "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and "
           "ending with a letter or digit)";
  }
  return "";
}

Configuration parse_configuration_object(std::string_view json_text, const std::string& source) {
  std::vector<Configuration> parsed = parse_configurations(json_text, source);
  if (parsed.size() != 1)
    throw ConfigurationError(source, "(document)", "must be exactly one Configuration object");
  return std::move(parsed.front());
}

// ---- discovery properties from Secrets and ConfigMaps ----------------------------

namespace {

std::string reference_path(std::size_t index, ReferenceKind kind) {
  return item_path("spec.discoveryHandler.discoveryProperties", index) + ".valueFrom." +
         (kind == ReferenceKind::secret ? "secretKeyRef" : "configMapKeyRef");
}

const char* kind_name(ReferenceKind kind) {
  return kind == ReferenceKind::secret ? "Secret" : "ConfigMap";
}

// "discovery property P needs key K of Secret N/S": what a reason is about.
std::string needed_value(const std::string& property, ReferenceKind kind,
                         const KeyReference& reference) {
  return "discovery property " + property + " needs key " + reference.key + " of " +
         kind_name(kind) + " " + reference.namespace_name + "/" + reference.name;
}

}  // namespace

Configuration resolve_references(const Configuration& configuration, const ReferenceLookup& find) {
  Configuration resolved = configuration;
  resolved.discovery_properties.clear();
  const auto& properties = configuration.discovery_properties;
  for (std::size_t i = 0; i < properties.size(); ++i) {
    DiscoveryProperty property = properties[i];
    const auto& reference =
        property.secret_key_ref ? property.secret_key_ref : property.config_map_key_ref;
    if (property.value || !reference) {
      resolved.discovery_properties.push_back(std::move(property));
      continue;
    }
    const ReferenceKind kind =
        property.secret_key_ref ? ReferenceKind::secret : ReferenceKind::config_map;
    std::string problem;
    auto cause = UnresolvedReference::Cause::value_missing;
    try {
      property.value = find(kind, *reference);
      problem =
          std::string("no such ") + kind_name(kind) + ", or no such key in it; waiting for it";
    } catch (const UnreadableReference& unreadable) {
      problem = unreadable.what();
      cause = unreadable.cause();
    }
    if (property.value) {
      resolved.discovery_properties.push_back(std::move(property));
    } else if (!reference->optional) {
      throw UnresolvedReference(
          configuration.namespace_name + "/" + configuration.name, reference_path(i, kind),
          needed_value(property.name, kind, *reference) + ": " + problem, cause);
    }
  }
  return resolved;
}

}  // namespace dowser::configuration
