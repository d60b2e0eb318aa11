#include "username_token.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <array>
#include <ctime>
#include <stdexcept>
#include <vector>

namespace onvif {

std::string base64_encode(std::string_view bytes) {
  std::string text(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(text.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  text.resize(static_cast<size_t>(written));
  return text;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string bytes(3 * (text.size() / 4) + 1, '\0');
  int written = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(bytes.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (written < 0) return std::nullopt;
  bytes.resize(static_cast<size_t>(written));
  // EVP_DecodeBlock counts padding as zero bytes: drop what '=' stood for.
  for (size_t i = text.size(); i > 0 && text[i - 1] == '='; --i) bytes.pop_back();
  return bytes;
}

std::string password_digest(std::string_view raw_nonce, std::string_view created,
                            std::string_view password) {
  std::string input;
  input.reserve(raw_nonce.size() + created.size() + password.size());
  input.append(raw_nonce).append(created).append(password);
  std::array<unsigned char, SHA_DIGEST_LENGTH> digest{};
  SHA1(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest.data());
  return base64_encode(
      std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

std::string created_timestamp(std::chrono::system_clock::time_point when) {
  auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch());
  std::time_t seconds = static_cast<std::time_t>(millis.count() / 1000);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  std::array<char, 40> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%S", &utc);
  std::array<char, 8> fraction{};
  std::snprintf(fraction.data(), fraction.size(), ".%03dZ",
                static_cast<int>(millis.count() % 1000));
  return std::string(text.data()) + fraction.data();
}

UsernameToken make_username_token(const std::string& username, std::string_view password,
                                  std::string_view raw_nonce, const std::string& created) {
  return {username, password_digest(raw_nonce, created, password), base64_encode(raw_nonce),
          created};
}

UsernameToken fresh_username_token(const std::string& username, std::string_view password,
                                   std::chrono::system_clock::time_point now) {
  std::array<unsigned char, 16> nonce{};
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1)
    throw std::runtime_error("no random bytes for a WS-Security nonce");
  return make_username_token(
      username, password,
      std::string_view(reinterpret_cast<const char*>(nonce.data()), nonce.size()),
      created_timestamp(now));
}

}  // namespace onvif
