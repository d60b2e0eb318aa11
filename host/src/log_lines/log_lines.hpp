// log_lines: one event, one log line. journald, `kubectl logs` and log
// shippers read the daemon's log line by line, so a newline inside a message
// (a file name, a handler's message, a device id) would forge a line of its own.
#pragma once

#include <spdlog/logger.h>

#include <string>
#include <string_view>

namespace dowser::log_lines {

// text with control characters spelled out: newline as \n, carriage return
// as \r, the others (tab aside) as \xNN. Everything else is kept as it is.
std::string escape_controls(std::string_view text);

// spdlog's default pattern, "[time] [name] [level] message", with the
// message escaped: the daemon's log lines.
inline constexpr std::string_view kDaemonPattern = "[%Y-%m-%d %H:%M:%S.%e] [%n] [%^%l%$] %*";

// Gives logger an spdlog pattern in which %* is the message escaped as
// escape_controls does.
void use_single_line_pattern(spdlog::logger& logger, std::string_view pattern = kDaemonPattern);

}  // namespace dowser::log_lines
