// The status server against a stand-in core loop: routes, status codes,
// JSON, the core-thread rule and the timeout; and the client.
#include "status_api.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include "eventually.hpp"
#include "log_capture.hpp"

#include <atomic>
#include <thread>

namespace dowser::status_api {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

DaemonStatus sample_status() {
  DaemonStatus status;
  status.summary.node = "node-a";
  status.summary.version = "1.2.3";
  status.summary.readiness = {true, {{"handlers", true, "1 loaded"}}};
  status.summary.instances = 2;
  status.handlers = {{"debugEcho", "0.1.0", "/h/libecho.so", false, "loaded", ""},
                     {"", "", "/h/libbad.so", false, "failed", "open: not an ELF file"}};
  status.configurations = {{"default",
                            "cams",
                            "debugEcho",
                            "akri.sh/cams",
                            2,
                            "Required",
                            "discovering",
                            "",
                            false,
                            "",
                            true,
                            3,
                            0,
                            1,
                            "report refused: device id 'cam0' appears twice in one snapshot",
                            "2024-01-01T00:00:00Z",
                            2,
                            2,
                            {{"free", 3}, {"configuration_level", 1}},
                            "2024-01-01T00:00:00Z"}};
  status.instances = {{"default",
                       "cams-aaaaaa",
                       "cams",
                       false,
                       2,
                       {"node-a"},
                       true,
                       false,
                       {{"cams-aaaaaa-0", 0, "C:0:node-a"}, {"cams-aaaaaa-1", 1, ""}}},
                      {"default",
                       "mics-bbbbbb",
                       "mics",
                       true,
                       1,
                       {"node-a", "node-b"},
                       true,
                       true,
                       {{"mics-bbbbbb-0", 0, "node-b"}}}};
  status.plugins = {{"akri.sh/cams",
                     "configuration",
                     "akri.sh_cams-1.sock",
                     true,
                     1,
                     4,
                     "",
                     {{"0", true}, {"1", false}}}};
  status.configuration_errors = {{"/etc/dowser/configurations/bad.yaml", "spec.capacity",
                                  "must be an integer from 1 to 1000000", "2026-11-30T12:00:00Z"}};
  status.summary.configuration_errors = 1;
  return status;
}

// A core loop on its own thread, and a server whose views run on it.
class StatusServerTest : public ::testing::Test {
 protected:
  StatusServerTest() : work_(core_.get_executor()) {
    core_thread_ = std::thread([this] { core_.run(); });
  }
  ~StatusServerTest() override {
    server_.reset();
    work_.reset();
    core_.stop();
    core_thread_.join();
  }

  void start(ServerOptions options = {}) {
    options.listen = "127.0.0.1:0";
    CoreViews views{[this] {
                      on_core_ = on_core_ && std::this_thread::get_id() == core_thread_.get_id();
                      return status_;
                    },
                    [this] {
                      on_core_ = on_core_ && std::this_thread::get_id() == core_thread_.get_id();
                      return status_.summary.readiness;
                    },
                    [this] {
                      on_core_ = on_core_ && std::this_thread::get_id() == core_thread_.get_id();
                      refreshes_.with().inc();
                    }};
    server_ = std::make_unique<StatusServer>(core_, registry_, views, options);
    server_->start();
  }

  Response get(const std::string& target) {
    return http_get("http://" + server_->address() + target, 5s);
  }

  nlohmann::json get_json(const std::string& target) {
    auto response = get(target);
    EXPECT_EQ(response.status, 200) << target << ": " << response.body;
    EXPECT_EQ(response.content_type, "application/json");
    return nlohmann::json::parse(response.body);
  }

  boost::asio::io_context core_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread core_thread_;
  metrics::Registry registry_;
  metrics::Family<metrics::Counter>& refreshes_ =
      registry_.counter("test_refreshes_total", "Refreshes.");
  DaemonStatus status_ = sample_status();  // read on the core thread only
  std::atomic<bool> on_core_{true};
  std::unique_ptr<StatusServer> server_;
};

TEST_F(StatusServerTest, HealthzAnswersOnceTheCoreLoopDoes) {
  start();
  auto response = get("/healthz");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "ok\n");
}

