// StatusApi: dowserd's local HTTP endpoint (Boost.Beast) and its client.
//   GET /healthz              the process and its core loop answer
//   GET /readyz               handlers loaded, store reachable, plugins registered
//   GET /metrics              Prometheus text
//   GET /api/v1/status        summary: node, version, uptime, readiness, counts
//   GET /api/v1/handlers      loaded handlers and files refused
//   GET /api/v1/configurations
//   GET /api/v1/instances[?configuration=NAME]
//   GET /api/v1/instances/NAME
//   GET /api/v1/plugins
//   GET /api/v1/configuration-errors   manifests (or cluster objects) refused
//
// Threading: the server runs on its own thread. Everything it reports about
// the daemon is built on the daemon's core thread: it posts the request to
// the core io_context and waits for the answer with a timeout (503 when the
// core does not answer in time).
#pragma once

#include "metrics.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace dowser::status_api {

// ---- what the API reports (JSON field names in comments) ---------------------------

struct HandlerStatus {
  std::string name;     // name (empty for a file that failed to load)
  std::string version;  // version
  std::string path;     // path
  bool shares_devices = false;
  // state: "loaded", "stuck" (a call into it has not returned for 10 s) or
  // "failed" (the file was refused).
  std::string state;
  std::string error;  // error: why a file was refused ("<stage>: <reason>"), or the stuck call
};

struct ConfigurationStatus {
  std::string namespace_name;  // namespace
  std::string name;
  std::string handler;
  std::string resource;  // the CL plugin's resource name
  uint32_t capacity = 0;
  std::string unique_instances;  // "Required" or "Preferred"
  // state: "starting" (no snapshot yet), "discovering", "failing" (the last
  // event was an error; retried with backoff) or "refused" (by its handler).
  std::string state;
  std::string last_error;
  // Whether last_error still holds (discovery is failing, or a change was
  // refused), or discovery has recovered since; and when it happened (RFC
  // 3339 UTC; empty for a refusal).
  bool last_error_current = false;
  std::string last_error_at;
  // A newer version was refused (last_error says why): this one keeps running.
  bool change_refused = false;
  uint64_t snapshots = 0;  // snapshots received
  uint64_t errors = 0;     // discovery errors
  // What the host did not take from the handler's reports (a report
  // refused, a device left out, a report after stop), each told once until
  // it changes: how many, and the last (with when, RFC 3339 UTC).
  uint64_t report_problems = 0;
  std::string last_report_problem;
  std::string last_report_problem_at;
  uint64_t devices = 0;    // devices in the last snapshot
  uint64_t instances = 0;  // Instances of it visible on this node
  // slots: those of the Instances visible here, by state: free, offline
  // (free on a device that is offline), instance_level and
  // configuration_level (held by this node's plugins), other_nodes, unreadable.
  std::map<std::string, uint64_t> slots;
  std::string last_snapshot;  // RFC 3339 UTC, empty when none yet
};

// A Configuration manifest, or cluster object, that could not be used: kept
// until its source is fixed or removed.
struct ConfigurationErrorStatus {
  std::string source;      // source: file path, or "<namespace>/<name>" of an object
  std::string field_path;  // field: e.g. "spec.capacity"
  std::string reason;
  std::string since;  // RFC 3339 UTC of the first report of this error
};

struct SlotStatus {
  std::string name;  // <instance>-<index>
  uint32_t index = 0;
  std::string usage;  // "" free, "<node>" (IL) or "C:<vdev>:<node>" (CL)
};

struct InstanceStatus {
  std::string namespace_name;  // namespace
  std::string name;
  std::string configuration;
  bool shared = false;
  uint32_t capacity = 0;
  std::vector<std::string> nodes;
  bool here = false;     // visible on this node
  bool offline = false;  // every slot Unhealthy here (DeviceCatalog::offline)
  std::vector<SlotStatus> slots;
};

struct PluginDeviceStatus {
  std::string id;
  bool healthy = false;
};

struct PluginStatus {
  std::string resource;
  std::string kind;  // "instance" or "configuration"
  std::string socket;
  bool registered = false;
  uint64_t registrations = 0;
  uint64_t lists_sent = 0;
  std::string last_error;
  std::vector<PluginDeviceStatus> devices;  // the last list computed for the kubelet
};

struct Check {
  std::string name;  // "handlers", "store", "kubelet"
  bool ok = false;
  std::string detail;
};

struct Readiness {
  bool ready = false;
  std::vector<Check> checks;
};

struct Summary {
  std::string node;
  std::string version;
  double uptime_seconds = 0;
  Readiness readiness;  // ready, checks
  uint64_t handlers = 0;
  uint64_t configurations = 0;
  uint64_t instances = 0;
  uint64_t plugins = 0;
  uint64_t configuration_errors = 0;
};

