// OPC UA binary encoding (Part 6, 5.2) of the built-in types the discovery
// services use. Reader validates every length and count it reads from the
// wire against the bytes that are left and against fixed caps, and throws
// DecodeError instead of reading past the end or allocating on trust.
#ifndef DOWSER_HANDLERS_OPCUA_CODEC_UA_BINARY_HPP
#define DOWSER_HANDLERS_OPCUA_CODEC_UA_BINARY_HPP

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace opcua::ua {

using Bytes = std::vector<uint8_t>;
using ByteView = std::span<const uint8_t>;

// Input that does not follow the encoding, or breaks a limit.
class DecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Caps on what one decoded value may claim, whatever the message size.
inline constexpr size_t kMaxArrayLength = 65536;
inline constexpr int kMaxDiagnosticNesting = 8;

// NodeId encodings (Part 6, 5.2.2.9). Only numeric ids carry meaning here
// (type ids of messages); the other forms are read and checked, then dropped.
enum class NodeIdKind : uint8_t { numeric, string, guid, byte_string };

struct NodeId {
  uint16_t namespace_index = 0;
  NodeIdKind kind = NodeIdKind::numeric;
  uint32_t numeric = 0;
  friend bool operator==(const NodeId&, const NodeId&) = default;
};

// A namespace-0 numeric id, the form every standard type id takes.
constexpr NodeId standard_node_id(uint32_t id) { return NodeId{0, NodeIdKind::numeric, id}; }

struct LocalizedText {
  std::string locale;
  std::string text;
  friend bool operator==(const LocalizedText&, const LocalizedText&) = default;
};

// Appends little-endian encodings to a growing buffer.
class Writer {
 public:
  void byte(uint8_t value) { bytes_.push_back(value); }
  void uint16(uint16_t value);
  void uint32(uint32_t value);
  void int32(int32_t value) { uint32(static_cast<uint32_t>(value)); }
  void int64(int64_t value);
  void raw(ByteView bytes) { bytes_.insert(bytes_.end(), bytes.begin(), bytes.end()); }
  void raw(std::string_view text);
  void string(std::string_view text);  // Int32 length, then the bytes
  void null_string() { int32(-1); }    // also the null ByteString
  void string_array(const std::vector<std::string>& items);
  // Numeric NodeId in its shortest form (two-byte, four-byte or full).
  void node_id(const NodeId& id);
  // Locale and text are written when not empty.
  void localized_text(const LocalizedText& text);
  // An ExtensionObject without a body (the null AdditionalHeader).
  void null_extension_object();

  // Overwrites 4 bytes already written at offset (e.g. a size field).
  void patch_uint32(size_t offset, uint32_t value);
  size_t size() const noexcept { return bytes_.size(); }
  const Bytes& bytes() const noexcept { return bytes_; }
  Bytes take() noexcept { return std::move(bytes_); }

 private:
  Bytes bytes_;
};

// Reads from a borrowed byte range; every read checks what is left first.
class Reader {
 public:
  explicit Reader(ByteView bytes) : bytes_(bytes) {}

  uint8_t byte();
  bool boolean() { return byte() != 0; }
  uint16_t uint16();
  uint32_t uint32();
  int32_t int32() { return static_cast<int32_t>(uint32()); }
  int64_t int64();
  ByteView raw(size_t count);
  // A String or ByteString; null (length -1) reads as empty.
  std::string string();
  void skip_string() { (void)raw(length_prefix()); }
  std::vector<std::string> string_array();
  NodeId node_id();
  NodeId expanded_node_id();  // namespace URI and server index are dropped
  LocalizedText localized_text();
  void skip_extension_object();
  void skip_diagnostic_info() { skip_diagnostic_info(0); }

  // An array's element count: -1 (null) reads as 0. Checked against the cap
  // and against the bytes left, given the smallest encoding of an element.
  size_t array_length(size_t min_element_size);

  // Reads an array of items with read_item(*this) -> T.
  template <typename ReadItem>
  auto array(size_t min_element_size, ReadItem read_item) {
    size_t count = array_length(min_element_size);
    std::vector<decltype(read_item(*this))> items;
    for (size_t i = 0; i < count; ++i) items.push_back(read_item(*this));
    return items;
  }

  // Reads past an array whose items skip_item(*this) consumes.
  template <typename SkipItem>
  void skip_array(size_t min_element_size, SkipItem skip_item) {
    size_t count = array_length(min_element_size);
    for (size_t i = 0; i < count; ++i) skip_item(*this);
  }

  size_t position() const noexcept { return position_; }
  size_t remaining() const noexcept { return bytes_.size() - position_; }
  // Throws unless every byte was read: a message has no trailing bytes.
  void expect_end(std::string_view what) const;

 private:
  // A String/ByteString length: -1 reads as 0; other negatives are errors.
  size_t length_prefix();
  // The NodeId fields that follow an encoding byte read at offset `at`.
  NodeId node_id_body(uint8_t encoding, size_t at);
  void skip_diagnostic_info(int depth);

  ByteView bytes_;
  size_t position_ = 0;
};

}  // namespace opcua::ua

#endif  // DOWSER_HANDLERS_OPCUA_CODEC_UA_BINARY_HPP