TEST_F(StatusServerTest, ReadyzListsEveryCheckAndFailsWhenOneFails) {
  start();
  EXPECT_EQ(get("/readyz").status, 200);
  boost::asio::post(core_, [this] {
    status_.summary.readiness = {
        false, {{"handlers", true, "1 loaded"}, {"kubelet", false, "0 of 2 plugins registered"}}};
  });
  auto response = get("/readyz");
  EXPECT_EQ(response.status, 503);
  EXPECT_EQ(response.body,
            "[+]handlers: 1 loaded\n[-]kubelet: 0 of 2 plugins registered\nnot ready\n");
  EXPECT_TRUE(on_core_);
}

TEST_F(StatusServerTest, MetricsRefreshesOnTheCoreThenExposesTheRegistry) {
  start();
  auto first = get("/metrics");
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.content_type, metrics::kContentType);
  EXPECT_THAT(first.body, HasSubstr("test_refreshes_total 1\n"));
  EXPECT_THAT(get("/metrics").body, HasSubstr("test_refreshes_total 2\n"));
  EXPECT_TRUE(on_core_);
}

TEST_F(StatusServerTest, ApiServesEachPartOfTheStatusAsJson) {
  start();
  auto summary = get_json("/api/v1/status").get<Summary>();
  EXPECT_EQ(summary.node, "node-a");
  EXPECT_EQ(summary.version, "1.2.3");
  EXPECT_TRUE(summary.readiness.ready);
  EXPECT_EQ(summary.instances, 2u);

  auto handlers = get_json("/api/v1/handlers")["items"].get<std::vector<HandlerStatus>>();
  ASSERT_EQ(handlers.size(), 2u);
  EXPECT_EQ(handlers[1].error, "open: not an ELF file");

  auto configurations =
      get_json("/api/v1/configurations")["items"].get<std::vector<ConfigurationStatus>>();
  ASSERT_EQ(configurations.size(), 1u);
  EXPECT_EQ(configurations[0].namespace_name, "default");
  EXPECT_EQ(configurations[0].state, "discovering");
  EXPECT_EQ(configurations[0].snapshots, 3u);
  EXPECT_EQ(configurations[0].slots,
            (std::map<std::string, uint64_t>{{"free", 3}, {"configuration_level", 1}}));

  auto plugins = get_json("/api/v1/plugins")["items"].get<std::vector<PluginStatus>>();
  ASSERT_EQ(plugins.size(), 1u);
  EXPECT_EQ(plugins[0].socket, "akri.sh_cams-1.sock");
  ASSERT_EQ(plugins[0].devices.size(), 2u);
  EXPECT_FALSE(plugins[0].devices[1].healthy);

  auto errors = get_json("/api/v1/configuration-errors")["items"]
                    .get<std::vector<ConfigurationErrorStatus>>();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].source, "/etc/dowser/configurations/bad.yaml");
  EXPECT_EQ(errors[0].field_path, "spec.capacity");
  EXPECT_EQ(errors[0].since, "2026-11-30T12:00:00Z");
  EXPECT_EQ(summary.configuration_errors, 1u);
  EXPECT_TRUE(on_core_);
}

