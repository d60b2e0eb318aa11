// A minimal HTTP/1.1 GET client for dowserctl and the tests: one request,
// one deadline for the whole exchange.
#include "status_api.hpp"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <charconv>

namespace dowser::status_api {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

struct Url {
  std::string host;
  std::string port = "80";
  std::string target = "/";
};

Url parse_url(std::string_view url) {
  constexpr std::string_view scheme = "http://";
  if (url.rfind(scheme, 0) != 0)
    throw std::invalid_argument("'" + std::string(url) + "' is not an http:// URL");
  auto rest = url.substr(scheme.size());
  auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  Url parsed;
  if (slash != std::string_view::npos) parsed.target = std::string(rest.substr(slash));
  auto bracket = authority.rfind(']');
  auto colon = authority.rfind(':');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    parsed.port = std::string(authority.substr(colon + 1));
    authority = authority.substr(0, colon);
  }
  if (authority.size() > 1 && authority.front() == '[' && authority.back() == ']')
    authority = authority.substr(1, authority.size() - 2);
  parsed.host = std::string(authority);
  if (parsed.host.empty() || parsed.port.empty())
    throw std::invalid_argument("'" + std::string(url) + "' has no host or port");
  unsigned port = 0;
  const char* end = parsed.port.data() + parsed.port.size();
  if (std::from_chars(parsed.port.data(), end, port).ptr != end || port < 1 || port > 65535)
    throw std::invalid_argument("'" + std::string(url) + "': the port must be 1 to 65535");
  return parsed;
}

}  // namespace

std::string http_url_problem(std::string_view url) {
  try {
    parse_url(url);
    return "";
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
}

Response http_get(std::string_view url, std::chrono::milliseconds timeout) {
  auto where = parse_url(url);
  boost::asio::io_context io;
  tcp::resolver resolver(io);
  beast::tcp_stream stream(io);
  http::request<http::empty_body> request{http::verb::get, where.target, 11};
  request.set(http::field::host, where.host);
  request.set(http::field::user_agent, "dowserctl");
  request.keep_alive(false);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(uint64_t{64} << 20);  // 64 MiB: a large cluster's Instances
  beast::error_code failure;
  bool answered = false;

  stream.expires_after(timeout);  // one deadline for connect, write and read
  resolver.async_resolve(where.host, where.port, [&](beast::error_code error, auto endpoints) {
    if (error) return void(failure = error);
    stream.async_connect(endpoints, [&](beast::error_code error, const tcp::endpoint&) {
      if (error) return void(failure = error);
      http::async_write(stream, request, [&](beast::error_code error, size_t) {
        if (error) return void(failure = error);
        http::async_read(stream, buffer, parser, [&](beast::error_code error, size_t) {
          failure = error;
          answered = !error;
        });
      });
    });
  });
  io.run_for(timeout + std::chrono::milliseconds(100));  // the resolver has no deadline of its own
  if (!answered) {
    std::string why = failure ? failure.message() : "no answer in time";
    if (failure == beast::error::timeout)
      why = "no answer within " + std::to_string(timeout.count()) + " ms";
    throw Unreachable("cannot reach " + std::string(url) + ": " + why);
  }
  const auto& response = parser.get();
  Response result;
  result.status = static_cast<int>(response.result_int());
  result.content_type = std::string(response[http::field::content_type]);
  result.body = response.body();
  return result;
}

}  // namespace dowser::status_api
