// libFuzzer target for the udev rule parser and the glob matcher. Any input
// must either parse or be refused with a RuleError whose column lies inside
// the rule; a parsed rule written back as text must parse to the same filters.
#include "udev_glob.hpp"
#include "udev_rule.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace {

using udev_handler::Filter;

bool same_filters(const std::vector<Filter>& a, const std::vector<Filter>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].field != b[i].field || a[i].key != b[i].key || a[i].op != b[i].op ||
        a[i].value != b[i].value)
      return false;
  }
  return true;
}

std::string written_back(const std::vector<Filter>& filters) {
  std::string text;
  for (const auto& filter : filters) text += (text.empty() ? "" : ", ") + to_text(filter);
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rule(reinterpret_cast<const char*>(data), size);
  std::vector<Filter> filters;
  try {
    filters = udev_handler::parse_rule(rule);
  } catch (const udev_handler::RuleError& e) {
    if (e.column() < 1 || e.column() > size + 1 || e.reason().empty()) __builtin_trap();
    return 0;
  }
  if (!same_filters(udev_handler::parse_rule(written_back(filters)), filters)) __builtin_trap();
  for (const auto& filter : filters) {
    // Values are udev globs: matching them against anything must be safe.
    udev_handler::glob_match(filter.value, rule);
    udev_handler::glob_match(filter.value, filter.value);
    udev_handler::glob_match(filter.value, filter.key);
  }
  return 0;
}