TEST_F(StatusServerTest, InstancesFilterByConfigurationAndOneInstanceHasItsSlots) {
  start();
  auto all = get_json("/api/v1/instances")["items"].get<std::vector<InstanceStatus>>();
  EXPECT_EQ(all.size(), 2u);
  auto mics =
      get_json("/api/v1/instances?configuration=mics")["items"].get<std::vector<InstanceStatus>>();
  ASSERT_EQ(mics.size(), 1u);
  EXPECT_EQ(mics[0].name, "mics-bbbbbb");
  EXPECT_EQ(mics[0].nodes, (std::vector<std::string>{"node-a", "node-b"}));
  EXPECT_TRUE(mics[0].offline);

  auto cams = get_json("/api/v1/instances/cams-aaaaaa").get<InstanceStatus>();
  ASSERT_EQ(cams.slots.size(), 2u);
  EXPECT_EQ(cams.slots[0].usage, "C:0:node-a");
  EXPECT_EQ(cams.slots[1].usage, "");

  auto missing = get("/api/v1/instances/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_THAT(missing.body, HasSubstr("no Instance named nope"));
}

// Names are unique within a namespace only: a name two namespaces hold is
// not answered with whichever came first.
TEST_F(StatusServerTest, NamespacesNarrowTheListsAndTellOneInstanceFromAnother) {
  auto lab = status_.instances[0];
  lab.namespace_name = "lab";
  lab.slots[0].usage = "node-a";
  status_.instances.push_back(lab);
  auto lab_configuration = status_.configurations[0];
  lab_configuration.namespace_name = "lab";
  status_.configurations.push_back(lab_configuration);
  start();

  auto ambiguous = get("/api/v1/instances/cams-aaaaaa");
  EXPECT_EQ(ambiguous.status, 409);
  EXPECT_THAT(ambiguous.body, HasSubstr("Instance cams-aaaaaa is in namespaces default, lab"));
  auto in_lab = get_json("/api/v1/instances/cams-aaaaaa?namespace=lab").get<InstanceStatus>();
  EXPECT_EQ(in_lab.namespace_name, "lab");
  EXPECT_EQ(in_lab.slots[0].usage, "node-a");
  EXPECT_EQ(get_json("/api/v1/instances/cams-aaaaaa?namespace=default")["slots"][0]["usage"],
            "C:0:node-a");
  auto elsewhere = get("/api/v1/instances/mics-bbbbbb?namespace=lab");
  EXPECT_EQ(elsewhere.status, 404);
  EXPECT_THAT(elsewhere.body, HasSubstr("no Instance named mics-bbbbbb in namespace lab"));

  auto lab_instances = get_json("/api/v1/instances?namespace=lab")["items"];
  ASSERT_EQ(lab_instances.size(), 1u);
  EXPECT_EQ(lab_instances[0]["namespace"], "lab");
  EXPECT_EQ(get_json("/api/v1/instances?configuration=cams")["items"].size(), 2u);
  EXPECT_EQ(get_json("/api/v1/instances?configuration=cams&namespace=default")["items"].size(), 1u);
  auto no_mics_in_lab = get("/api/v1/instances?configuration=mics&namespace=lab");
  EXPECT_EQ(no_mics_in_lab.status, 404);
  EXPECT_THAT(no_mics_in_lab.body, HasSubstr("no Configuration named mics in namespace lab"));

  EXPECT_EQ(get_json("/api/v1/configurations")["items"].size(), 2u);
  auto lab_configurations = get_json("/api/v1/configurations?namespace=lab")["items"];
  ASSERT_EQ(lab_configurations.size(), 1u);
  EXPECT_EQ(lab_configurations[0]["namespace"], "lab");
}

TEST_F(StatusServerTest, UnknownPathsAndMethodsAreRefused) {
  start();
  EXPECT_EQ(get("/nope").status, 404);
  EXPECT_EQ(get("/api/v1/nope").status, 404);

  // A raw POST: the client only speaks GET.
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  socket.connect(parse_listen_address(server_->address()));
  std::string request =
      "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
      "Connection: close\r\n\r\n";
  boost::asio::write(socket, boost::asio::buffer(request));
  std::string answer;
  boost::system::error_code end;
  boost::asio::read(socket, boost::asio::dynamic_buffer(answer), end);
  EXPECT_THAT(answer, HasSubstr("HTTP/1.1 405"));
  EXPECT_THAT(answer, HasSubstr("Allow: GET, HEAD"));
}

TEST_F(StatusServerTest, AStalledCoreMakesEveryCoreViewAnswer503) {
  ServerOptions options;
  options.core_timeout = 200ms;
  start(options);
  // Block the core until the test has seen the answers.
  std::promise<void> release;
  auto released = release.get_future().share();
  boost::asio::post(core_, [released] { released.wait(); });
  EXPECT_EQ(get("/healthz").status, 503);
  EXPECT_EQ(get("/readyz").status, 503);
  EXPECT_EQ(get("/api/v1/status").status, 503);
  EXPECT_EQ(get("/metrics").status, 200) << "metrics still serve the last values";
  release.set_value();
  EXPECT_EQ(get("/healthz").status, 200);
}

// Out of file descriptors, every accept fails at once: the server says so
// once, does not spin, and serves the connection waiting once fds are back.
TEST_F(StatusServerTest, AcceptingWithoutFileDescriptorsIsToldOnceAndResumes) {
  dowser::test::LogCapture log;
  auto times_told = [&] {
    const std::string text = log.text();
    const std::string told = "status API: cannot accept a connection: Too many open files";
    size_t count = 0;
    for (size_t at = text.find(told); at != std::string::npos; at = text.find(told, at + 1))
      ++count;
    return count;
  };
  start();
  // Formatted once while fds are there: UBSan's first check of fmt's buffer
  // type needs one, and finds none once the test has used them all.
  spdlog::info("before the file descriptors run out");
  const auto colon = server_->address().rfind(':');
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(std::stoi(server_->address().substr(colon + 1))));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(client, 0);

  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit lowered = saved;
  lowered.rlim_cur = 256;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
  std::vector<int> fillers;
  for (int fd; (fd = ::dup(client)) >= 0;) fillers.push_back(fd);
  ASSERT_EQ(errno, EMFILE);
  // The kernel completes the connection into the backlog; accepting it fails.
  ASSERT_EQ(::connect(client, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  const std::string request = "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(::write(client, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  const bool told = dowser::test::eventually([&] { return times_told() >= 1; });
  for (int fd : fillers) ::close(fd);
  ::setrlimit(RLIMIT_NOFILE, &saved);
  ASSERT_TRUE(told) << fillers.size() << " fds filled; log:\n" << log.text();

  std::string answer;
  char buffer[512];
  pollfd readable{client, POLLIN, 0};
  while (::poll(&readable, 1, 10000) == 1) {
    const ssize_t got = ::read(client, buffer, sizeof buffer);
    if (got <= 0) break;
    answer.append(buffer, static_cast<size_t>(got));
  }
  ::close(client);
  EXPECT_THAT(answer, testing::StartsWith("HTTP/1.1 200 OK"));
  EXPECT_THAT(answer, testing::EndsWith("ok\n"));
  EXPECT_EQ(times_told(), 1u) << "told once while it lasts, not once per try";
}

TEST(StatusApi, ListenAddressesAreNumericHostAndPort) {
  EXPECT_EQ(parse_listen_address("127.0.0.1:8080").port(), 8080);
  EXPECT_TRUE(parse_listen_address("[::1]:0").address().is_v6());
  EXPECT_EQ(parse_listen_address("0.0.0.0:9").address().to_string(), "0.0.0.0");
  for (const char* bad :
       {"127.0.0.1", ":80", "127.0.0.1:", "localhost:80", "1.2.3.4:70000", "1.2.3.4:8x"})
    EXPECT_THROW(parse_listen_address(bad), std::invalid_argument) << bad;
}

TEST(StatusApi, TheClientReportsAClosedPortAsUnreachable) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  auto port = acceptor.local_endpoint().port();
  acceptor.close();  // nothing listens there now
  EXPECT_THROW(http_get("http://127.0.0.1:" + std::to_string(port) + "/healthz", 2s), Unreachable);
  EXPECT_THROW(http_get("https://127.0.0.1/", 2s), std::invalid_argument);
  EXPECT_THROW(http_get("http:///x", 2s), std::invalid_argument);
}

TEST(StatusApi, JsonIsReadLenientlyAndRoundTrips) {
  auto status = sample_status();
  nlohmann::json json = status.instances[0];
  auto back = json.get<InstanceStatus>();
  EXPECT_EQ(back.slots.size(), 2u);
  EXPECT_EQ(back.slots[0].name, "cams-aaaaaa-0");
  EXPECT_EQ(nlohmann::json(back), json);
  auto sparse = nlohmann::json{{"name", "x"}, {"unknown", 1}}.get<ConfigurationStatus>();
  EXPECT_EQ(sparse.name, "x");
  EXPECT_EQ(sparse.namespace_name, "");
}

}  // namespace
}  // namespace dowser::status_api
