#include "udev_rule.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace udev_handler {
namespace {

struct FieldInfo {
  std::string_view name;
  Field field;
  bool keyed;
  bool plural;
};

constexpr std::array<FieldInfo, 12> kFields = {{
    {"ATTR", Field::attr, true, false},
    {"ATTRS", Field::attrs, true, true},
    {"DEVPATH", Field::devpath, false, false},
    {"DRIVER", Field::driver, false, false},
    {"DRIVERS", Field::drivers, false, true},
    {"ENV", Field::env, true, false},
    {"KERNEL", Field::kernel, false, false},
    {"KERNELS", Field::kernels, false, true},
    {"SUBSYSTEM", Field::subsystem, false, false},
    {"SUBSYSTEMS", Field::subsystems, false, true},
    {"TAG", Field::tag, false, false},
    {"TAGS", Field::tags, false, true},
}};

constexpr std::string_view kSupported =
    "ATTR{key}, ATTRS{key}, DEVPATH, DRIVER, DRIVERS, ENV{key}, KERNEL, KERNELS, SUBSYSTEM, "
    "SUBSYSTEMS, TAG, TAGS";

// udev match fields that say nothing about a device that is already there.
constexpr std::array<std::string_view, 9> kUnsupportedMatches = {
    "ACTION", "CONST", "NAME", "PROGRAM", "RESULT", "SECLABEL", "SYMLINK", "SYSCTL", "TEST"};

// Fields that only make sense as udev actions.
constexpr std::array<std::string_view, 9> kActions = {
    "GOTO", "GROUP", "IMPORT", "LABEL", "MODE", "OPTIONS", "OWNER", "RUN", "WAIT_FOR"};

template <size_t N>
bool contains(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

const FieldInfo& info(Field field) {
  return *std::find_if(kFields.begin(), kFields.end(),
                       [field](const FieldInfo& f) { return f.field == field; });
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

bool is_name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

// An attribute key is a path below the device's sysfs directory; "/x" or
// "../x" would let a rule read any file on the host.
bool escapes_device_directory(std::string_view key) {
  if (key.front() == '/') return true;
  for (size_t start = 0; start <= key.size();) {
    size_t slash = std::min(key.find('/', start), key.size());
    if (key.substr(start, slash - start) == "..") return true;
    start = slash + 1;
  }
  return false;
}

// How a character is shown in a message: printable ones quoted, others by code.
std::string shown(char c) {
  auto byte = static_cast<unsigned char>(c);
  if (byte >= 0x20 && byte < 0x7f) return std::string("'") + c + "'";
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string("byte 0x") + kHex[byte >> 4] + kHex[byte & 0xf];
}

// Reads one rule left to right; every error names the column it stopped at.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  std::vector<Filter> filters() {
    std::vector<Filter> result;
    bool comma_seen = true;  // nothing before the first filter needs one
    for (;;) {
      comma_seen = skip_separators() || comma_seen;
      if (at_end()) return result;
      if (!comma_seen)
        fail("expected ',' before the next filter, found " + shown(peek()) +
             " (filters are separated by commas)");
      result.push_back(filter());
      comma_seen = false;
    }
  }

 private:
  [[noreturn]] void fail(const std::string& reason) const { fail_at(pos_, reason); }
  [[noreturn]] static void fail_at(size_t pos, const std::string& reason) {
    throw RuleError(pos + 1, reason);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }
  bool next_is(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }

  void skip_spaces() {
    while (!at_end() && is_space(peek())) ++pos_;
  }

  // Skips whitespace and commas; returns whether there was a comma.
  bool skip_separators() {
    bool comma = false;
    for (; !at_end() && (is_space(peek()) || peek() == ','); ++pos_) {
      if (peek() == ',') comma = true;
    }
    return comma;
  }

  Filter filter() {
    Filter result;
    result.column = pos_ + 1;
    const FieldInfo& field = field_info();
    result.field = field.field;
    result.key = key_of(field);
    skip_spaces();
    result.op = op(field.name);
    skip_spaces();
    result.value = quoted_value(field.name);
    return result;
  }

  const FieldInfo& field_info() {
    size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    std::string_view name = text_.substr(start, pos_ - start);
    if (name.empty())
      fail("expected a field name such as KERNEL or ATTR{key}, found " + shown(peek()));
    auto known = std::find_if(kFields.begin(), kFields.end(),
                              [name](const FieldInfo& f) { return f.name == name; });
    if (known != kFields.end()) return *known;
    std::string quoted = "'" + std::string(name) + "'";
    if (contains(kActions, name))
      fail_at(start, quoted + " is a udev action, not a match: discovery rules only match devices");
    if (contains(kUnsupportedMatches, name))
      fail_at(start, quoted + " is not supported for discovery (supported: " +
                         std::string(kSupported) + ")");
    fail_at(start, "unknown field " + quoted + " (supported: " + std::string(kSupported) + ")");
  }

  std::string key_of(const FieldInfo& field) {
    std::string name(field.name);
    if (at_end() || peek() != '{') {
      if (field.keyed) fail(name + " needs a key, as in " + name + "{name}");
      return {};
    }
    if (!field.keyed) fail(name + " takes no {key}");
    size_t open = pos_++;
    size_t close = text_.find('}', pos_);
    if (close == std::string_view::npos)
      fail_at(open, "'{' after " + name + " is not closed by '}'");
    std::string key(text_.substr(pos_, close - pos_));
    if (key.empty()) fail_at(open, name + "{} has an empty key");
    if (key.find('\0') != std::string::npos) fail_at(open, name + " key contains a NUL byte");
    if (field.field != Field::env && escapes_device_directory(key))
      fail_at(open, name + "{" + key + "} names a file outside the device's sysfs directory");
    pos_ = close + 1;
    return key;
  }

  Operator op(std::string_view field) {
    constexpr std::pair<std::string_view, Operator> kMatches[] = {{"==", Operator::equal},
                                                                  {"!=", Operator::not_equal}};
    for (auto [text, result] : kMatches) {
      if (next_is(text)) {
        pos_ += 2;
        return result;
      }
    }
    for (std::string_view assignment : {"+=", "-=", ":=", "="}) {
      if (next_is(assignment))
        fail("assignment operator '" + std::string(assignment) +
             "' is not supported: discovery rules only match (use == or !=)");
    }
    fail("expected == or != after " + std::string(field) +
         (at_end() ? ", found the end of the rule" : ", found " + shown(peek())));
  }

  std::string quoted_value(std::string_view field) {
    if (at_end() || peek() != '"')
      fail("expected a double-quoted value after the operator of " + std::string(field) +
           (at_end() ? ", found the end of the rule" : ", found " + shown(peek())));
    size_t open = pos_++;
    std::string value;
    for (;;) {
      if (at_end()) fail_at(open, "the value starting here has no closing '\"'");
      char c = text_[pos_++];
      if (c == '"') return value;
      if (c == '\0') fail_at(pos_ - 1, "NUL byte in the value");
      // As udev reads values: only \" is an escape; other backslashes stay for the glob.
      if (c == '\\' && !at_end() && peek() == '"') c = text_[pos_++];
      value.push_back(c);
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

RuleError::RuleError(size_t column, const std::string& reason)
    : std::invalid_argument("column " + std::to_string(column) + ": " + reason),
      column_(column),
      reason_(reason) {}

std::vector<Filter> parse_rule(std::string_view rule) { return Parser(rule).filters(); }

std::string_view field_name(Field field) { return info(field).name; }
bool takes_key(Field field) { return info(field).keyed; }
bool walks_parents(Field field) { return info(field).plural; }

std::string to_text(const Filter& filter) {
  std::string text(field_name(filter.field));
  if (takes_key(filter.field)) text += "{" + filter.key + "}";
  text += filter.op == Operator::equal ? "==\"" : "!=\"";
  for (char c : filter.value) {
    if (c == '"') text += '\\';
    text += c;
  }
  return text + "\"";
}

}  // namespace udev_handler
