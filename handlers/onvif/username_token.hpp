// WS-Security UsernameToken with PasswordDigest (OASIS UsernameToken
// Profile 1.0): digest = Base64(SHA-1(nonce + created + password)), with the
// nonce's raw bytes, sent Base64-encoded. OpenSSL does SHA-1 and Base64.
#ifndef DOWSER_HANDLERS_ONVIF_USERNAME_TOKEN_HPP
#define DOWSER_HANDLERS_ONVIF_USERNAME_TOKEN_HPP

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace onvif {

inline constexpr const char* kPasswordDigestType =
    "http://docs.oasis-open.org/wss/2004/01/"
    "oasis-200401-wss-username-token-profile-1.0#PasswordDigest";
inline constexpr const char* kBase64EncodingType =
    "http://docs.oasis-open.org/wss/2004/01/"
    "oasis-200401-wss-soap-message-security-1.0#Base64Binary";

struct UsernameToken {
  std::string username;
  std::string password_digest;  // Base64
  std::string nonce;            // Base64 of the raw nonce
  std::string created;          // as sent
};

std::string base64_encode(std::string_view bytes);
// nullopt when `text` is not valid Base64.
std::optional<std::string> base64_decode(std::string_view text);

std::string password_digest(std::string_view raw_nonce, std::string_view created,
                            std::string_view password);

// UTC with milliseconds: "2024-05-01T10:20:30.456Z".
std::string created_timestamp(std::chrono::system_clock::time_point when);

// A token with the given nonce bytes and creation time.
UsernameToken make_username_token(const std::string& username, std::string_view password,
                                  std::string_view raw_nonce, const std::string& created);
// A token with 16 random nonce bytes, created at `now`.
UsernameToken fresh_username_token(const std::string& username, std::string_view password,
                                   std::chrono::system_clock::time_point now);

}  // namespace onvif

#endif  // DOWSER_HANDLERS_ONVIF_USERNAME_TOKEN_HPP
