// dowserd: exposes the devices discovery handlers find to the kubelet.
#include "command_line.hpp"
#include "daemon.hpp"
#include "log_lines.hpp"
#include "naming.hpp"
#include "status_api.hpp"
#include "thread_names.hpp"

#include <grpc/support/log.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <csignal>
#include <map>
#include <string_view>

namespace {

// gRPC writes its own lines to stderr in its own format; through spdlog the
// log keeps one format and one level setting. Its errors are warnings here:
// dowserd reports what they cause in its own words (a plugin that cannot
// listen, a kubelet that cannot be reached).
void log_grpc_line(gpr_log_func_args* line) {
  const auto level = line->severity == GPR_LOG_SEVERITY_DEBUG  ? spdlog::level::debug
                     : line->severity == GPR_LOG_SEVERITY_INFO ? spdlog::level::info
                                                               : spdlog::level::warn;
  std::string_view file = line->file != nullptr ? line->file : "";
  file = file.substr(file.rfind('/') + 1);  // npos + 1 is 0: the whole name
  spdlog::log(level, "gRPC: {} ({}:{})", line->message, file, line->line);
}

}  // namespace

int main(int argc, char** argv) {
  dowser::daemon::DaemonOptions options;
  const auto default_node = dowser::naming::default_node_name();
  options.node_name = default_node.name;
  std::string log_level = "info";
  long reclaim_interval_ms = options.reclaim_interval.count();
  long reclaim_grace_ms = options.reclaim_grace.count();
  long handler_rescan_ms = options.handler_rescan.count();
  // How long to wait for another dowserd on the same kubelet directory, or
  // for the same node in the same state directory, that is still stopping (a
  // rolling update) before giving up: for each of the two locks.
  long lock_wait_ms = 10'000;
  long dead_node_grace_seconds =
      std::chrono::duration_cast<std::chrono::seconds>(options.dead_node_grace).count();
  long event_refresh_seconds =
      std::chrono::duration_cast<std::chrono::seconds>(options.event_refresh).count();
  std::string kubeconfig;
  const std::map<std::string, dowser::daemon::StoreKind> stores{
      {"file", dowser::daemon::StoreKind::file},
      {"kubernetes", dowser::daemon::StoreKind::kubernetes}};
  const std::map<std::string, dowser::daemon::ConfigSourceKind> sources{
      {"directory", dowser::daemon::ConfigSourceKind::directory},
      {"kubernetes", dowser::daemon::ConfigSourceKind::kubernetes}};
  std::string store = "file";
  std::string config_source = "directory";

  CLI::App app{"dowserd: discovers leaf devices and exposes them to the kubelet"};
  app.set_version_flag("--version", DOWSER_VERSION);
  options.version = DOWSER_VERSION;
  // The last of a repeated option wins, so that a flag given in $DOWSERD_OPTS
  // (/etc/dowser/dowserd.env) or a DaemonSet's args can be overridden after it.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  auto* node_name_option = app.add_option("--node-name", options.node_name,
                                          "this node's name (default $NODE_NAME, else hostname)");
  node_name_option->capture_default_str();
  app.add_option("--config-dir", options.config_dir,
                 "directory of Configuration manifests (watched)")
      ->capture_default_str();
  app.add_option("--handler-dir", options.handler_dir, "directory of discovery handler .so files")
      ->capture_default_str();
  app.add_option("--state-dir", options.state_dir, "where Instances and claims are kept")
      ->capture_default_str();
  app.add_option("--kubelet-dir", options.kubelet_dir, "the kubelet's device-plugin directory")
      ->capture_default_str();
  app.add_option("--kubelet-lock-wait-ms", lock_wait_ms,
                 "how long to wait for another dowserd serving the same --kubelet-dir, or the "
                 "same --node-name with the same --state-dir, to stop")
      ->capture_default_str()
      ->check(dowser::command_line::whole_number(0, 600000, "ms"));
  app.add_option("--podresources-socket", options.podresources_socket,
                 "the kubelet's pod-resources socket")
      ->capture_default_str();
  app.add_option("--resource-domain", options.resource_domain, "domain of resource names")
      ->capture_default_str();
  app.add_option("--reclaim-interval-ms", reclaim_interval_ms,
                 "how often to compare claims with the kubelet's pod resources")
      ->capture_default_str()
      ->check(dowser::command_line::whole_number(10, 3600000, "ms"));
  app.add_option("--reclaim-grace-ms", reclaim_grace_ms,
                 "how long a claim no container holds is kept")
      ->capture_default_str()
      ->check(dowser::command_line::whole_number(0, 86400000, "ms"));
  app.add_option("--handler-rescan-ms", handler_rescan_ms,
                 "how often to look for new handlers in the handler directory")
      ->capture_default_str()
      ->check(dowser::command_line::whole_number(10, 3600000, "ms"));
  app.add_option("--http-listen", options.http_listen,
                 "address of /healthz, /readyz, /metrics and the status API (HOST:PORT, port 0: "
                 "any free port; empty: none)")
      ->capture_default_str();
  app.add_option("--store", store,
                 "where Instances live: file (under --state-dir) or kubernetes (instances.akri.sh "
                 "on the API server)")
      ->capture_default_str()
      ->check(CLI::IsMember(stores));
  app.add_option("--config-source", config_source,
                 "where Configurations come from: directory (--config-dir) or kubernetes "
                 "(configurations.akri.sh, with Secrets and ConfigMaps for discoveryProperties)")
      ->capture_default_str()
      ->check(CLI::IsMember(sources));
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file of the API server (default $KUBECONFIG, else in-cluster when "
                 "KUBERNETES_SERVICE_HOST is set)");
  app.add_option("--namespace", options.kube_namespace,
                 "the only namespace to read Configurations, Secrets, ConfigMaps and Instances "
                 "from (default: all)");
  app.add_option("--dead-node-grace-seconds", dead_node_grace_seconds,
                 "how long a node may stay NotReady before its claims are scrubbed (kubernetes "
                 "store)")
      ->capture_default_str()
      ->check(dowser::command_line::whole_number(0, 31536000, "seconds"));
  app.add_option("--event-refresh-seconds", event_refresh_seconds,
                 "how often the Warning Events of problems that stand are posted again "
                 "(kubernetes Configuration source): one the API server dropped (--event-ttl) "
                 "comes back within 5/4 of it")
      ->capture_default_str()
      ->check(dowser::command_line::whole_number(1, 86400, "seconds"));
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every mistake on the command line exits 2.
    return app.exit(e) == 0 ? 0 : 2;
  }

  spdlog::set_default_logger(spdlog::stderr_color_mt("dowserd"));  // logs go to stderr
  dowser::log_lines::use_single_line_pattern(*spdlog::default_logger());
  dowser::report_fatal_signals("dowserd");
  spdlog::set_level(spdlog::level::from_str(log_level));
  gpr_set_log_function(log_grpc_line);
  options.store = stores.at(store);
  options.config_source = sources.at(config_source);
  options.reclaim_interval = std::chrono::milliseconds(reclaim_interval_ms);
  options.reclaim_grace = std::chrono::milliseconds(reclaim_grace_ms);
  options.handler_rescan = std::chrono::milliseconds(handler_rescan_ms);
  options.dead_node_grace = std::chrono::seconds(dead_node_grace_seconds);
  options.event_refresh = std::chrono::seconds(event_refresh_seconds);
  // Checked once here, so no invalid resource name ever reaches the kubelet.
  if (auto problem = dowser::naming::extended_resource_name_problem(options.resource_domain + "/x");
      !problem.empty()) {
    spdlog::error("--resource-domain '{}' cannot prefix resource names: {}",
                  options.resource_domain, problem);
    return 2;
  }
  if (!options.http_listen.empty()) {
    try {
      dowser::status_api::parse_listen_address(options.http_listen);
    } catch (const std::invalid_argument& e) {
      spdlog::error("--http-listen: {}", e.what());
      return 2;
    }
  }
  if (options.node_name.empty()) {
    spdlog::error("no node name: pass --node-name or set NODE_NAME");
    return 2;
  }
  if (auto problem = dowser::naming::node_name_problem(options.node_name); !problem.empty()) {
    spdlog::error("{}: {}",
                  dowser::command_line::value_and_origin(*node_name_option, options.node_name,
                                                         default_node.origin),
                  problem);
    return 2;
  }
  if (options.store == dowser::daemon::StoreKind::kubernetes ||
      options.config_source == dowser::daemon::ConfigSourceKind::kubernetes) {
    // Loaded only now: a dowserd that never talks to an API server maps no
    // libcurl (nor its TLS, Kerberos and LDAP libraries).
    try {
      options.kubernetes =
          dowser::kubernetes_backend::load(dowser::kubernetes_backend::default_module_path(),
                                           {kubeconfig, options.kube_namespace, options.node_name});
    } catch (const dowser::kubernetes_backend::BackendError& e) {
      spdlog::error("Kubernetes: {}", e.what());
      return 2;
    }
  }
  // Until the daemon takes it over (to log it), SIGHUP must not end dowserd
  // (while it waits for a lock, say): killed by it, it would leave no log line
  // and systemd would count a clean exit, not restarting it.
  std::signal(SIGHUP, SIG_IGN);
  // A handler writing to a peer that hung up (a camera's socket) must get
  // EPIPE, not end dowserd: handlers may not set signal dispositions (T6).
  std::signal(SIGPIPE, SIG_IGN);
  // Handlers run in this process: one calling exit() must not end it unsaid.
  const dowser::ExitWatch exits_from_elsewhere;
  try {
    // Before anything is discovered or written: a second dowserd stops here.
    // Always in this order, so that two starting at once cannot each hold
    // the lock the other waits for.
    using dowser::daemon::DaemonLock;
    const auto lock_wait = std::chrono::milliseconds(lock_wait_ms);
    DaemonLock one_per_kubelet(DaemonLock::kubelet_dir(options.kubelet_dir), lock_wait);
    const DaemonLock one_per_node(DaemonLock::node(options.state_dir, options.node_name),
                                  lock_wait);
    dowser::daemon::Daemon daemon(options);
    daemon.on_kubelet_dir_recreated([&one_per_kubelet] {
      try {
        one_per_kubelet.retake();
      } catch (const std::exception& e) {  // serving on all the same: the kubelet decides
        spdlog::error("dowserd: the kubelet directory was re-created: {}", e.what());
      }
    });
    return daemon.run();
  } catch (const std::exception& e) {
    spdlog::error("dowserd: {}", e.what());
    return 1;
  }
}
