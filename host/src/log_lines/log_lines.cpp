#include "log_lines.hpp"

#include <spdlog/pattern_formatter.h>

#include <array>
#include <memory>

namespace dowser::log_lines {
namespace {

constexpr std::array<char, 16> kHexDigits{'0', '1', '2', '3', '4', '5', '6', '7',
                                          '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};

bool is_control(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }

template <typename Out>
void append_escaped(std::string_view text, Out& out) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (!is_control(byte)) {
      out.push_back(c);
    } else if (c == '\n') {
      out.append(std::string_view("\\n"));
    } else if (c == '\r') {
      out.append(std::string_view("\\r"));
    } else {
      const std::array<char, 4> escaped{'\\', 'x', kHexDigits[byte >> 4], kHexDigits[byte & 15]};
      out.append(std::string_view(escaped.data(), escaped.size()));
    }
  }
}

// %* in a pattern: the message, escaped.
class EscapedMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& message, const std::tm&,
              spdlog::memory_buf_t& out) override {
    struct Appender {
      spdlog::memory_buf_t& buffer;
      void push_back(char c) { buffer.push_back(c); }
      void append(std::string_view text) { buffer.append(text.data(), text.data() + text.size()); }
    } appender{out};
    append_escaped(std::string_view(message.payload.data(), message.payload.size()), appender);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<EscapedMessage>();
  }
};

}  // namespace

std::string escape_controls(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  append_escaped(text, out);
  return out;
}

void use_single_line_pattern(spdlog::logger& logger, std::string_view pattern) {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<EscapedMessage>('*').set_pattern(std::string(pattern));
  logger.set_formatter(std::move(formatter));
}

}  // namespace dowser::log_lines
