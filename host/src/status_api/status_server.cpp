// The HTTP server: one thread of its own, Boost.Beast sessions with
// keep-alive and per-request timeouts; every answer about the daemon comes
// from the core thread.
#include "status_api.hpp"
#include "thread_names.hpp"

#include <spdlog/spdlog.h>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <charconv>
#include <map>

namespace dowser::status_api {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

constexpr std::string_view kText = "text/plain; charset=utf-8";
constexpr size_t kBodyLimit = size_t{8} << 10;  // a GET carries no body worth reading

Response text(int status, std::string body) {
  return {status, std::string(kText), std::move(body)};
}

Response json(int status, const nlohmann::json& value) {
  // Device properties may hold anything: never fail on invalid UTF-8.
  return {status, "application/json",
          value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"};
}

Response error(int status, const std::string& message) {
  return json(status, {{"error", message}});
}

std::string percent_decode(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned value = 0;
    if (text[i] == '%' && i + 2 < text.size() &&
        std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16).ptr ==
            text.data() + i + 3) {
      out += static_cast<char>(value);
      i += 2;
    } else {
      out += text[i] == '+' ? ' ' : text[i];
    }
  }
  return out;
}

std::map<std::string, std::string> parse_query(std::string_view query) {
  std::map<std::string, std::string> values;
  while (!query.empty()) {
    auto end = query.find('&');
    auto pair = query.substr(0, end);
    auto equals = pair.find('=');
    values[percent_decode(pair.substr(0, equals))] =
        equals == std::string_view::npos ? "" : percent_decode(pair.substr(equals + 1));
    query = end == std::string_view::npos ? std::string_view{} : query.substr(end + 1);
  }
  return values;
}

std::string readiness_text(const Readiness& readiness) {
  std::string body;
  for (const auto& check : readiness.checks) {
    body.append(check.ok ? "[+]" : "[-]").append(check.name);
    if (!check.detail.empty()) body.append(": ").append(check.detail);
    body += '\n';
  }
  body += readiness.ready ? "ready\n" : "not ready\n";
  return body;
}

// Names are unique within a namespace only: `namespace` narrows any
// listing, and is how one Instance of a name several namespaces hold is
// asked for.
template <typename Item>
bool in_namespace(const Item& item, const std::string& wanted) {
  return wanted.empty() || item.namespace_name == wanted;
}

std::string in_namespace_text(const std::string& wanted) {
  return wanted.empty() ? "" : " in namespace " + wanted;
}

template <typename Item>
nlohmann::json items(const std::vector<Item>& list) {
  return {{"items", list}};
}

// `configuration` and `namespace` narrow the list. A misspelt Configuration
// is an error, not an empty list (Instances a removed Configuration left
// behind are still listed).
Response instances(DaemonStatus& status, std::map<std::string, std::string> query) {
  const auto& configuration = query["configuration"];
  const auto& namespace_name = query["namespace"];
  std::vector<InstanceStatus> selected;
  for (auto& instance : status.instances)
    if (in_namespace(instance, namespace_name) &&
        (configuration.empty() || instance.configuration == configuration))
      selected.push_back(std::move(instance));
  auto known = [&](const ConfigurationStatus& c) {
    return c.name == configuration && in_namespace(c, namespace_name);
  };
  if (!configuration.empty() && selected.empty() &&
      std::none_of(status.configurations.begin(), status.configurations.end(), known))
    return error(404,
                 "no Configuration named " + configuration + in_namespace_text(namespace_name));
  return json(200, items(selected));
}

// 409 when the name is held in several namespaces and none was given: the
// caller must say which, rather than get whichever came first.
Response one_instance(const DaemonStatus& status, const std::string& name,
                      const std::string& namespace_name) {
  std::vector<const InstanceStatus*> found;
  for (const auto& instance : status.instances)
    if (instance.name == name && in_namespace(instance, namespace_name)) found.push_back(&instance);
  if (found.empty())
    return error(404, "no Instance named " + name + in_namespace_text(namespace_name));
  if (found.size() == 1) return json(200, *found.front());
  std::string namespaces;
  for (const auto* instance : found)
    namespaces += (namespaces.empty() ? "" : ", ") + instance->namespace_name;
  return error(409, "Instance " + name + " is in namespaces " + namespaces +
                        "; name the namespace (?namespace=NAME, dowserctl -n NAME)");
}

}  // namespace

