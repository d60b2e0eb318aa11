// Camera credentials from discoveryProperties, in Akri's three formats plus
// a default (akri-behaviour.md section 7). Values are secrets: nothing here
// logs them, and errors name properties, never their values.
#ifndef DOWSER_HANDLERS_ONVIF_CREDENTIALS_HPP
#define DOWSER_HANDLERS_ONVIF_CREDENTIALS_HPP

#include <dowser/handler.hpp>

#include <map>
#include <optional>
#include <string>

namespace onvif {

struct Credential {
  std::string username;
  std::optional<std::string> password;
  friend bool operator==(const Credential&, const Credential&) = default;
};

class CredentialStore {
 public:
  // Reads, in this order (a later source overrides the same UUID):
  // device_credential_list, device_credential_ref_list, username_<id> /
  // password_<id> (with '_' in <id> read as '-'), username_default /
  // password_default. Throws dowser::InvalidArgument for malformed JSON.
  static CredentialStore from_properties(const dowser::Properties& properties);

  // The credential of a (lower-cased) device UUID, else the default one.
  std::optional<Credential> lookup(const std::string& uuid) const;
  bool empty() const { return by_uuid_.empty(); }

 private:
  std::map<std::string, Credential> by_uuid_;  // "default" holds the default
};

}  // namespace onvif

#endif  // DOWSER_HANDLERS_ONVIF_CREDENTIALS_HPP