struct DaemonStatus {
  Summary summary;
  std::vector<HandlerStatus> handlers;
  std::vector<ConfigurationStatus> configurations;
  std::vector<InstanceStatus> instances;
  std::vector<PluginStatus> plugins;
  std::vector<ConfigurationErrorStatus> configuration_errors;
};

void to_json(nlohmann::json& json, const HandlerStatus& value);
void from_json(const nlohmann::json& json, HandlerStatus& value);
void to_json(nlohmann::json& json, const ConfigurationStatus& value);
void from_json(const nlohmann::json& json, ConfigurationStatus& value);
void to_json(nlohmann::json& json, const ConfigurationErrorStatus& value);
void from_json(const nlohmann::json& json, ConfigurationErrorStatus& value);
void to_json(nlohmann::json& json, const SlotStatus& value);
void from_json(const nlohmann::json& json, SlotStatus& value);
void to_json(nlohmann::json& json, const InstanceStatus& value);
void from_json(const nlohmann::json& json, InstanceStatus& value);
void to_json(nlohmann::json& json, const PluginDeviceStatus& value);
void from_json(const nlohmann::json& json, PluginDeviceStatus& value);
void to_json(nlohmann::json& json, const PluginStatus& value);
void from_json(const nlohmann::json& json, PluginStatus& value);
void to_json(nlohmann::json& json, const Check& value);
void from_json(const nlohmann::json& json, Check& value);
void to_json(nlohmann::json& json, const Readiness& value);
void from_json(const nlohmann::json& json, Readiness& value);
void to_json(nlohmann::json& json, const Summary& value);
void from_json(const nlohmann::json& json, Summary& value);

// ---- the server -----------------------------------------------------------------------

// What the server asks of the daemon. Each runs on the core thread.
struct CoreViews {
  std::function<DaemonStatus()> status;
  std::function<Readiness()> readiness;
  std::function<void()> refresh_metrics;  // brings state-derived gauges up to date
};

struct ServerOptions {
  std::string listen = "127.0.0.1:8080";  // port 0: any free port
  std::chrono::milliseconds core_timeout = std::chrono::seconds(2);
  std::chrono::milliseconds io_timeout = std::chrono::seconds(10);  // per request read/write
};

// "HOST:PORT" or "[IPv6]:PORT" with a numeric address; throws
// std::invalid_argument saying what is wrong.
boost::asio::ip::tcp::endpoint parse_listen_address(std::string_view text);

// An HTTP answer, for the server's routes and the client.
struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

// Runs `work` on the core and waits up to `timeout`; nullopt when the core
// did not answer in time (stalled or stopped). Exceptions are rethrown.
template <typename T>
std::optional<T> call_on_core(boost::asio::io_context& core, std::function<T()> work,
                              std::chrono::milliseconds timeout);

class StatusServer {
 public:
  StatusServer(boost::asio::io_context& core, metrics::Registry& registry, CoreViews views,
               ServerOptions options);
  ~StatusServer();  // stops
  StatusServer(const StatusServer&) = delete;
  StatusServer& operator=(const StatusServer&) = delete;

  // Binds (throws std::runtime_error when it cannot), then serves on its own
  // thread.
  void start();
  void stop();  // idempotent; joins the thread
  // The bound address, e.g. "127.0.0.1:43121" (the real port when 0 was asked).
  std::string address() const;

  // Answers one GET for `target` (path and query). Blocks on the core.
  Response handle(std::string_view target) const;

 private:
  class Listener;
  Response health() const;
  Response ready() const;
  Response metrics() const;
  Response api(std::string_view path, std::string_view query) const;

  boost::asio::io_context& core_;
  metrics::Registry& registry_;
  CoreViews views_;
  ServerOptions options_;
  boost::asio::io_context io_;
  std::shared_ptr<Listener> listener_;
  boost::asio::ip::tcp::endpoint bound_;
  std::thread thread_;
};

// ---- the client -----------------------------------------------------------------------

// The server could not be reached or did not answer in time.
class Unreachable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// GET url ("http://HOST[:PORT]/path"). Throws Unreachable, or
// std::invalid_argument for a URL it cannot use.
Response http_get(std::string_view url, std::chrono::milliseconds timeout);
// Why http_get cannot use url, or "" if it can.
std::string http_url_problem(std::string_view url);

// ---- template definition ------------------------------------------------------------

template <typename T>
std::optional<T> call_on_core(boost::asio::io_context& core, std::function<T()> work,
                              std::chrono::milliseconds timeout) {
  auto answer = std::make_shared<std::promise<T>>();
  auto future = answer->get_future();
  boost::asio::post(core, [answer, work = std::move(work)] {
    try {
      answer->set_value(work());
    } catch (...) {
      answer->set_exception(std::current_exception());
    }
  });
  if (future.wait_for(timeout) != std::future_status::ready) return std::nullopt;
  return future.get();
}

}  // namespace dowser::status_api
