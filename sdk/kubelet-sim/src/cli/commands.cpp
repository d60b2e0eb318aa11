#include "commands.hpp"

#include "status_json.hpp"

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

namespace dowser::testkit {

const char* const kCommandHelp =
    "Commands (one per line on stdin; one reply line each on stdout, 'ok ...' or 'error: ...'):\n"
    "  allocate <resource> <count> <namespace/pod> <container>\n"
    "      admit a container as the kubelet does; replies\n"
    "      ok {\"ids\":[...],\"response\":{envs, mounts, devices, annotations, cdi_devices}}\n"
    "  delete-pod <namespace/pod>      forget the pod's allocations\n"
    "  restart                         a kubelet restart: streams close, plugin sockets go,\n"
    "                                  kubelet.sock is created again\n"
    "  crash-restart                   the same after a crash: kubelet.sock stays behind,\n"
    "                                  refusing connections, until every plugin socket is gone\n"
    "  hide-pods                       podresources lists no pods (a kubelet restarted while\n"
    "                                  the API server is unreachable); allocations stay\n"
    "  show-pods                       podresources lists the pods again\n"
    "  status                          ok {\"resources\":{...},\"allocations\":[...]}\n"
    "  wait <resource> <min-allocatable> <timeout-seconds>\n"
    "                                  ok once the resource has that many healthy devices\n"
    "  quit\n";

namespace {

using Arguments = std::vector<std::string>;
using Command = std::function<Reply(KubeletSimulator&, const Arguments&)>;

Reply ok(const std::string& detail = {}) { return {detail.empty() ? "ok" : "ok " + detail}; }

// Replies are single lines whatever the message holds.
Reply error(std::string message) {
  std::replace(message.begin(), message.end(), '\n', ' ');
  return {"error: " + message};
}

template <typename Number>
std::optional<Number> parse_number(const std::string& text) {
  Number value{};
  const auto* end = text.data() + text.size();
  auto [stop, failure] = std::from_chars(text.data(), end, value);
  if (failure != std::errc{} || stop != end) return std::nullopt;
  return value;
}

std::optional<PodRef> parse_pod(const std::string& text) {
  const auto slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size()) return std::nullopt;
  return PodRef{text.substr(0, slash), text.substr(slash + 1)};
}

Reply allocate(KubeletSimulator& simulator, const Arguments& args) {
  const auto count = parse_number<std::size_t>(args[1]);
  const auto pod = parse_pod(args[2]);
  if (!count) return error("count must be a non-negative integer, not '" + args[1] + "'");
  if (!pod) return error("pod must be <namespace>/<name>, not '" + args[2] + "'");
  const auto result = simulator.allocate(args[0], *pod, args[3], *count);
  if (!result.ok()) {
    return error(status_code_name(result.status.error_code()) + ": " +
                 result.status.error_message());
  }
  return ok(to_json(result).dump());
}

Reply delete_pod(KubeletSimulator& simulator, const Arguments& args) {
  const auto pod = parse_pod(args[0]);
  if (!pod) return error("pod must be <namespace>/<name>, not '" + args[0] + "'");
  simulator.delete_pod(*pod);
  return ok();
}

Reply restart(KubeletSimulator& simulator, const Arguments&) {
  simulator.restart(KubeletExit::clean);
  return ok();
}

Reply crash_restart(KubeletSimulator& simulator, const Arguments&) {
  simulator.restart(KubeletExit::crash);
  return ok();
}

Reply hide_pods(KubeletSimulator& simulator, const Arguments&) {
  simulator.set_pods_listed(false);
  return ok();
}

Reply show_pods(KubeletSimulator& simulator, const Arguments&) {
  simulator.set_pods_listed(true);
  return ok();
}

Reply status(KubeletSimulator& simulator, const Arguments&) {
  return ok(to_json(simulator.status()).dump());
}

constexpr double kMaxWaitSeconds = 86400;  // a day

Reply wait(KubeletSimulator& simulator, const Arguments& args) {
  const auto& resource = args[0];
  const auto minimum = parse_number<std::size_t>(args[1]);
  const auto seconds = parse_number<double>(args[2]);
  if (!minimum) return error("min-allocatable must be a non-negative integer");
  // Also refuses nan and inf (which no comparison lets through), and what no
  // duration holds.
  if (!seconds || !(*seconds >= 0 && *seconds <= kMaxWaitSeconds))
    return error("timeout-seconds must be a number from 0 to " +
                 std::to_string(static_cast<int>(kMaxWaitSeconds)));
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(*seconds));
  const bool reached = simulator.wait_for(
      [&](const SimulatorStatus& status) {
        const auto* found = status.resource(resource);
        return found && found->allocatable() >= *minimum;
      },
      timeout);
  if (!reached) {
    return error("timeout: " + resource + " has fewer than " + args[1] + " healthy devices");
  }
  return ok();
}

struct CommandSpec {
  std::size_t arguments;
  Command run;
};

const std::map<std::string, CommandSpec, std::less<>>& commands() {
  static const std::map<std::string, CommandSpec, std::less<>> table = {
      {"allocate", {4, allocate}},   {"delete-pod", {1, delete_pod}},
      {"restart", {0, restart}},     {"crash-restart", {0, crash_restart}},
      {"status", {0, status}},       {"wait", {3, wait}},
      {"hide-pods", {0, hide_pods}}, {"show-pods", {0, show_pods}},
  };
  return table;
}

}  // namespace

Reply execute_command(KubeletSimulator& simulator, const std::string& line) {
  std::istringstream words(line);
  std::string name;
  words >> name;
  Arguments args;
  for (std::string word; words >> word;) args.push_back(word);
  if (name == "quit") return {"ok", true};
  const auto found = commands().find(name);
  if (found == commands().end()) return error("unknown command '" + name + "'");
  if (args.size() != found->second.arguments) {
    return error(name + " takes " + std::to_string(found->second.arguments) + " arguments");
  }
  return found->second.run(simulator, args);
}

}  // namespace dowser::testkit