tcp::endpoint parse_listen_address(std::string_view text) {
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size())
    throw std::invalid_argument("'" + std::string(text) + "' is not HOST:PORT");
  auto host = text.substr(0, colon);
  if (host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  auto port_text = text.substr(colon + 1);
  unsigned port = 0;
  auto [end, failure] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (failure != std::errc() || end != port_text.data() + port_text.size() || port > 65535)
    throw std::invalid_argument("'" + std::string(port_text) + "' is not a port number");
  boost::system::error_code bad;
  auto address = boost::asio::ip::make_address(std::string(host), bad);
  if (bad) throw std::invalid_argument("'" + std::string(host) + "' is not an IP address");
  return {address, static_cast<unsigned short>(port)};
}

// ---- sessions and the acceptor ----------------------------------------------------

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const StatusServer& server, std::chrono::milliseconds timeout)
      : stream_(std::move(socket)), server_(server), timeout_(timeout) {}

  void read() {
    parser_.emplace();
    parser_->header_limit(kBodyLimit);
    parser_->body_limit(kBodyLimit);
    stream_.expires_after(timeout_);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code error, size_t) {
                       if (!error) self->answer();
                     });
  }

 private:
  void answer() {
    const auto& request = parser_->get();
    Response result;
    if (request.method() != http::verb::get && request.method() != http::verb::head) {
      result = text(405, "only GET and HEAD are supported\n");
    } else {
      result = server_.handle(std::string_view(request.target().data(), request.target().size()));
    }
    response_ = {};
    response_.version(request.version());
    response_.result(static_cast<unsigned>(result.status));
    response_.set(http::field::server, "dowserd");
    response_.set(http::field::content_type, result.content_type);
    if (result.status == 405) response_.set(http::field::allow, "GET, HEAD");
    response_.keep_alive(request.keep_alive());
    response_.body() = std::move(result.body);
    response_.prepare_payload();
    if (request.method() == http::verb::head) response_.body().clear();  // length stays
    stream_.expires_after(timeout_);
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code error, size_t) {
                        if (error) return;
                        if (self->response_.keep_alive()) {
                          self->read();
                        } else {
                          beast::error_code ignored;
                          self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
                        }
                      });
  }

  beast::tcp_stream stream_;
  const StatusServer& server_;
  std::chrono::milliseconds timeout_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
};

class StatusServer::Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(boost::asio::io_context& io, const tcp::endpoint& endpoint, const StatusServer& server,
           std::chrono::milliseconds timeout)
      : acceptor_(io), retry_timer_(io), server_(server), timeout_(timeout) {
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
  }

  tcp::endpoint endpoint() const { return acceptor_.local_endpoint(); }

  void accept() {
    acceptor_.async_accept(
        [self = shared_from_this()](beast::error_code error, tcp::socket socket) {
          if (error == boost::asio::error::operation_aborted) return;
          if (error) {
            self->accept_after_failure(error);
            return;
          }
          self->failing_ = false;
          std::make_shared<Session>(std::move(socket), self->server_, self->timeout_)->read();
          self->accept();
        });
  }

  void close() {
    beast::error_code ignored;
    acceptor_.close(ignored);
    retry_timer_.cancel();
  }

 private:
  // Out of file descriptors (EMFILE) fails every accept at once: trying
  // again right away would spin this thread. Told once while it lasts.
  void accept_after_failure(const beast::error_code& error) {
    if (!failing_) spdlog::warn("status API: cannot accept a connection: {}", error.message());
    failing_ = true;
    retry_timer_.expires_after(std::chrono::milliseconds(100));
    retry_timer_.async_wait([self = shared_from_this()](beast::error_code waited) {
      if (!waited) self->accept();
    });
  }

  tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_timer_;
  bool failing_ = false;
  const StatusServer& server_;
  std::chrono::milliseconds timeout_;
};

// ---- the server -----------------------------------------------------------------------

