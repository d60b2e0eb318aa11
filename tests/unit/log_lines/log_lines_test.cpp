// Control characters in log messages are spelled out, so that one event is
// one line; through a real spdlog logger writing to a stream.
#include "log_lines.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <memory>
#include <regex>
#include <sstream>

namespace dowser::log_lines {
namespace {

TEST(EscapeControls, NewlinesAndOtherControlsAreSpelledOutTabsAndTextKept) {
  EXPECT_EQ(escape_controls("plain text, ü and\ttab"), "plain text, ü and\ttab");
  EXPECT_EQ(escape_controls("a\nb\r\n"), "a\\nb\\r\\n");
  constexpr char kControls[] = "nul\0bell\a\x1b[31m\x7f";
  EXPECT_EQ(escape_controls(std::string_view(kControls, sizeof kControls - 1)),
            "nul\\x00bell\\x07\\x1b[31m\\x7f");
  EXPECT_EQ(escape_controls(""), "");
}

TEST(SingleLinePattern, AMessageWithANewlineIsOneLineInSpdlogsDefaultLayout) {
  std::ostringstream stream;
  spdlog::logger logger("dowserd", std::make_shared<spdlog::sinks::ostream_sink_st>(stream));
  use_single_line_pattern(logger);
  logger.warn("instance store: skipping {}",
              "cams-abc\n[2026-01-01 00:00:00.000] [dowserd] [error] forged");
  const std::string line = stream.str();
  EXPECT_TRUE(std::regex_match(
      line, std::regex(R"(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] \[dowserd\] \[warning\] )"
                       R"(instance store: skipping cams-abc\\n\[2026-01-01 00:00:00\.000\] )"
                       R"(\[dowserd\] \[error\] forged\n)")))
      << line;
}

}  // namespace
}  // namespace dowser::log_lines
