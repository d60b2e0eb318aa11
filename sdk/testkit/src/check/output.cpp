#include "output.hpp"

#include "describe.hpp"
#include "isolation.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace dowser::check {
namespace {

using nlohmann::json;

// Handler text may hold control characters: escape them so that every
// report line stays one line and the terminal stays sane.
std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    }
  }
  return out;
}

// Longer handler text is cut in the text report (the JSON has it whole), so
// that one long id cannot pad every row of the device table. Room for what
// real handlers report whole: sysfs paths, OPC UA and ONVIF URLs.
constexpr size_t kMaxShownBytes = 160;

std::string text_of(const json& value) {
  const std::string text = value.is_string() ? value.get<std::string>() : dump_json(value);
  return printable(host::shortened(text, kMaxShownBytes));
}

// The lines shown for one device, after its id and sharing.
std::vector<std::string> device_lines(const json& device) {
  std::vector<std::string> lines;
  const json properties = device.value("properties", json::object());
  for (const auto& [key, value] : properties.items())
    lines.push_back(text_of(key) + (value.is_null() ? " (no value)" : "=" + text_of(value)));
  const json mounts = device.value("mounts", json::array());
  for (const auto& mount : mounts)
    lines.push_back("mount " + text_of(mount["host_path"]) + " -> " +
                    text_of(mount["container_path"]) +
                    (mount.value("read_only", false) ? " (read-only)" : ""));
  const json nodes = device.value("device_nodes", json::array());
  for (const auto& node : nodes)
    lines.push_back("device node " + text_of(node["host_path"]) + " -> " +
                    text_of(node["container_path"]) + " (" + text_of(node["permissions"]) + ")");
  if (lines.empty()) lines.push_back("-");
  return lines;
}

std::string padded(std::string text, size_t width) {
  text.resize(std::max(width, text.size()), ' ');
  return text;
}

void print_devices(std::ostream& out, const std::optional<json>& listed) {
  if (!listed) {
    out << "(no device list: discover did not pass)\n";
    return;
  }
  const json& devices = *listed;
  if (devices.empty()) {
    out << "(no devices reported)\n";
    return;
  }
  size_t id_width = 2;
  for (const auto& device : devices) id_width = std::max(id_width, text_of(device["id"]).size());
  const size_t sharing_width = 7;
  out << padded("ID", id_width) << "  " << padded("SHARING", sharing_width) << "  PROPERTIES\n";
  for (const auto& device : devices) {
    auto lines = device_lines(device);
    out << padded(text_of(device["id"]), id_width) << "  "
        << padded(text_of(device["sharing"]), sharing_width) << "  " << lines.front() << '\n';
    for (size_t i = 1; i < lines.size(); ++i)
      out << std::string(id_width + sharing_width + 4, ' ') << lines[i] << '\n';
  }
}

void print_handler(std::ostream& out, const std::filesystem::path& file, const Report& report) {
  out << "file     " << printable(file.string()) << '\n';
  if (!report.handler) return;
  const json& handler = *report.handler;
  out << "handler  " << text_of(handler["name"]) << ' ' << text_of(handler["version"]) << " (ABI "
      << text_of(handler["abi"]) << ", " << (handler.value("shared", false) ? "shared" : "local")
      << " devices)\n";
}

}  // namespace

const char* verdict_word(Verdict verdict) {
  switch (verdict) {
    case Verdict::passed:
      return "PASS";
    case Verdict::failed:
      return "FAIL";
    case Verdict::skipped:
      return "SKIP";
  }
  return "FAIL";
}

void print_text(std::ostream& out, const std::filesystem::path& handler_file, const Report& report,
                bool show_log) {
  print_handler(out, handler_file, report);
  out << '\n';
  print_devices(out, report.devices);
  out << '\n';
  size_t counts[3] = {};
  for (const auto& check : report.checks) {
    ++counts[static_cast<size_t>(check.verdict)];
    out << verdict_word(check.verdict) << ' ' << check.name << ": " << printable(check.detail)
        << '\n';
    for (const auto& warning : check.warnings)
      out << "WARN " << check.name << ": " << printable(warning) << '\n';
    if (check.verdict == Verdict::failed || show_log)
      for (const auto& line : check.handler_log)
        out << "LOG  " << check.name << ": " << printable(line) << '\n';
  }
  out << '\n'
      << report.checks.size() << " checks: " << counts[0] << " passed, " << counts[1] << " failed, "
      << counts[2] << " skipped\n";
}

void print_json(std::ostream& out, const Report& report) {
  json checks = json::array();
  for (const auto& check : report.checks) {
    checks.push_back({{"name", check.name},
                      {"passed", check.verdict == Verdict::passed},
                      {"skipped", check.verdict == Verdict::skipped},
                      {"detail", check.detail},
                      {"warnings", check.warnings},
                      {"log", check.handler_log}});
  }
  json document = {{"handler", report.handler.value_or(json(nullptr))},
                   {"devices", report.devices.value_or(json::array())},
                   {"checks", std::move(checks)},
                   {"passed", report.passed()}};
  out << dump_json(document, 2) << '\n';
}

}  // namespace dowser::check
