// dowserctl: reads a running dowserd's status API, and checks manifests and
// handlers without one. Exit codes: see dowserctl.hpp and docs/dowserctl.md.
#include "command_line.hpp"
#include "configuration.hpp"
#include "dowserctl.hpp"
#include "log_lines.hpp"
#include "naming.hpp"
#include "status_api.hpp"
#include "thread_names.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <functional>
#include <iostream>

namespace {

using namespace dowser::ctl;

bool use_colour(const std::string& mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char* no_colour = std::getenv("NO_COLOR");
  return ::isatty(STDOUT_FILENO) && (no_colour == nullptr || *no_colour == '\0');
}

// The first word left over when no command matched: a misspelt command.
std::string unknown_command(const CLI::App& app) {
  if (!app.get_subcommands().empty()) return "";
  for (const auto& word : app.remaining())
    if (!word.empty() && word.front() != '-') return word;
  return "";
}

std::string command_names(const CLI::App& app) {
  std::string names = "commands:";
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names += " " + sub->get_name();
  return names;
}

}  // namespace

int main(int argc, char** argv) {
  // validate and discover run handlers in this process, each on a thread
  // named h:<handler>: a crash in one says whose it was.
  dowser::report_fatal_signals("dowserctl");
  CLI::App app{"dowserctl: inspect dowserd, validate Configurations, try discovery handlers"};
  app.set_version_flag("--version", DOWSER_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // global options may follow the command
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  Remote remote;
  long timeout_ms = remote.timeout.count();
  std::string format = "table";
  std::string colour = "auto";
  bool verbose = false;
  HandlerSetup setup;
  app.add_option("--server", remote.server, "dowserd's status API")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](const std::string& url) { return dowser::status_api::http_url_problem(url); }, "URL"))
      ->transform([](std::string url) {  // paths are appended: "http://node:8080/" is meant too
        while (url.ends_with('/')) url.pop_back();
        return url;
      });
  app.add_option("--timeout-ms", timeout_ms, "how long to wait for the daemon")
      ->capture_default_str()
      ->check(dowser::command_line::whole_number(1, 600000, "ms"));
  app.add_option("-o,--output", format, "table or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "json"}));
  app.add_option("--color", colour, "auto (on a terminal, unless NO_COLOR is set), always, never")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "always", "never"}));
  app.add_flag("-v,--verbose", verbose, "log what handlers say (to stderr)");

  std::function<int(const Output&)> command;
  auto remote_command = [&](const std::string& name, const std::string& help, auto show) {
    app.add_subcommand(name, help)->callback([&, show] {
      command = [&, show](const Output& output) { return show(remote, output); };
    });
  };
  remote_command("status", "the daemon's readiness and counts (exit 1 when not ready)",
                 show_status);
  remote_command("handlers", "loaded discovery handlers and refused files", show_handlers);
  remote_command("configs", "Configurations and their discovery state", show_configurations);
  remote_command("plugins", "device plugins and their kubelet registration", show_plugins);

  InstanceFilter instance_filter;
  auto add_namespace_option = [&](CLI::App* sub) {
    sub->add_option("-n,--namespace", instance_filter.namespace_name, "only this namespace")
        ->check(CLI::Validator(
            [](const std::string& name) {
              return dowser::configuration::namespace_name_problem(name);
            },
            "NAMESPACE"));
  };
  auto* instances = app.add_subcommand("instances", "Instances, their nodes and slot usage");
  instances
      ->add_option("-c,--configuration", instance_filter.configuration, "only this Configuration")
      ->check(CLI::Validator(
          [](const std::string& name) {
            return dowser::configuration::configuration_name_problem(name);
          },
          "NAME"));
  add_namespace_option(instances);
  instances->callback([&] {
    command = [&](const Output& output) { return show_instances(remote, output, instance_filter); };
  });

  auto* slots = app.add_subcommand("slots", "the slots of one Instance and who holds them");
  // Checked here: the name goes into the request's path.
  slots->add_option("INSTANCE", instance_filter.name, "Instance name")
      ->required()
      ->check(CLI::Validator(
          [](const std::string& name) { return dowser::naming::instance_name_problem(name); },
          "INSTANCE"));
  add_namespace_option(slots);
  slots->callback([&] {
    command = [&](const Output& output) { return show_slots(remote, output, instance_filter); };
  });

  auto add_handler_options = [&](CLI::App* sub) {
    sub->add_option("--handler-dir", setup.handler_dir, "where the handler .so files are")
        ->capture_default_str();
    sub->add_option("--resource-domain", setup.resource_domain, "domain of resource names")
        ->capture_default_str();
  };

  ValidateOptions validate_options;
  auto* validate_command =
      app.add_subcommand("validate", "check Configuration manifests (no daemon needed)");
  validate_command
      ->add_option("FILE", validate_options.files,
                   "manifest files, or directories of them (read as dowserd reads --config-dir)")
      ->required();
  validate_command->add_flag("--skip-handlers", validate_options.skip_handlers,
                             "only parse the manifests; do not ask their handlers");
  validate_command->add_flag("--strict", validate_options.strict,
                             "count what handlers warn of as problems (exit 1)");
  add_handler_options(validate_command);
  validate_command->callback([&] {
    command = [&](const Output& output) { return validate(setup, validate_options, output); };
  });

  DiscoverOptions discover_options;
  const auto default_node = dowser::naming::default_node_name();
  discover_options.node = default_node.name;
  long discover_timeout_ms = discover_options.timeout.count();
  auto* discover_command = app.add_subcommand(
      "discover", "run one discovery pass and print the Instances it would make");
  discover_command->add_option("--handler", discover_options.handler, "handler name")->required();
  discover_command
      ->add_option("--details", discover_options.details_file,
                   "file with the discoveryDetails text")
      ->required();
  discover_command->add_option("-p,--property", discover_options.properties,
                               "discovery property KEY=VALUE (repeatable)");
  discover_command
      ->add_option("--name", discover_options.configuration,
                   "Configuration name the Instances are named after")
      ->capture_default_str();
  auto* node_option =
      discover_command->add_option("--node", discover_options.node, "node name for local devices");
  node_option->capture_default_str();
  discover_command->add_option("--capacity", discover_options.capacity, "slots per Instance")
      ->capture_default_str()
      ->check(dowser::command_line::whole_number(1, 1000000, "slots"));
  discover_command->add_option("--wait-ms", discover_timeout_ms, "how long to wait for devices")
      ->capture_default_str()
      ->check(dowser::command_line::whole_number(1, 600000, "ms"));
  discover_command->add_flag(
      "--strict", discover_options.strict,
      "exit 1 if dowserd would leave a reported device out, or refuse a report");
  add_handler_options(discover_command);
  discover_command->callback([&] {
    command = [&](const Output& output) {
      discover_options.timeout = std::chrono::milliseconds(discover_timeout_ms);
      discover_options.node_as_given = dowser::command_line::value_and_origin(
          *node_option, discover_options.node, default_node.origin);
      return discover(setup, discover_options, output);
    };
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (auto unknown = unknown_command(app); !unknown.empty()) {
      std::cerr << "dowserctl: unknown command '" << unknown << "' (" << command_names(app)
                << "; see dowserctl --help)\n";
      return kUsage;
    }
    int code = app.exit(e);  // prints help, the version or the error
    return code == 0 ? kOk : kUsage;
  }

  // Handlers log through spdlog: keep stdout for the command's output.
  spdlog::set_default_logger(spdlog::stderr_color_mt("dowserctl"));
  // A command's message, not a daemon's log line; one line each all the same.
  dowser::log_lines::use_single_line_pattern(*spdlog::default_logger(), "%n: %^%l%$: %*");
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::warn);
  remote.timeout = std::chrono::milliseconds(timeout_ms);
  Output output{format == "json" ? Format::json : Format::table, use_colour(colour)};
  try {
    return command(output);
  } catch (const std::exception& e) {  // said and exited, never an abort
    spdlog::error("{}", e.what());
    return kProblems;
  }
}
