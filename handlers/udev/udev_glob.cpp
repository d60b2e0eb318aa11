#include "udev_glob.hpp"

#include <fnmatch.h>

#include <string>

namespace udev_handler {
namespace {

// fnmatch needs NUL-terminated strings; a NUL inside either one cannot be
// expressed, so such a text never matches (the rule parser refuses NUL in values).
bool alternative_matches(std::string_view alternative, const std::string& text) {
  std::string pattern(alternative);
  return pattern.find('\0') == std::string::npos &&
         ::fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view text) {
  std::string subject(text);
  if (subject.find('\0') != std::string::npos) return false;
  for (;;) {
    size_t bar = pattern.find('|');
    if (alternative_matches(pattern.substr(0, bar), subject)) return true;
    if (bar == std::string_view::npos) return false;
    pattern.remove_prefix(bar + 1);
  }
}

}  // namespace udev_handler
