// udev's pattern matching, as udev rules use it for every match value: a
// shell glob (`*`, `?`, `[...]`, backslash escapes) per alternative, with
// alternatives separated by `|`. Never a regular expression.
#ifndef DOWSER_HANDLERS_UDEV_GLOB_HPP
#define DOWSER_HANDLERS_UDEV_GLOB_HPP

#include <string_view>

namespace udev_handler {

// True when text matches pattern as udev matches it: the whole text against
// any `|`-separated alternative, with fnmatch(3) semantics (no FNM_PATHNAME,
// so `*` crosses `/`). An empty alternative matches only the empty text.
bool glob_match(std::string_view pattern, std::string_view text);

}  // namespace udev_handler

#endif  // DOWSER_HANDLERS_UDEV_GLOB_HPP
