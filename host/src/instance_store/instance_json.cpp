#include "instance_json.hpp"

#include <limits>
#include <nlohmann/json.hpp>

namespace dowser::store::detail {
namespace {

using nlohmann::json;

constexpr const char* kApiVersion = "akri.sh/v0";
constexpr const char* kKind = "Instance";

[[noreturn]] void fail(const std::string& field, const std::string& reason) {
  throw InstanceFormatError(field + ": " + reason);
}

// Reads the members of one JSON object; every error names the member's path.
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string path) : object_(object), path_(std::move(path)) {
    if (!object_.is_object()) fail(path_.empty() ? "document" : path_, "expected an object");
  }

  ObjectReader object(const char* key) const { return ObjectReader(required(key), member(key)); }

  std::string string(const char* key) const { return as_string(required(key), member(key)); }

  uint64_t unsigned_integer(const char* key, uint64_t max) const {
    const json& value = required(key);
    if (!value.is_number_unsigned() || value.get<uint64_t>() > max) {
      fail(member(key), "expected an integer from 0 to " + std::to_string(max));
    }
    return value.get<uint64_t>();
  }

  // Optional members follow Akri's defaults: absent or null reads as empty/false.
  bool boolean_or_false(const char* key) const {
    const json* value = optional(key);
    if (value == nullptr) return false;
    if (!value->is_boolean()) fail(member(key), "expected true or false");
    return value->get<bool>();
  }

  std::map<std::string, std::string> string_map_or_empty(const char* key) const {
    std::map<std::string, std::string> result;
    if (const json* value = optional(key)) {
      const ObjectReader map(*value, member(key));
      for (const auto& [entry_key, entry_value] : value->items()) {
        result.emplace(entry_key, as_string(entry_value, map.member(entry_key.c_str())));
      }
    }
    return result;
  }

  std::set<std::string> string_set_or_empty(const char* key) const {
    std::set<std::string> result;
    if (const json* value = optional(key)) {
      if (!value->is_array()) fail(member(key), "expected a list of strings");
      for (size_t i = 0; i < value->size(); ++i) {
        result.insert(as_string((*value)[i], member(key) + "[" + std::to_string(i) + "]"));
      }
    }
    return result;
  }

 private:
  static std::string as_string(const json& value, const std::string& path) {
    if (!value.is_string()) fail(path, "expected a string");
    return value.get<std::string>();
  }
  std::string member(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  const json* optional(const char* key) const {
    const auto found = object_.find(key);
    return found == object_.end() || found->is_null() ? nullptr : &*found;
  }
  const json& required(const char* key) const {
    const json* value = optional(key);
    if (value == nullptr) fail(member(key), "missing");
    return *value;
  }

  const json& object_;
  std::string path_;
};

void require_value(const ObjectReader& reader, const char* key, const char* expected) {
  if (reader.string(key) != expected) fail(key, std::string("expected \"") + expected + "\"");
}

// Every slot of an Instance is held in memory (and each plugin lists them
// all), so a capacity no Configuration can have is refused on reading: one
// Instance saying 2000000000 must not run the daemon out of memory. The same
// bound as Configurations' spec.capacity.
constexpr uint64_t kMaxCapacity = 1'000'000;

Instance read_instance(const ObjectReader& document) {
  const ObjectReader metadata = document.object("metadata");
  const ObjectReader spec = document.object("spec");
  Instance instance;
  instance.namespace_name = metadata.string("namespace");
  instance.name = metadata.string("name");
  instance.configuration_name = spec.string("configurationName");
  instance.cdi_name = spec.string("cdiName");
  instance.capacity = static_cast<uint32_t>(spec.unsigned_integer("capacity", kMaxCapacity));
  instance.broker_properties = spec.string_map_or_empty("brokerProperties");
  instance.shared = spec.boolean_or_false("shared");
  instance.nodes = spec.string_set_or_empty("nodes");
  instance.device_usage = spec.string_map_or_empty("deviceUsage");
  return instance;
}

}  // namespace

json to_akri_object(const Instance& instance) {
  return {{"apiVersion", kApiVersion},
          {"kind", kKind},
          {"metadata", {{"name", instance.name}, {"namespace", instance.namespace_name}}},
          {"spec",
           {{"configurationName", instance.configuration_name},
            {"cdiName", instance.cdi_name},
            {"capacity", instance.capacity},
            {"brokerProperties", instance.broker_properties},
            {"shared", instance.shared},
            {"nodes", instance.nodes},
            {"deviceUsage", instance.device_usage}}}};
}

Instance from_akri_object(const json& object) { return read_instance(ObjectReader(object, "")); }

std::string to_json_text(const StoredInstance& stored) {
  const Instance& instance = stored.instance;
  json document = to_akri_object(instance);
  document["revision"] = stored.revision;
  try {
    return document.dump(2) + "\n";
  } catch (const json::type_error& error) {
    throw InstanceFormatError(std::string("Instance ") + instance.namespace_name + "/" +
                              instance.name + " cannot be stored: " + error.what());
  }
}

StoredInstance from_json_text(std::string_view text) {
  json document;
  try {
    document = json::parse(text);
  } catch (const json::parse_error& error) {
    throw InstanceFormatError(std::string("not JSON: ") + error.what());
  }
  const ObjectReader reader(document, "");
  require_value(reader, "apiVersion", kApiVersion);
  require_value(reader, "kind", kKind);
  StoredInstance stored;
  stored.instance = read_instance(reader);
  stored.revision = reader.unsigned_integer("revision", kMaxRevision);
  return stored;
}

}  // namespace dowser::store::detail
