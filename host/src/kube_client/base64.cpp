#include <array>
#include <cstdint>

#include "kube_client.hpp"

namespace dowser::kube {
namespace {

constexpr int kInvalid = -1;
constexpr int kPadding = -2;

constexpr std::array<int, 256> make_decoding_table() {
  std::array<int, 256> table{};
  for (int& entry : table) entry = kInvalid;
  constexpr std::string_view alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < alphabet.size(); ++i) {
    table[static_cast<unsigned char>(alphabet[i])] = static_cast<int>(i);
  }
  table['='] = kPadding;
  return table;
}

constexpr std::array<int, 256> kDecoding = make_decoding_table();

}  // namespace

std::string decode_base64(std::string_view text) {
  std::string decoded;
  decoded.reserve(text.size() / 4 * 3);
  uint32_t bits = 0;
  int bit_count = 0;
  size_t padding = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte == ' ' || byte == '\n' || byte == '\r' || byte == '\t') continue;  // wrapped text
    const int value = kDecoding[byte];
    if (value == kPadding) {
      ++padding;
      continue;
    }
    if (value == kInvalid || padding > 0) {
      throw std::invalid_argument("not base64: unexpected character at offset " +
                                  std::to_string(i));
    }
    bits = (bits << 6) | static_cast<uint32_t>(value);
    bit_count += 6;
    if (bit_count >= 8) {
      bit_count -= 8;
      decoded.push_back(static_cast<char>((bits >> bit_count) & 0xFF));
    }
  }
  // One leftover sextet cannot encode a byte; padding never exceeds two.
  if (bit_count >= 6 || padding > 2) throw std::invalid_argument("not base64: truncated");
  return decoded;
}

}  // namespace dowser::kube
