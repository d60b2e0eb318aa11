// dowserctl validate: the checks dowserd makes when it reads a manifest
// (parser, resource names, the handler's own validation), without a daemon.
#include "dowserctl.hpp"
#include "local_discovery.hpp"
#include "log_lines.hpp"
#include "naming.hpp"

#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <set>

namespace dowser::ctl {
namespace {

struct Finding {
  std::string file;
  std::string configuration;  // namespace/name, empty when the file did not parse
  bool ok = false;
  std::string message;
  std::vector<std::string> warnings;  // what the handler warned of: not problems
};

class Validator {
 public:
  Validator(const HandlerSetup& setup, bool skip_handlers)
      : setup_(setup), skip_handlers_(skip_handlers) {}

  // A directory is checked as dowserd reads it: every manifest file in it.
  void check_path(const std::filesystem::path& path) {
    std::error_code error;
    // Named on the command line: may be a stream (/dev/stdin).
    if (!std::filesystem::is_directory(path, error))
      return check_file(path, configuration::NonRegular::read);
    std::vector<std::filesystem::path> files;
    try {
      files = configuration::manifest_files(path);
    } catch (const configuration::ConfigurationError& e) {
      return problem(path.string(), "", e.what());
    }
    if (files.empty())
      return problem(path.string(), "",
                     path.string() + ": no manifest file (*.yaml, *.yml, *.json) in the directory");
    for (const auto& file : files) check_file(file, configuration::NonRegular::refused);
  }

  const std::vector<Finding>& findings() const { return findings_; }
  size_t files_checked() const { return checked_.size(); }

 private:
  void check_file(const std::filesystem::path& path, configuration::NonRegular non_regular) {
    // Named twice (a file and its directory, a glob and a file): read once,
    // or its Configurations would clash with themselves.
    std::error_code error;
    if (!checked_.insert(std::filesystem::weakly_canonical(path, error)).second) return;
    auto file = path.string();
    std::vector<configuration::Configuration> configurations;
    try {
      configurations = configuration::parse_configurations(
          configuration::read_manifest(path, non_regular), file);
    } catch (const configuration::ConfigurationError& e) {
      return problem(file, "", e.what());  // "<file>: <field path>: <reason>", as dowserd logs it
    }
    // Not a problem: dowserd reads such a file (a placeholder, all comments) as defining nothing.
    if (configurations.empty())
      return findings_.push_back({file, "", true, file + ": no Configuration in the file", {}});
    for (const auto& configuration : configurations) check_configuration(file, configuration);
  }

  void check_configuration(const std::string& file,
                           const configuration::Configuration& configuration) {
    auto id = configuration.namespace_name + "/" + configuration.name;
    auto where = file + ": Configuration " + id + ": ";
    if (auto [other, fresh] = defined_in_.emplace(id, file); !fresh)
      return problem(file, id,
                     where + "also defined in " + other->second + " (dowserd keeps the first)");
    std::string resource;
    try {
      resource = naming::resource_name(setup_.resource_domain, configuration.name);
    } catch (const std::invalid_argument& e) {
      return problem(file, id, where + e.what());
    }
    // Resource names carry no namespace: dowserd refuses the second of two.
    if (auto [holder, fresh] = resource_holders_.try_emplace(resource, id + " in " + file); !fresh)
      return problem(file, id,
                     where + "its resource name " + resource + " is taken by Configuration " +
                         holder->second +
                         " (resource names carry no namespace; dowserd refuses whichever comes "
                         "second)");
    std::vector<std::string> warnings;
    if (!skip_handlers_) {
      // Loaded for the first Configuration: files with none need no handler.
      if (!handlers_) handlers_ = std::make_unique<LocalDiscovery>(setup_.handler_dir);
      try {
        warnings = handlers_->validate(configuration);
      } catch (const host::HandlerCallError& e) {
        return problem(
            file, id,
            where + "refused by handler " + configuration.handler_name + ": " + e.reason());
      } catch (const std::invalid_argument& e) {  // what dowserd would refuse before the handler
        return problem(file, id, where + e.what());
      } catch (const std::runtime_error& e) {
        return problem(
            file, id,
            where + e.what() + " (handler directory " + setup_.handler_dir.string() + ")");
      }
    }
    const std::string checked_by = skip_handlers_
                                       ? "manifest valid; handler " + configuration.handler_name +
                                             " not asked (--skip-handlers)"
                                       : "valid (handler " + configuration.handler_name + ")";
    findings_.push_back({file, id, true, where + checked_by, std::move(warnings)});
  }

  void problem(const std::string& file, const std::string& configuration, std::string message) {
    findings_.push_back({file, configuration, false, std::move(message), {}});
  }

  const HandlerSetup& setup_;
  const bool skip_handlers_;
  std::unique_ptr<LocalDiscovery> handlers_;
  std::map<std::string, std::string> defined_in_;        // namespace/name -> file
  std::map<std::string, std::string> resource_holders_;  // resource -> "namespace/name in file"
  std::set<std::filesystem::path> checked_;              // files read, as canonical paths
  std::vector<Finding> findings_;
};

}  // namespace

int validate(const HandlerSetup& setup, const ValidateOptions& options, const Output& output) {
  Validator validator(setup, options.skip_handlers);
  for (const auto& path : options.files) validator.check_path(path);
  size_t problems = 0;
  size_t warnings = 0;
  for (const auto& finding : validator.findings()) {
    problems += finding.ok ? 0 : 1;
    warnings += finding.warnings.size();
  }

  if (output.format == Format::json) {
    auto results = nlohmann::json::array();
    for (const auto& f : validator.findings())
      results.push_back({{"file", f.file},
                         {"configuration", f.configuration},
                         {"ok", f.ok},
                         {"message", f.message},
                         {"warnings", f.warnings}});
    std::cout << nlohmann::json{{"results", results},
                                {"problems", problems},
                                {"warnings", warnings}}
                     // File names and handler messages may hold bytes that are not UTF-8.
                     .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  } else {
    for (const auto& f : validator.findings()) {
      std::cout << paint(f.ok ? "ok   " : "error", f.ok ? Colour::green : Colour::red,
                         output.colour)
                << "  " << log_lines::escape_controls(f.message) << "\n";
      // Under the Configuration's line, with its file and name: one line each.
      const std::string where = f.file + ": Configuration " + f.configuration + ": ";
      for (const auto& warning : f.warnings)
        std::cout << paint("warn ", Colour::yellow, output.colour) << "  "
                  << log_lines::escape_controls(where + warning) << "\n";
    }
    const size_t files = validator.files_checked();
    std::cout << problems << (problems == 1 ? " problem" : " problems");
    if (warnings > 0) std::cout << ", " << warnings << (warnings == 1 ? " warning" : " warnings");
    std::cout << " in " << files << (files == 1 ? " file" : " files") << "\n";
  }
  return problems == 0 && !(options.strict && warnings > 0) ? kOk : kProblems;
}

}  // namespace dowser::ctl
