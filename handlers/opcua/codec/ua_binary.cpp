#include "ua_binary.hpp"

namespace opcua::ua {
namespace {

// NodeId encoding bytes (Part 6, Table 6); the top two bits are the
// ExpandedNodeId flags.
constexpr uint8_t kTwoByteNodeId = 0x00;
constexpr uint8_t kFourByteNodeId = 0x01;
constexpr uint8_t kNumericNodeId = 0x02;
constexpr uint8_t kStringNodeId = 0x03;
constexpr uint8_t kGuidNodeId = 0x04;
constexpr uint8_t kByteStringNodeId = 0x05;
constexpr uint8_t kNamespaceUriFlag = 0x80;
constexpr uint8_t kServerIndexFlag = 0x40;

// LocalizedText mask bits (Part 6, 5.2.2.14).
constexpr uint8_t kHasLocale = 0x01;
constexpr uint8_t kHasText = 0x02;

// DiagnosticInfo mask bits (Part 6, 5.2.2.12), in encoding order below.
constexpr uint8_t kHasSymbolicId = 0x01;
constexpr uint8_t kHasNamespaceUri = 0x02;
constexpr uint8_t kHasLocalizedText = 0x04;
constexpr uint8_t kHasDiagnosticLocale = 0x08;
constexpr uint8_t kHasAdditionalInfo = 0x10;
constexpr uint8_t kHasInnerStatusCode = 0x20;
constexpr uint8_t kHasInnerDiagnosticInfo = 0x40;

// ExtensionObject body encodings (Part 6, 5.2.2.15).
constexpr uint8_t kNoBody = 0x00;
constexpr uint8_t kByteStringBody = 0x01;
constexpr uint8_t kXmlBody = 0x02;

std::string hex_byte(uint8_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  return std::string("0x") + kDigits[value >> 4] + kDigits[value & 0x0f];
}

}  // namespace

void Writer::uint16(uint16_t value) {
  byte(static_cast<uint8_t>(value));
  byte(static_cast<uint8_t>(value >> 8));
}

void Writer::uint32(uint32_t value) {
  for (int shift = 0; shift < 32; shift += 8) byte(static_cast<uint8_t>(value >> shift));
}

void Writer::int64(int64_t value) {
  auto bits = static_cast<uint64_t>(value);
  for (int shift = 0; shift < 64; shift += 8) byte(static_cast<uint8_t>(bits >> shift));
}

void Writer::raw(std::string_view text) { bytes_.insert(bytes_.end(), text.begin(), text.end()); }

void Writer::string(std::string_view text) {
  int32(static_cast<int32_t>(text.size()));
  raw(text);
}

void Writer::string_array(const std::vector<std::string>& items) {
  int32(static_cast<int32_t>(items.size()));
  for (const auto& item : items) string(item);
}

void Writer::node_id(const NodeId& id) {
  if (id.kind != NodeIdKind::numeric)
    throw std::invalid_argument("only numeric NodeIds are encoded here");
  if (id.namespace_index == 0 && id.numeric <= 0xff) {
    byte(kTwoByteNodeId);
    byte(static_cast<uint8_t>(id.numeric));
  } else if (id.namespace_index <= 0xff && id.numeric <= 0xffff) {
    byte(kFourByteNodeId);
    byte(static_cast<uint8_t>(id.namespace_index));
    uint16(static_cast<uint16_t>(id.numeric));
  } else {
    byte(kNumericNodeId);
    uint16(id.namespace_index);
    uint32(id.numeric);
  }
}

void Writer::localized_text(const LocalizedText& text) {
  uint8_t mask = (text.locale.empty() ? 0 : kHasLocale) | (text.text.empty() ? 0 : kHasText);
  byte(mask);
  if (!text.locale.empty()) string(text.locale);
  if (!text.text.empty()) string(text.text);
}

void Writer::null_extension_object() {
  node_id(standard_node_id(0));
  byte(kNoBody);
}

void Writer::patch_uint32(size_t offset, uint32_t value) {
  if (offset + 4 > bytes_.size()) throw std::out_of_range("patch_uint32 past the end");
  for (int i = 0; i < 4; ++i) bytes_[offset + i] = static_cast<uint8_t>(value >> (8 * i));
}

ByteView Reader::raw(size_t count) {
  if (count > remaining())
    throw DecodeError("need " + std::to_string(count) + " bytes at offset " +
                      std::to_string(position_) + ", only " + std::to_string(remaining()) +
                      " left");
  ByteView view = bytes_.subspan(position_, count);
  position_ += count;
  return view;
}

uint8_t Reader::byte() { return raw(1)[0]; }

uint16_t Reader::uint16() {
  ByteView b = raw(2);
  return static_cast<uint16_t>(b[0] | (b[1] << 8));
}

uint32_t Reader::uint32() {
  ByteView b = raw(4);
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | b[i];
  return value;
}

int64_t Reader::int64() {
  ByteView b = raw(8);
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | b[i];
  return static_cast<int64_t>(value);
}

size_t Reader::length_prefix() {
  size_t at = position_;
  int32_t length = int32();
  if (length == -1) return 0;
  if (length < 0)
    throw DecodeError("negative length " + std::to_string(length) + " at offset " +
                      std::to_string(at));
  if (static_cast<size_t>(length) > remaining())
    throw DecodeError("length " + std::to_string(length) + " at offset " + std::to_string(at) +
                      " exceeds the " + std::to_string(remaining()) + " bytes left");
  return static_cast<size_t>(length);
}

std::string Reader::string() {
  ByteView b = raw(length_prefix());
  return std::string(b.begin(), b.end());
}

size_t Reader::array_length(size_t min_element_size) {
  size_t at = position_;
  int32_t count = int32();
  if (count == -1) return 0;
  if (count < 0)
    throw DecodeError("negative array length " + std::to_string(count) + " at offset " +
                      std::to_string(at));
  auto n = static_cast<size_t>(count);
  if (n > kMaxArrayLength)
    throw DecodeError("array length " + std::to_string(n) + " at offset " + std::to_string(at) +
                      " exceeds the cap of " + std::to_string(kMaxArrayLength));
  if (min_element_size > 0 && n > remaining() / min_element_size)
    throw DecodeError("array of " + std::to_string(n) + " elements at offset " +
                      std::to_string(at) + " cannot fit in the " + std::to_string(remaining()) +
                      " bytes left");
  return n;
}

std::vector<std::string> Reader::string_array() {
  return array(4, [](Reader& r) { return r.string(); });
}

NodeId Reader::node_id() {
  size_t at = position_;
  uint8_t encoding = byte();
  if ((encoding & (kNamespaceUriFlag | kServerIndexFlag)) != 0)
    throw DecodeError("NodeId at offset " + std::to_string(at) + " has ExpandedNodeId flags " +
                      hex_byte(encoding));
  return node_id_body(encoding, at);
}

NodeId Reader::expanded_node_id() {
  size_t at = position_;
  uint8_t encoding = byte();
  auto plain = static_cast<uint8_t>(encoding & ~(kNamespaceUriFlag | kServerIndexFlag));
  NodeId id = node_id_body(plain, at);
  if ((encoding & kNamespaceUriFlag) != 0) skip_string();
  if ((encoding & kServerIndexFlag) != 0) (void)uint32();
  return id;
}

NodeId Reader::node_id_body(uint8_t encoding, size_t at) {
  NodeId id;
  switch (encoding) {
    case kTwoByteNodeId:
      id.numeric = byte();
      break;
    case kFourByteNodeId:
      id.namespace_index = byte();
      id.numeric = uint16();
      break;
    case kNumericNodeId:
      id.namespace_index = uint16();
      id.numeric = uint32();
      break;
    case kStringNodeId:
    case kByteStringNodeId:
      id.namespace_index = uint16();
      id.kind = encoding == kStringNodeId ? NodeIdKind::string : NodeIdKind::byte_string;
      skip_string();
      break;
    case kGuidNodeId:
      id.namespace_index = uint16();
      id.kind = NodeIdKind::guid;
      (void)raw(16);
      break;
    default:
      throw DecodeError("unknown NodeId encoding " + hex_byte(encoding) + " at offset " +
                        std::to_string(at));
  }
  return id;
}

LocalizedText Reader::localized_text() {
  uint8_t mask = byte();
  LocalizedText text;
  if ((mask & kHasLocale) != 0) text.locale = string();
  if ((mask & kHasText) != 0) text.text = string();
  return text;
}

void Reader::skip_extension_object() {
  (void)node_id();
  size_t at = position_;
  uint8_t encoding = byte();
  if (encoding == kNoBody) return;
  if (encoding != kByteStringBody && encoding != kXmlBody)
    throw DecodeError("unknown ExtensionObject encoding " + hex_byte(encoding) + " at offset " +
                      std::to_string(at));
  skip_string();
}

void Reader::skip_diagnostic_info(int depth) {
  if (depth > kMaxDiagnosticNesting)
    throw DecodeError("DiagnosticInfo nested deeper than " + std::to_string(kMaxDiagnosticNesting));
  uint8_t mask = byte();
  if ((mask & kHasSymbolicId) != 0) (void)int32();
  if ((mask & kHasNamespaceUri) != 0) (void)int32();
  if ((mask & kHasDiagnosticLocale) != 0) (void)int32();
  if ((mask & kHasLocalizedText) != 0) (void)int32();
  if ((mask & kHasAdditionalInfo) != 0) skip_string();
  if ((mask & kHasInnerStatusCode) != 0) (void)uint32();
  if ((mask & kHasInnerDiagnosticInfo) != 0) skip_diagnostic_info(depth + 1);
}

void Reader::expect_end(std::string_view what) const {
  if (remaining() != 0)
    throw DecodeError(std::to_string(remaining()) + " unexpected bytes after " + std::string(what));
}

}  // namespace opcua::ua
