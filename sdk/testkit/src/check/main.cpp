// dowser-handler-check: loads a discovery handler exactly as dowserd does,
// runs discovery, prints what it found and checks the handler against the
// ABI contract (sdk/include/dowser/handler.h). Exit status: 0 when every
// check passed, 1 when one failed, 2 for a usage error.
#include "checks.hpp"
#include "command_line.hpp"
#include "output.hpp"

#include <handler_registry.hpp>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr int kAllPassed = 0;
constexpr int kCheckFailed = 1;
constexpr int kUsageError = 2;

// A command line that makes sense to CLI11 but not to us.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CommandLine {
  std::string handler_file;
  std::string details_file;
  std::vector<std::string> properties;
  double duration_seconds = 1.0;
  int stop_timeout_ms = 2000;
  int start_timeout_ms = 1000;
  bool json = false;
  bool show_log = false;
};

// Longer runs than this are surely a mistake, and would overflow the
// millisecond watchdogs.
constexpr double kMaxDurationSeconds = 24 * 3600;

// CLI::ExistingFile, but a dangling symbolic link is named with its missing
// target, in the loader's words.
CLI::Validator existing_handler_file() {
  return CLI::Validator(
      [](const std::string& file) -> std::string {
        std::error_code error;
        const auto status = std::filesystem::status(file, error);
        if (std::filesystem::is_directory(status)) return file + " is a directory";
        if (std::filesystem::exists(status)) return {};
        return file + ": " + dowser::host::missing_file_reason(file);
      },
      "FILE");
}

void describe_options(CLI::App& app, CommandLine& line) {
  app.add_option("handler", line.handler_file, "the handler shared object (.so) to check")
      ->required()
      ->check(existing_handler_file());
  app.add_option("--details", line.details_file,
                 "file whose text is the discovery details (YAML), as in a Configuration");
  app.add_option("--property", line.properties,
                 "discovery property KEY=VALUE (repeatable); KEY alone has no value");
  app.add_option("--duration", line.duration_seconds, "seconds to run discovery (at most a day)")
      ->default_val(1.0)
      ->check(dowser::command_line::decimal_number(0.001, kMaxDurationSeconds, "seconds"));
  app.add_flag("--json", line.json, "print the report as JSON");
  app.add_flag("--show-log", line.show_log,
               "print what the handler logged in every check (by default: in failed ones)");
  app.add_option("--stop-timeout-ms", line.stop_timeout_ms,
                 "the longest stop_discovery may take, in milliseconds")
      ->default_val(2000)
      ->check(dowser::command_line::whole_number(1, 3600L * 1000, "ms"));
  app.add_option("--start-timeout-ms", line.start_timeout_ms,
                 "the longest start_discovery may take, in milliseconds (rule T3: promptly)")
      ->default_val(1000)
      ->check(dowser::command_line::whole_number(1, 3600L * 1000, "ms"));
}

std::string read_details(const std::string& file) {
  if (file.empty()) return {};
  std::error_code error;
  if (!std::filesystem::is_regular_file(file, error))
    throw UsageError(
        "--details file '" + file + "' " +
        (std::filesystem::exists(file, error) ? "is not a regular file" : "does not exist"));
  std::ifstream in(file, std::ios::binary);
  if (!in) throw UsageError("cannot open --details file '" + file + "': " + std::strerror(errno));
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw UsageError("cannot read --details file '" + file + "'");
  return text;
}

dowser::Properties parse_properties(const std::vector<std::string>& arguments) {
  dowser::Properties properties;
  for (const auto& argument : arguments) {
    auto equals = argument.find('=');
    std::string key = argument.substr(0, equals);
    if (key.empty()) throw UsageError("--property '" + argument + "' has no name");
    if (properties.count(key) != 0) throw UsageError("--property " + key + " is given twice");
    properties[key] = equals == std::string::npos
                          ? std::nullopt
                          : std::optional<std::string>(argument.substr(equals + 1));
  }
  return properties;
}

dowser::check::Settings settings_from(const CommandLine& line) {
  dowser::check::Settings settings;
  // dlopen searches the library path for a bare name: check the file named.
  settings.handler_file = std::filesystem::absolute(line.handler_file);
  settings.request.discovery_details = read_details(line.details_file);
  settings.request.properties = parse_properties(line.properties);
  settings.duration = std::chrono::ceil<std::chrono::milliseconds>(
      std::chrono::duration<double>(line.duration_seconds));
  settings.stop_timeout = std::chrono::milliseconds(line.stop_timeout_ms);
  settings.start_timeout = std::chrono::milliseconds(line.start_timeout_ms);
  return settings;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Checks a dowser discovery handler against the handler ABI, loading it as dowserd does.",
      "dowser-handler-check"};
  CommandLine line;
  describe_options(app, line);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int status = app.exit(e);  // prints help, or the error
    return status == 0 ? kAllPassed : kUsageError;
  }

  dowser::check::Settings settings;
  try {
    settings = settings_from(line);
  } catch (const UsageError& e) {
    std::cerr << "dowser-handler-check: " << e.what() << '\n';
    return kUsageError;
  }

  try {
    // A run can take minutes: say on stderr how far it got, as it goes.
    auto report = dowser::check::run_checks(settings, [](const dowser::check::CheckOutcome& c) {
      std::cerr << "dowser-handler-check: " << c.name << ": "
                << dowser::check::verdict_word(c.verdict) << '\n';
    });
    if (line.json) {
      dowser::check::print_json(std::cout, report);
    } else {
      dowser::check::print_text(std::cout, settings.handler_file, report, line.show_log);
    }
    return report.passed() ? kAllPassed : kCheckFailed;
  } catch (const std::exception& e) {
    std::cerr << "dowser-handler-check: cannot run the checks: " << e.what() << '\n';
    return kCheckFailed;
  }
}
