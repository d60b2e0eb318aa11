// The commands that read a running dowserd's status API.
#include "dowserctl.hpp"
#include "naming.hpp"
#include "status_api.hpp"

#include <algorithm>
#include <iostream>
#include <optional>

namespace dowser::ctl {
namespace {

using nlohmann::json;

// A failure that decides the exit code; its message goes to stderr.
struct Failure {
  int code;
  std::string message;
};

// GETs path and parses the JSON answer. Throws Failure.
json fetch(const Remote& remote, const std::string& path) {
  status_api::Response response;
  try {
    response = status_api::http_get(remote.server + path, remote.timeout);
  } catch (const status_api::Unreachable& e) {
    throw Failure{kUnreachable, e.what()};
  } catch (const std::invalid_argument& e) {
    throw Failure{kUsage, std::string("--server: ") + e.what()};
  }
  json body = json::parse(response.body, nullptr, false);
  if (body.is_discarded())
    throw Failure{kUnreachable, remote.server + path + " did not answer JSON (HTTP " +
                                    std::to_string(response.status) + ")"};
  if (response.status == 404) throw Failure{kProblems, body.value("error", "not found")};
  // The request named too little (an Instance name several namespaces hold).
  if (response.status == 409) throw Failure{kUsage, body.value("error", "ambiguous")};
  if (response.status != 200)
    throw Failure{kUnreachable, remote.server + path + ": HTTP " + std::to_string(response.status) +
                                    ": " + body.value("error", "")};
  return body;
}

// "?configuration=cams&namespace=lab" of the filters given. The values are
// checked Kubernetes names: nothing to escape.
std::string query_of(const std::vector<std::pair<std::string, std::string>>& filters) {
  std::string query;
  for (const auto& [key, value] : filters)
    if (!value.empty())
      query.append(query.empty() ? "?" : "&").append(key).append("=").append(value);
  return query;
}

template <typename Item>
std::vector<Item> items(const json& body) {
  return body.value("items", json::array()).get<std::vector<Item>>();
}

// Runs a command body, turning a Failure into its message and exit code.
template <typename Body>
int run(Body&& body) {
  try {
    return body();
  } catch (const Failure& failure) {
    std::cerr << "dowserctl: " << failure.message << "\n";
    return failure.code;
  } catch (const json::exception& e) {
    std::cerr << "dowserctl: unexpected answer from the daemon: " << e.what() << "\n";
    return kUnreachable;
  }
}

void print_json(const json& body) { std::cout << body.dump(2) << "\n"; }

Cell yes_no(bool value, Colour when_no = Colour::red) {
  return value ? Cell("yes", Colour::green) : Cell("no", when_no);
}

std::string duration(double seconds) {
  auto total = static_cast<long>(seconds);
  std::string text;
  if (total >= 86400) text += std::to_string(total / 86400) + "d ";
  if (total >= 3600) text += std::to_string(total / 3600 % 24) + "h ";
  if (total >= 60) text += std::to_string(total / 60 % 60) + "m ";
  return text + std::to_string(total % 60) + "s";
}

Colour state_colour(const std::string& state) {
  if (state == "discovering" || state == "loaded") return Colour::green;
  if (state == "starting") return Colour::yellow;
  return Colour::red;
}

// "free", "node-a (IL)" or "node-a (CL, virtual device 0)".
std::string holder(const std::string& usage) {
  if (usage.empty()) return "free";
  try {
    auto parsed = naming::parse_usage(usage);
    if (parsed.kind == naming::SlotUsage::Kind::instance) return parsed.node + " (instance-level)";
    return parsed.node + " (configuration-level, virtual device " + parsed.vdev + ")";
  } catch (const naming::UsageParseError&) {
    return "unreadable";
  }
}

// Free slots of all slots here ("free/total"), yellow when none is free:
// a pod asking for the resource would wait. No Instance here (or a daemon
// too old to count slots): "-".
Cell free_slots_cell(const status_api::ConfigurationStatus& configuration) {
  const auto& slots = configuration.slots;
  if (slots.empty()) return Cell("-");
  uint64_t total = 0;
  for (const auto& [state, count] : slots) total += count;
  const auto free = slots.find("free");
  const uint64_t free_count = free == slots.end() ? 0 : free->second;
  const std::string text = std::to_string(free_count) + "/" + std::to_string(total);
  return free_count == 0 && total > 0 ? Cell(text, Colour::yellow) : Cell(text);
}

// An error that still holds in red; one discovery has recovered from, said
// so, without the retry it announced then (none is pending any more).
// The last error; else what was last not taken from the handler's reports.
Cell last_error_cell(const status_api::ConfigurationStatus& configuration) {
  const std::string& error = configuration.last_error;
  if (error.empty())
    return configuration.last_report_problem.empty()
               ? Cell("")
               : Cell("handler: " + configuration.last_report_problem, Colour::yellow);
  if (configuration.last_error_current) return Cell(error, Colour::red);
  const size_t retry = error.rfind(" (retrying in ");
  const bool announced = retry != std::string::npos && error.ends_with(" ms)");
  return Cell("recovered; was: " + error.substr(0, announced ? retry : error.size()));
}

}  // namespace

int show_status(const Remote& remote, const Output& output) {
  return run([&]() -> int {
    auto body = fetch(remote, "/api/v1/status");
    auto summary = body.get<status_api::Summary>();
    int code = summary.readiness.ready ? kOk : kProblems;
    if (output.format == Format::json) {
      print_json(body);
      return code;
    }
    Table table({"FIELD", "VALUE"});
    table.add({"node", summary.node});
    table.add({"version", summary.version});
    table.add({"uptime", duration(summary.uptime_seconds)});
    table.add({"ready", yes_no(summary.readiness.ready)});
    for (const auto& check : summary.readiness.checks)
      table.add(
          {"  " + check.name, Cell((check.ok ? "ok" : "FAILING") +
                                       std::string(check.detail.empty() ? "" : ": ") + check.detail,
                                   check.ok ? Colour::green : Colour::red)});
    table.add({"handlers", std::to_string(summary.handlers)});
    table.add({"configurations", std::to_string(summary.configurations)});
    table.add({"instances here", std::to_string(summary.instances)});
    table.add({"plugins", std::to_string(summary.plugins)});
    table.add({"config errors", Cell(std::to_string(summary.configuration_errors),
                                     summary.configuration_errors ? Colour::red : Colour::none)});
    table.print(std::cout, output.colour);
    return code;
  });
}

int show_handlers(const Remote& remote, const Output& output) {
  return run([&]() -> int {
    auto body = fetch(remote, "/api/v1/handlers");
    if (output.format == Format::json) {
      print_json(body);
      return kOk;
    }
    Table table({"NAME", "VERSION", "STATE", "SHARED", "PATH", "ERROR"});
    for (const auto& h : items<status_api::HandlerStatus>(body))
      table.add({h.name.empty() ? "-" : h.name, h.version, Cell(h.state, state_colour(h.state)),
                 h.state == "failed" ? "" : (h.shares_devices ? "yes" : "no"), h.path, h.error});
    table.print(std::cout, output.colour);
    return kOk;
  });
}

// Manifests the daemon could not use, below the Configurations table.
void print_configuration_errors(const std::vector<status_api::ConfigurationErrorStatus>& errors,
                                const Output& output) {
  std::cout << "\nRefused manifests (the Configurations they define are not running, or run a "
               "previous version):\n";
  Table table({"SOURCE", "FIELD", "REASON", "SINCE"});
  for (const auto& e : errors)
    table.add({e.source, e.field_path, Cell(e.reason, Colour::red), e.since});
  table.print(std::cout, output.colour);
}

// Exits 1 when a manifest was refused: the operator has something to fix.
int show_configurations(const Remote& remote, const Output& output) {
  return run([&]() -> int {
    auto body = fetch(remote, "/api/v1/configurations");
    auto errors =
        items<status_api::ConfigurationErrorStatus>(fetch(remote, "/api/v1/configuration-errors"));
    const auto configurations = items<status_api::ConfigurationStatus>(body);
    // A manifest that does not parse, or a Configuration (or a change) the daemon refused.
    const bool refused =
        std::any_of(configurations.begin(), configurations.end(),
                    [](const auto& c) { return c.state == "refused" || c.change_refused; });
    const int code = errors.empty() && !refused ? kOk : kProblems;
    if (output.format == Format::json) {
      print_json(body);
      return code;
    }
    Table table({"NAMESPACE", "NAME", "HANDLER", "STATE", "DEVICES", "INSTANCES", "CAPACITY",
                 "FREE", "LAST ERROR"});
    for (const auto& c : configurations)
      table.add({c.namespace_name, c.name, c.handler,
                 c.change_refused ? Cell(c.state + " (change refused)", Colour::red)
                                  : Cell(c.state, state_colour(c.state)),
                 std::to_string(c.devices), std::to_string(c.instances), std::to_string(c.capacity),
                 free_slots_cell(c), last_error_cell(c)});
    table.print(std::cout, output.colour);
    if (!errors.empty()) print_configuration_errors(errors, output);
    return code;
  });
}

int show_instances(const Remote& remote, const Output& output, const InstanceFilter& filter) {
  return run([&]() -> int {
    auto body =
        fetch(remote, "/api/v1/instances" + query_of({{"configuration", filter.configuration},
                                                      {"namespace", filter.namespace_name}}));
    if (output.format == Format::json) {
      print_json(body);
      return kOk;
    }
    Table table(
        {"NAMESPACE", "NAME", "CONFIGURATION", "SHARED", "HERE", "USED", "NODES", "OFFLINE"});
    for (const auto& i : items<status_api::InstanceStatus>(body)) {
      size_t used = 0;
      for (const auto& slot : i.slots) used += slot.usage.empty() ? 0 : 1;
      std::string nodes;
      for (const auto& node : i.nodes) nodes += (nodes.empty() ? "" : ",") + node;
      table.add({i.namespace_name, i.name, i.configuration, i.shared ? "yes" : "no",
                 i.here ? "yes" : "no", std::to_string(used) + "/" + std::to_string(i.capacity),
                 nodes, i.offline ? Cell("yes", Colour::red) : Cell("no")});
    }
    table.print(std::cout, output.colour);
    return kOk;
  });
}

int show_slots(const Remote& remote, const Output& output, const InstanceFilter& instance) {
  return run([&]() -> int {
    auto body = fetch(remote, "/api/v1/instances/" + instance.name +
                                  query_of({{"namespace", instance.namespace_name}}));
    if (output.format == Format::json) {
      print_json(body);
      return kOk;
    }
    auto status = body.get<status_api::InstanceStatus>();
    Table table({"SLOT", "USAGE", "HELD BY"});
    for (const auto& slot : status.slots)
      table.add({slot.name, slot.usage.empty() ? "-" : slot.usage,
                 Cell(holder(slot.usage), slot.usage.empty() ? Colour::green : Colour::none)});
    table.print(std::cout, output.colour);
    return kOk;
  });
}

int show_plugins(const Remote& remote, const Output& output) {
  return run([&]() -> int {
    auto body = fetch(remote, "/api/v1/plugins");
    if (output.format == Format::json) {
      print_json(body);
      return kOk;
    }
    Table table({"RESOURCE", "KIND", "REGISTERED", "REGISTRATIONS", "HEALTHY", "LISTS SENT",
                 "SOCKET", "LAST ERROR"});
    for (const auto& p : items<status_api::PluginStatus>(body)) {
      size_t healthy = 0;
      for (const auto& device : p.devices) healthy += device.healthy ? 1 : 0;
      table.add({p.resource, p.kind, yes_no(p.registered), std::to_string(p.registrations),
                 std::to_string(healthy) + "/" + std::to_string(p.devices.size()),
                 std::to_string(p.lists_sent), p.socket, p.last_error});
    }
    table.print(std::cout, output.colour);
    return kOk;
  });
}

}  // namespace dowser::ctl
