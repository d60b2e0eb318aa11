// The udev rule subset that discovery uses: match filters only.
//
//   rule   := sep* [filter (sep* ',' sep* filter)*] sep*     sep := whitespace | ','
//   filter := NAME ['{' KEY '}'] ws* ('==' | '!=') ws* '"' VALUE '"'
//
// NAME is one of ATTR{k}, ATTRS{k}, DEVPATH, DRIVER, DRIVERS, ENV{k}, KERNEL,
// KERNELS, SUBSYSTEM, SUBSYSTEMS, TAG, TAGS. Inside VALUE, `\"` stands for `"`;
// every other character, backslashes included, is kept for the glob. Whitespace
// is tolerated where udev tolerates it; two filters without a comma between
// them are refused rather than silently dropped. Assignments, action fields
// and other match fields are refused with the column and the reason.
//
// Pure C++ with no dependency beyond the standard library, so that the
// libFuzzer target can compile it with clang.
#ifndef DOWSER_HANDLERS_UDEV_RULE_HPP
#define DOWSER_HANDLERS_UDEV_RULE_HPP

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace udev_handler {

enum class Field {
  attr,
  attrs,
  devpath,
  driver,
  drivers,
  env,
  kernel,
  kernels,
  subsystem,
  subsystems,
  tag,
  tags,
};

enum class Operator { equal, not_equal };

struct Filter {
  Field field = Field::kernel;
  std::string key;  // for ATTR, ATTRS and ENV; empty otherwise
  Operator op = Operator::equal;
  std::string value;  // a udev glob, unescaped
  size_t column = 1;  // where the filter starts in the rule, from 1
  friend bool operator==(const Filter&, const Filter&) = default;
};

// A rule that cannot be used, with the 1-based column of the offending text.
class RuleError : public std::invalid_argument {
 public:
  RuleError(size_t column, const std::string& reason);
  size_t column() const noexcept { return column_; }
  const std::string& reason() const noexcept { return reason_; }

 private:
  size_t column_;
  std::string reason_;
};

// The filters of one rule, in order; empty for a rule of only whitespace.
// Throws RuleError; never anything else for any input.
std::vector<Filter> parse_rule(std::string_view rule);

// The field's spelling in rules, e.g. "ATTRS".
std::string_view field_name(Field field);
// ATTR, ATTRS and ENV take a {key}.
bool takes_key(Field field);
// The plural fields (ATTRS, DRIVERS, KERNELS, SUBSYSTEMS, TAGS) look at the
// device and every ancestor.
bool walks_parents(Field field);

// A filter written back as rule text; parse_rule of it gives the filter back.
std::string to_text(const Filter& filter);

}  // namespace udev_handler

#endif  // DOWSER_HANDLERS_UDEV_RULE_HPP
