// dowserctl discover: one discovery pass with a handler, printing the
// Instances dowserd would make of what it finds (the dry run for writing
// discovery details and rules).
#include "dowserctl.hpp"
#include "instance_reconciler.hpp"
#include "local_discovery.hpp"
#include "log_lines.hpp"
#include "naming.hpp"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

namespace dowser::ctl {
namespace {

// A command-line mistake: told before anything runs, exit code kUsage.
struct UsageProblem {
  std::string message;
};

// The -p option a parser error's field path points into, or the path itself.
std::string option_of(const std::string& field_path, const DiscoverOptions& options) {
  static const std::string kProperties = "spec.discoveryHandler.discoveryProperties[";
  if (field_path.rfind(kProperties, 0) != 0) return field_path;
  const size_t index = std::strtoul(field_path.c_str() + kProperties.size(), nullptr, 10);
  if (index >= options.properties.size()) return field_path;
  return "-p '" + options.properties[index] + "'";
}

// The Configuration dowserd would run (without its discovery details), read
// by dowserd's own parser, so that a property name it would refuse (or one
// given twice) is refused here too. Throws UsageProblem.
configuration::Configuration dry_run_configuration(const DiscoverOptions& options) {
  auto properties = nlohmann::json::array();
  for (const auto& property : options.properties) {
    auto equals = property.find('=');
    nlohmann::json entry = {{"name", property.substr(0, equals)}};
    if (equals != std::string::npos) entry["value"] = property.substr(equals + 1);
    properties.push_back(std::move(entry));
  }
  const nlohmann::json object = {
      {"apiVersion", "akri.sh/v0"},
      {"kind", "Configuration"},
      {"metadata", {{"name", options.configuration}, {"namespace", "default"}}},
      {"spec",
       {{"capacity", options.capacity},
        {"discoveryHandler",
         {{"name", options.handler}, {"discoveryProperties", std::move(properties)}}}}}};
  try {
    return configuration::parse_configuration_object(object.dump(), "the command line");
  } catch (const configuration::ConfigurationError& e) {
    throw UsageProblem{option_of(e.field_path(), options) + ": " + e.reason()};
  } catch (const nlohmann::json::exception&) {
    throw UsageProblem{"--handler, --name and -p must be UTF-8 text"};
  }
}

nlohmann::json device_json(const store::Instance& instance, const Device& device) {
  auto mounts = nlohmann::json::array();
  for (const auto& m : device.mounts)
    mounts.push_back({{"container_path", m.container_path},
                      {"host_path", m.host_path},
                      {"read_only", m.read_only}});
  auto nodes = nlohmann::json::array();
  for (const auto& n : device.device_nodes)
    nodes.push_back({{"container_path", n.container_path},
                     {"host_path", n.host_path},
                     {"permissions", n.permissions}});
  return {{"instance", instance.name},
          {"device_id", device.id},
          {"shared", instance.shared},
          {"capacity", instance.capacity},
          {"properties", instance.broker_properties},
          {"mounts", mounts},
          {"device_nodes", nodes}};
}

std::string joined_properties(const std::map<std::string, std::string>& properties) {
  std::string text;
  for (const auto& [key, value] : properties) {
    if (!text.empty()) text += ' ';
    text.append(key).append("=").append(value);
  }
  return text;
}

// Empty when the names the Instances are made of are ones dowserd accepts,
// else what is wrong, naming the option.
std::string name_problem(const DiscoverOptions& options) {
  if (auto problem = configuration::configuration_name_problem(options.configuration);
      !problem.empty())
    return "--name '" + options.configuration + "': " + problem;
  if (auto problem = naming::node_name_problem(options.node); !problem.empty())
    return options.node_as_given + ": " + problem;
  return "";
}

}  // namespace

int discover(const HandlerSetup& setup, const DiscoverOptions& options, const Output& output) {
  configuration::Configuration configuration;
  try {  // every command-line mistake before the details file is read
    if (auto problem = name_problem(options); !problem.empty()) throw UsageProblem{problem};
    configuration = dry_run_configuration(options);
  } catch (const UsageProblem& problem) {
    std::cerr << "dowserctl: " << problem.message << "\n";
    return kUsage;
  }
  std::ifstream in(options.details_file);
  if (!in) {
    std::cerr << "dowserctl: --details: cannot read " << options.details_file.string() << ": "
              << std::strerror(errno) << "\n";
    return kProblems;
  }
  std::ostringstream details;
  details << in.rdbuf();
  configuration.discovery_details = details.str();  // the handler's, byte for byte

  LocalDiscovery handlers(setup.handler_dir);
  try {
    // Said before the devices, as dowserd logs them when it reads the Configuration.
    for (const auto& warning : handlers.validate(configuration)) spdlog::warn("{}", warning);
  } catch (const host::HandlerCallError& e) {
    std::cerr << "dowserctl: refused by handler " << options.handler << ": "
              << log_lines::escape_controls(e.reason()) << "\n";
    return kProblems;
  } catch (const std::runtime_error& e) {
    std::cerr << "dowserctl: " << e.what() << " (handler directory " << setup.handler_dir.string()
              << ")\n";
    return kProblems;
  }
  auto pass = handlers.discover_once(configuration, options.timeout);
  // A stop_discovery that never returns is a problem even if the pass went well.
  const bool stopped = handlers.finish();
  const int code = (options.strict && !pass.problems.empty()) || !stopped ? kProblems : kOk;
  if (!pass.snapshot) {
    std::cerr << "dowserctl: discovery failed: " << log_lines::escape_controls(pass.error) << "\n";
    return kProblems;
  }

  std::vector<std::pair<store::Instance, Device>> found;
  for (const auto& device : *pass.snapshot)
    found.emplace_back(
        reconcile::instance_for(configuration, device, options.node, setup.resource_domain),
        device);
  if (output.format == Format::json) {
    auto list = nlohmann::json::array();
    for (const auto& [instance, device] : found) list.push_back(device_json(instance, device));
    std::cout << nlohmann::json{{"handler", options.handler},
                                {"configuration", options.configuration},
                                {"node", options.node},
                                {"instances", list},
                                {"problems", pass.problems}}
                     .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
    return code;
  }
  Table table({"INSTANCE", "DEVICE ID", "SHARED", "PROPERTIES"});
  for (const auto& [instance, device] : found)
    table.add({instance.name, device.id, instance.shared ? "yes" : "no",
               joined_properties(instance.broker_properties)});
  table.print(std::cout, output.colour);
  std::cout << found.size() << (found.size() == 1 ? " device" : " devices") << " found by "
            << options.handler << " on node " << options.node;
  // Each was logged on stderr as it came, as dowserd logs it.
  if (!pass.problems.empty())
    std::cout << "; " << pass.problems.size() << " problem(s) in the handler's reports (on stderr)";
  std::cout << "\n";
  return code;
}

}  // namespace dowser::ctl