StatusServer::StatusServer(boost::asio::io_context& core, metrics::Registry& registry,
                           CoreViews views, ServerOptions options)
    : core_(core), registry_(registry), views_(std::move(views)), options_(std::move(options)) {}

StatusServer::~StatusServer() { stop(); }

void StatusServer::start() {
  auto endpoint = parse_listen_address(options_.listen);
  try {
    listener_ = std::make_shared<Listener>(io_, endpoint, *this, options_.io_timeout);
  } catch (const boost::system::system_error& e) {
    throw std::runtime_error("cannot listen on " + options_.listen + ": " + e.code().message());
  }
  bound_ = listener_->endpoint();
  listener_->accept();
  thread_ = std::thread([this] {
    name_this_thread("status-http");
    io_.run();
  });
}

void StatusServer::stop() {
  if (!thread_.joinable()) return;
  io_.stop();  // sessions in flight are dropped with the io_context
  thread_.join();
  listener_->close();  // no more connections from now on
}

std::string StatusServer::address() const {
  auto host = bound_.address().to_string();
  if (bound_.address().is_v6()) host = "[" + host + "]";
  return host + ":" + std::to_string(bound_.port());
}

Response StatusServer::handle(std::string_view target) const {
  auto question = target.find('?');
  auto path = target.substr(0, question);
  auto query =
      question == std::string_view::npos ? std::string_view{} : target.substr(question + 1);
  try {
    if (path == "/healthz") return health();
    if (path == "/readyz") return ready();
    if (path == "/metrics") return metrics();
    if (path.rfind("/api/v1/", 0) == 0) return api(path.substr(8), query);
    if (path == "/")
      return text(200,
                  "dowserd: /healthz /readyz /metrics /api/v1/status /api/v1/handlers "
                  "/api/v1/configurations /api/v1/configuration-errors /api/v1/instances "
                  "/api/v1/plugins\n");
    return text(404, "not found\n");
  } catch (const std::exception& e) {
    spdlog::error("status API {}: {}", path, e.what());
    return error(500, e.what());
  }
}

Response StatusServer::health() const {
  auto alive = call_on_core<bool>(
      core_, [] { return true; }, options_.core_timeout);
  if (!alive)
    return text(503, "the core loop did not answer within " +
                         std::to_string(options_.core_timeout.count()) + " ms\n");
  return text(200, "ok\n");
}

Response StatusServer::ready() const {
  auto readiness = call_on_core<Readiness>(core_, views_.readiness, options_.core_timeout);
  if (!readiness) return text(503, "the core loop did not answer\nnot ready\n");
  return text(readiness->ready ? 200 : 503, readiness_text(*readiness));
}

Response StatusServer::metrics() const {
  // State-derived gauges are refreshed on the core first; if it does not
  // answer, the last values are still worth serving.
  auto refreshed = call_on_core<bool>(
      core_,
      [refresh = views_.refresh_metrics] {
        refresh();
        return true;
      },
      options_.core_timeout);
  if (!refreshed) spdlog::warn("/metrics: the core loop did not answer; gauges may be stale");
  return {200, std::string(metrics::kContentType), registry_.expose()};
}

Response StatusServer::api(std::string_view path, std::string_view query) const {
  auto status = call_on_core<DaemonStatus>(core_, views_.status, options_.core_timeout);
  if (!status) return error(503, "the core loop did not answer");
  if (path == "status") return json(200, status->summary);
  if (path == "handlers") return json(200, items(status->handlers));
  if (path == "configurations") {
    auto& listed = status->configurations;
    std::erase_if(listed, [namespace_name = parse_query(query)["namespace"]](const auto& c) {
      return !in_namespace(c, namespace_name);
    });
    return json(200, items(listed));
  }
  if (path == "plugins") return json(200, items(status->plugins));
  if (path == "configuration-errors") return json(200, items(status->configuration_errors));
  if (path == "instances") return instances(*status, parse_query(query));
  if (path.rfind("instances/", 0) == 0)
    return one_instance(*status, percent_decode(path.substr(10)), parse_query(query)["namespace"]);
  return error(404, "no such resource: /api/v1/" + std::string(path));
}

}  // namespace dowser::status_api
