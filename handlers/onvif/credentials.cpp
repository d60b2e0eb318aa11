#include "credentials.hpp"

#include "username_token.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <vector>

namespace onvif {
namespace {

using Json = nlohmann::json;

constexpr const char* kCredentialList = "device_credential_list";
constexpr const char* kCredentialRefList = "device_credential_ref_list";
constexpr std::string_view kUsernamePrefix = "username_";
constexpr std::string_view kPasswordPrefix = "password_";

const std::string* value_of(const dowser::Properties& properties, const std::string& name) {
  auto it = properties.find(name);
  return it != properties.end() && it->second ? &*it->second : nullptr;
}

// Parses a property as JSON; the message names the property, not its value.
Json json_property(const dowser::Properties& properties, const std::string& name,
                   bool (Json::*is_kind)() const noexcept, const char* kind) {
  const std::string* text = value_of(properties, name);
  if (text == nullptr)
    throw dowser::InvalidArgument("discovery property '" + name + "' has no value");
  Json json = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!(json.*is_kind)())
    throw dowser::InvalidArgument("discovery property '" + name + "' is not a JSON " + kind);
  return json;
}

std::vector<std::string> listed_names(const dowser::Properties& properties, const char* list) {
  std::vector<std::string> names;
  if (properties.find(list) == properties.end()) return names;
  Json array = json_property(properties, list, &Json::is_array, "array of property names");
  for (const auto& name : array) {
    if (!name.is_string())
      throw dowser::InvalidArgument(std::string("discovery property '") + list +
                                    "' must list property names (strings)");
    names.push_back(name.get<std::string>());
  }
  return names;
}

std::optional<std::string> string_member(const Json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

dowser::InvalidArgument missing_username(const std::string& property, const std::string& uuid) {
  std::string message = "discovery property '";
  message.append(property).append("': entry '").append(uuid).append("' has no username");
  return dowser::InvalidArgument(message);
}

// {"<uuid>": {"username": ..., "password": ..., "base64encoded": bool}}
void read_credential_list(const dowser::Properties& properties,
                          std::map<std::string, Credential>& into) {
  for (const auto& name : listed_names(properties, kCredentialList)) {
    Json entries = json_property(properties, name, &Json::is_object, "object keyed by UUID");
    for (const auto& [uuid, entry] : entries.items()) {
      auto username = entry.is_object() ? string_member(entry, "username") : std::nullopt;
      if (!username) throw missing_username(name, uuid);
      Credential credential{*username, string_member(entry, "password")};
      auto encoded = entry.find("base64encoded");
      if (credential.password && encoded != entry.end() && encoded->is_boolean() &&
          encoded->get<bool>())
        credential.password = base64_decode(*credential.password);
      into[uuid] = credential;
    }
  }
}

// {"<uuid>": {"username_ref": "<property>", "password_ref": "<property>"}}
void read_credential_ref_list(const dowser::Properties& properties,
                              std::map<std::string, Credential>& into) {
  for (const auto& name : listed_names(properties, kCredentialRefList)) {
    Json entries = json_property(properties, name, &Json::is_object, "object keyed by UUID");
    for (const auto& [uuid, entry] : entries.items()) {
      if (!entry.is_object()) continue;
      auto username_ref = string_member(entry, "username_ref");
      const std::string* username = username_ref ? value_of(properties, *username_ref) : nullptr;
      if (username == nullptr || username->empty()) continue;
      Credential credential{*username, std::nullopt};
      if (auto password_ref = string_member(entry, "password_ref"))
        if (const std::string* password = value_of(properties, *password_ref))
          credential.password = *password;
      into[uuid] = credential;
    }
  }
}

// username_<id> / password_<id>; username_default is the default.
void read_username_entries(const dowser::Properties& properties,
                           std::map<std::string, Credential>& into) {
  for (const auto& [key, value] : properties) {
    if (!value || key.rfind(kUsernamePrefix, 0) != 0) continue;
    std::string id = key.substr(kUsernamePrefix.size());
    const std::string* password = value_of(properties, std::string(kPasswordPrefix) + id);
    if (id != "default") std::replace(id.begin(), id.end(), '_', '-');
    into[id] = Credential{*value, password ? std::optional<std::string>(*password) : std::nullopt};
  }
}

}  // namespace

CredentialStore CredentialStore::from_properties(const dowser::Properties& properties) {
  CredentialStore store;
  read_credential_list(properties, store.by_uuid_);
  read_credential_ref_list(properties, store.by_uuid_);
  read_username_entries(properties, store.by_uuid_);
  return store;
}

std::optional<Credential> CredentialStore::lookup(const std::string& uuid) const {
  if (auto it = by_uuid_.find(uuid); it != by_uuid_.end()) return it->second;
  if (auto it = by_uuid_.find("default"); it != by_uuid_.end()) return it->second;
  return std::nullopt;
}

}  // namespace onvif
