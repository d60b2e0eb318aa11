// Checks of command-line values shared by dowserd, dowserctl and the test
// kit's tools, whose messages say what is wrong: CLI11's own Range answers
// "Value abc not in range 1 to 600000" for a value that is no number at all.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace dowser::command_line {

// A whole number from low to high (unit names it in messages, e.g. "ms").
// CLI11 prefixes the option: "--timeout-ms: 'abc' is not a whole number".
CLI::Validator whole_number(long low, long high, const std::string& unit);

// A decimal number from low to high.
CLI::Validator decimal_number(double low, double high, const std::string& unit);

// How a message about a value names it and where it came from, so that a bad
// value taken from elsewhere is not blamed on an option nobody gave:
// "--node-name 'x'" when the option was given, else
// "'x' from <fallback_origin> (no --node-name given)".
std::string value_and_origin(const CLI::Option& option, const std::string& value,
                             const std::string& fallback_origin);

}  // namespace dowser::command_line
