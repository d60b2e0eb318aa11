// dowserctl validate: the checks dowserd makes when it reads a manifest
// (parser, resource names, the handler's own validation), without a daemon.
#include "dowserctl.hpp"
#include "local_discovery.hpp"
#include "naming.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

namespace dowser::ctl {
namespace {

struct Finding {
  std::string file;
  std::string configuration;  // namespace/name, empty when the file did not parse
  bool ok = false;
  std::string message;
};

std::optional<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class Validator {
 public:
  Validator(const HandlerSetup& setup, bool skip_handlers) : setup_(setup) {
    if (!skip_handlers) handlers_ = std::make_unique<LocalDiscovery>(setup.handler_dir);
  }

  void check_file(const std::filesystem::path& path) {
    auto file = path.string();
    auto text = read_file(path);
    if (!text) return problem(file, "", file + ": cannot read the file");
    std::vector<configuration::Configuration> configurations;
    try {
      configurations = configuration::parse_configurations(*text, file);
    } catch (const configuration::ConfigurationError& e) {
      return problem(file, "", e.what());  // "<file>: <field path>: <reason>", as dowserd logs it
    }
    if (configurations.empty()) return problem(file, "", file + ": no Configuration in the file");
    for (const auto& configuration : configurations) check_configuration(file, configuration);
  }

  const std::vector<Finding>& findings() const { return findings_; }

 private:
  void check_configuration(const std::string& file,
                           const configuration::Configuration& configuration) {
    auto id = configuration.namespace_name + "/" + configuration.name;
    auto where = file + ": Configuration " + id + ": ";
    if (auto [other, fresh] = defined_in_.emplace(id, file); !fresh)
      return problem(file, id,
                     where + "also defined in " + other->second + " (dowserd keeps the first)");
    try {
      naming::resource_name(setup_.resource_domain, configuration.name);
    } catch (const std::invalid_argument& e) {
      return problem(file, id, where + e.what());
    }
    if (handlers_) {
      try {
        handlers_->validate(configuration);
      } catch (const host::HandlerCallError& e) {
        return problem(
            file, id,
            where + "refused by handler " + configuration.handler_name + ": " + e.message());
      } catch (const std::invalid_argument& e) {  // what dowserd would refuse before the handler
        return problem(file, id, where + e.what());
      } catch (const std::runtime_error& e) {
        return problem(
            file, id,
            where + e.what() + " (handler directory " + setup_.handler_dir.string() + ")");
      }
    }
    findings_.push_back(
        {file, id, true, where + "valid (handler " + configuration.handler_name + ")"});
  }

  void problem(const std::string& file, const std::string& configuration, std::string message) {
    findings_.push_back({file, configuration, false, std::move(message)});
  }

  const HandlerSetup& setup_;
  std::unique_ptr<LocalDiscovery> handlers_;
  std::map<std::string, std::string> defined_in_;  // namespace/name -> file
  std::vector<Finding> findings_;
};

}  // namespace

int validate(const HandlerSetup& setup, const ValidateOptions& options, const Output& output) {
  Validator validator(setup, options.skip_handlers);
  for (const auto& file : options.files) validator.check_file(file);
  size_t problems = 0;
  for (const auto& finding : validator.findings()) problems += finding.ok ? 0 : 1;

  if (output.format == Format::json) {
    auto results = nlohmann::json::array();
    for (const auto& f : validator.findings())
      results.push_back({{"file", f.file},
                         {"configuration", f.configuration},
                         {"ok", f.ok},
                         {"message", f.message}});
    std::cout << nlohmann::json{{"results", results}, {"problems", problems}}.dump(2) << "\n";
  } else {
    for (const auto& f : validator.findings())
      std::cout << paint(f.ok ? "ok   " : "error", f.ok ? Colour::green : Colour::red,
                         output.colour)
                << "  " << f.message << "\n";
    std::cout << problems << (problems == 1 ? " problem" : " problems") << " in "
              << options.files.size() << (options.files.size() == 1 ? " file" : " files") << "\n";
  }
  return problems == 0 ? kOk : kProblems;
}

}  // namespace dowser::ctl
