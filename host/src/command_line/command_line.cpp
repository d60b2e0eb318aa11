#include "command_line.hpp"

#include <charconv>
#include <sstream>

namespace dowser::command_line {
namespace {

template <typename Number>
std::string text_of(Number number) {
  std::ostringstream text;
  text << number;
  return text.str();
}

// The whole text must be the number: "10ms" and "1e3x" are mistakes too.
// kind: "a whole number" or "a number", as messages say it; placeholder: how
// --help shows the value.
template <typename Number>
CLI::Validator number_in(Number low, Number high, const std::string& unit, const std::string& kind,
                         const std::string& placeholder) {
  const std::string range = text_of(low) + " to " + text_of(high) + " " + unit;
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        Number value{};
        const char* end = text.data() + text.size();
        auto [stop, error] = std::from_chars(text.data(), end, value);
        if (error == std::errc::result_out_of_range) return "'" + text + "' must be from " + range;
        if (error != std::errc() || stop != end || text.empty())
          return "'" + text + "' is not " + kind;
        if (value < low || value > high) return text + " is out of range: must be from " + range;
        return "";
      },
      placeholder + " from " + range);
}

}  // namespace

CLI::Validator whole_number(long low, long high, const std::string& unit) {
  return number_in(low, high, unit, "a whole number", "INT");
}

CLI::Validator decimal_number(double low, double high, const std::string& unit) {
  return number_in(low, high, unit, "a number", "NUMBER");
}

std::string value_and_origin(const CLI::Option& option, const std::string& value,
                             const std::string& fallback_origin) {
  const std::string name = option.get_name();
  if (option.count() > 0) return name + " '" + value + "'";
  return "'" + value + "' from " + fallback_origin + " (no " + name + " given)";
}

}  // namespace dowser::command_line
