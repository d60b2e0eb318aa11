// The shared command-line checks: what CLI11 prints for each kind of mistake.
#include "command_line.hpp"

#include <gtest/gtest.h>

namespace {

using dowser::command_line::decimal_number;
using dowser::command_line::value_and_origin;
using dowser::command_line::whole_number;

// Parses "--value TEXT" with check; the error CLI11 prints, or "" when accepted.
template <typename Number>
std::string parse_error(const std::string& text, const CLI::Validator& check, Number& value) {
  CLI::App app;
  app.add_option("--value", value)->check(check);
  try {
    app.parse(std::vector<std::string>{text, "--value"});  // CLI11 takes them in reverse
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(CommandLine, AWholeNumberInRangeIsAccepted) {
  long value = 0;
  EXPECT_EQ(parse_error("250", whole_number(1, 600000, "ms"), value), "");
  EXPECT_EQ(value, 250);
}

TEST(CommandLine, MistakesAreNamedForWhatTheyAre) {
  long value = 0;
  const auto check = whole_number(1, 600000, "ms");
  EXPECT_EQ(parse_error("abc", check, value), "--value: 'abc' is not a whole number");
  EXPECT_EQ(parse_error("10ms", check, value), "--value: '10ms' is not a whole number");
  EXPECT_EQ(parse_error("1.5", check, value), "--value: '1.5' is not a whole number");
  EXPECT_EQ(parse_error("0", check, value),
            "--value: 0 is out of range: must be from 1 to 600000 ms");
  EXPECT_EQ(parse_error("99999999999999999999", check, value),
            "--value: '99999999999999999999' must be from 1 to 600000 ms");
}

TEST(CommandLine, ADecimalNumberTakesFractionsAndItsOwnRange) {
  double value = 0;
  const auto check = decimal_number(0.001, 86400, "seconds");
  EXPECT_EQ(parse_error("0.25", check, value), "");
  EXPECT_DOUBLE_EQ(value, 0.25);
  EXPECT_EQ(parse_error("0", check, value),
            "--value: 0 is out of range: must be from 0.001 to 86400 seconds");
  EXPECT_EQ(parse_error("soon", check, value), "--value: 'soon' is not a number");
}

}  // namespace

TEST(CommandLine, AValueIsNamedByWhereItCameFrom) {
  CLI::App app;
  std::string node = "from-the-environment";
  auto* option = app.add_option("--node-name", node);
  app.parse(std::vector<std::string>{});
  EXPECT_EQ(value_and_origin(*option, node, "the NODE_NAME environment variable"),
            "'from-the-environment' from the NODE_NAME environment variable (no --node-name "
            "given)");
  app.parse(std::vector<std::string>{"Given", "--node-name"});  // CLI11 takes them in reverse
  EXPECT_EQ(value_and_origin(*option, node, "the NODE_NAME environment variable"),
            "--node-name 'Given'");
}
