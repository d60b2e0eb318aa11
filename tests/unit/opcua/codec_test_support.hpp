// Byte-vector helpers for the OPC UA codec tests.
#pragma once

#include "ua_binary.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>

namespace opcua::test {

// "01 00 be 01" (spaces and '|' ignored) -> bytes.
inline ua::Bytes hex(std::string_view text) {
  ua::Bytes bytes;
  std::string digits;
  for (char c : text)
    if (std::isxdigit(static_cast<unsigned char>(c))) digits += c;
  if (digits.size() % 2 != 0) throw std::invalid_argument("odd number of hex digits");
  for (size_t i = 0; i < digits.size(); i += 2)
    bytes.push_back(static_cast<uint8_t>(std::stoul(digits.substr(i, 2), nullptr, 16)));
  return bytes;
}

// The UTF-8 bytes of text, for string fields inside expected vectors.
inline ua::Bytes text_bytes(std::string_view text) { return ua::Bytes(text.begin(), text.end()); }

inline ua::Bytes concat(std::initializer_list<ua::Bytes> parts) {
  ua::Bytes all;
  for (const auto& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

// A message captured from node-opcua 2.186.4 (see vectors/README.md).
inline ua::Bytes vector_file(const std::string& name) {
  std::ifstream in(std::string(OPCUA_VECTORS_DIR) + "/" + name, std::ios::binary);
  if (!in) throw std::runtime_error("missing test vector " + name);
  return ua::Bytes(std::istreambuf_iterator<char>(in), {});
}

}  // namespace opcua::test
