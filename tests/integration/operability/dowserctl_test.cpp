// dowserctl: each command's output and exit code, against a running dowserd
// and without one (validate, discover).
#include "operability_harness.hpp"

#include <gmock/gmock.h>
#include <sys/stat.h>

#include <fstream>
#include <thread>

namespace dowser::it {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class DowserctlTest : public DaemonTest {
 protected:
  CommandResult ctl(std::vector<std::string> args) {
    args.insert(args.begin(), DOWSERCTL);
    return run_command(root_, std::move(args));
  }

  // dowserctl against this test's daemon.
  CommandResult remote(std::vector<std::string> args) {
    args.push_back("--server=" + url_);
    return ctl(std::move(args));
  }

  Node& cams_node() {
    echo_configuration("cams", {"cam0", "cam1"}, 2);
    auto& node = add_node("node-a", {"--http-listen=127.0.0.1:0"});
    EXPECT_TRUE(node.wait_allocatable("akri.sh/cams", 2)) << node.log();
    url_ = status_url(node);
    EXPECT_TRUE(eventually([&] { return http(url_, "/readyz").status == 200; }));
    return node;
  }

  std::string manifest(const std::string& name, const std::string& text) {
    auto path = root_ / name;
    write_file(path, text);
    return path.string();
  }

  std::string url_;
};

// Lines of text that contain `word`.
size_t lines_with(const std::string& text, const std::string& word) {
  std::istringstream lines(text);
  size_t count = 0;
  for (std::string line; std::getline(lines, line);) count += line.find(word) != std::string::npos;
  return count;
}

TEST_F(DowserctlTest, StatusAndListsAsTablesAndJson) {
  auto& node = cams_node();
  auto status = remote({"status"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("node              node-a"));
  EXPECT_THAT(status.out, HasSubstr("ready             yes"));
  EXPECT_THAT(status.out, HasSubstr("instances here    2"));
  EXPECT_THAT(status.out, Not(HasSubstr("\033["))) << "no colours when not on a terminal";

  auto handlers = remote({"handlers"});
  EXPECT_EQ(handlers.exit_code, 0);
  EXPECT_THAT(handlers.out, HasSubstr("NAME"));
  EXPECT_EQ(lines_with(handlers.out, "loaded"), 2u) << handlers.out;

  auto configs = remote({"configs"});
  EXPECT_EQ(configs.exit_code, 0);
  EXPECT_THAT(
      configs.out,
      HasSubstr("default    cams  debugEcho  discovering  2        2          2         4/4"));

  auto stored = instances();
  auto table = remote({"instances", "-c", "cams"});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_THAT(table.out, HasSubstr("NAMESPACE  NAME")) << table.out;
  for (const auto& s : stored)
    EXPECT_EQ(lines_with(table.out, "default    " + s.instance.name), 1u) << table.out;
  EXPECT_EQ(lines_with(table.out, "0/2"), 2u);

  auto json = remote({"instances", "-o", "json"});
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(json.out)["items"].size(), 2u);

  auto plugins = remote({"plugins"});
  EXPECT_EQ(plugins.exit_code, 0);
  EXPECT_EQ(lines_with(plugins.out, "akri.sh/"), 3u);
  EXPECT_THAT(plugins.out, HasSubstr("akri.sh/cams"));
  EXPECT_EQ(lines_with(plugins.out, " yes "), 3u) << plugins.out;

  // A claim, as `slots` shows it.
  auto claim = node.kubelet->allocate("akri.sh/cams", {"default", "pod-a"}, "c", 1);
  ASSERT_TRUE(claim.ok());
  size_t configuration_level = 0, free = 0;
  for (const auto& s : stored) {
    auto slots = remote({"slots", s.instance.name});
    EXPECT_EQ(slots.exit_code, 0);
    configuration_level += lines_with(
        slots.out, "node-a (configuration-level, virtual device " + claim.device_ids.at(0) + ")");
    free += lines_with(slots.out, "free");
  }
  EXPECT_EQ(configuration_level, 1u);
  EXPECT_EQ(free, 3u);
}

TEST_F(DowserctlTest, ExitCodesScriptsCanRelyOn) {
  cams_node();
  auto missing = remote({"slots", "nope"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("no Instance named nope"));

  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  auto closed = "http://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
  acceptor.close();
  auto unreachable = ctl({"status", "--server", closed});
  EXPECT_EQ(unreachable.exit_code, 3);
  EXPECT_THAT(unreachable.err, HasSubstr("cannot reach " + closed));

  // A misspelt Configuration is an error, not an empty table.
  auto no_configuration = remote({"instances", "-c", "camz"});
  EXPECT_EQ(no_configuration.exit_code, 1) << no_configuration.out;
  EXPECT_THAT(no_configuration.err, HasSubstr("no Configuration named camz"));
  // Mistakes in the command line are told before anything is asked.
  auto empty_name = remote({"instances", "-c", ""});
  EXPECT_EQ(empty_name.exit_code, 2) << empty_name.out;
  EXPECT_THAT(empty_name.err, HasSubstr("must be a DNS-1123 subdomain"));
  auto bad_server = ctl({"status", "--server", "nonsense"});
  EXPECT_EQ(bad_server.exit_code, 2);
  EXPECT_THAT(bad_server.err, HasSubstr("'nonsense' is not an http:// URL"));
  auto with_slash = ctl({"status", "--server", url_ + "/"});
  EXPECT_EQ(with_slash.exit_code, 0) << with_slash.err;
  auto bad_port = ctl({"status", "--server", "http://127.0.0.1:99999"});
  EXPECT_EQ(bad_port.exit_code, 2);
  EXPECT_THAT(bad_port.err, HasSubstr("the port must be 1 to 65535"));

  EXPECT_EQ(ctl({}).exit_code, 2);
  auto misspelt = ctl({"stauts"});
  EXPECT_EQ(misspelt.exit_code, 2);
  EXPECT_THAT(misspelt.err, HasSubstr("unknown command 'stauts' (commands: status handlers"));
  EXPECT_EQ(ctl({"status", "-o", "yaml"}).exit_code, 2);
  EXPECT_EQ(ctl({"slots"}).exit_code, 2);
  EXPECT_EQ(ctl({"--help"}).exit_code, 0);
  auto version = ctl({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_FALSE(version.out.empty());

  // A repeated option takes its last value.
  auto repeated = remote({"status", "-o", "json", "-o", "table"});
  EXPECT_EQ(repeated.exit_code, 0) << repeated.err;
  EXPECT_THAT(repeated.out, HasSubstr("node              node-a"));

  auto coloured = remote({"status", "--color", "always"});
  EXPECT_THAT(coloured.out, HasSubstr("\033[32myes\033[0m"));
}

TEST_F(DowserctlTest, ANamespaceNarrowsInstancesAndSlots) {
  cams_node();
  auto stored = instances();
  ASSERT_EQ(stored.size(), 2u);
  const auto& name = stored.front().instance.name;

  auto here = remote({"instances", "-n", "default"});
  EXPECT_EQ(here.exit_code, 0) << here.err;
  EXPECT_EQ(lines_with(here.out, "default    cams-"), 2u) << here.out;
  auto elsewhere = remote({"instances", "-n", "lab", "-o", "json"});
  EXPECT_EQ(elsewhere.exit_code, 0) << elsewhere.err;
  EXPECT_TRUE(nlohmann::json::parse(elsewhere.out)["items"].empty()) << elsewhere.out;
  auto not_in_lab = remote({"instances", "-n", "lab", "-c", "cams"});
  EXPECT_EQ(not_in_lab.exit_code, 1);
  EXPECT_THAT(not_in_lab.err, HasSubstr("no Configuration named cams in namespace lab"));

  auto slots = remote({"slots", "-n", "default", name});
  EXPECT_EQ(slots.exit_code, 0) << slots.err;
  EXPECT_EQ(lines_with(slots.out, "free"), 2u) << slots.out;
  auto missing = remote({"slots", "--namespace", "lab", name});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("no Instance named " + name + " in namespace lab"));

  auto bad = remote({"slots", "-n", "Lab_1", name});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("must be a DNS-1123 label"));
  // The name goes into the request's path: one that is no name is refused
  // before it could break the request or add to its query.
  for (const std::string& odd : std::vector<std::string>{"cams 6e5f3a", name + "?namespace=lab"}) {
    auto refused = remote({"slots", odd});
    EXPECT_EQ(refused.exit_code, 2) << odd << ": " << refused.out << refused.err;
    EXPECT_THAT(refused.err, HasSubstr("an Instance name must be a DNS subdomain")) << odd;
  }
}

TEST_F(DowserctlTest, RefusedManifestsShowUntilFixed) {
  auto& node = cams_node();
  const std::string bad = (config_dir_ / "bad.yaml").string();
  write_file(bad,
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: bad}\n"
             "spec:\n  capacity: 0\n  discoveryHandler: {name: debugEcho}\n");
  std::vector<status_api::ConfigurationErrorStatus> errors;
  ASSERT_TRUE(eventually([&] {
    errors = api(url_, "/api/v1/configuration-errors")["items"]
                 .get<std::vector<status_api::ConfigurationErrorStatus>>();
    return !errors.empty();
  })) << node.log();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].source, bad);
  EXPECT_EQ(errors[0].field_path, "spec.capacity");
  EXPECT_THAT(errors[0].reason, HasSubstr("must be an integer"));
  EXPECT_FALSE(errors[0].since.empty());

  auto configs = remote({"configs"});
  EXPECT_EQ(configs.exit_code, 1) << "a refused manifest is a problem to fix";
  EXPECT_THAT(configs.out, HasSubstr("Refused manifests"));
  EXPECT_EQ(lines_with(configs.out, bad), 1u) << configs.out;
  EXPECT_THAT(remote({"status"}).out, HasSubstr("config errors     1"));
  EXPECT_EQ(metric(url_, "dowser_configuration_errors"), 1);

  // Fixed: the error goes, and so does the exit code.
  write_file(bad,
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: bad}\n"
             "spec:\n  capacity: 1\n  discoveryHandler: {name: debugEcho}\n");
  ASSERT_TRUE(eventually([&] {
    return api(url_, "/api/v1/configuration-errors")["items"].empty();
  })) << node.log();
  EXPECT_EQ(metric(url_, "dowser_configuration_errors"), 0);
  // It parses now, but its handler refuses it (no discovery details): still
  // a problem to fix.
  auto parsed = remote({"configs"});
  EXPECT_EQ(parsed.exit_code, 1) << parsed.out;
  EXPECT_THAT(parsed.out, Not(HasSubstr("Refused manifests")));
  EXPECT_THAT(parsed.out, HasSubstr("refused by handler debugEcho"));

  write_file(bad,
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: bad}\n"
             "spec:\n  capacity: 1\n  discoveryHandler: {name: debugEcho, discoveryDetails: "
             "'descriptions: [b0]'}\n");
  ASSERT_TRUE(eventually([&] { return remote({"configs"}).exit_code == 0; })) << node.log();
}

// A change the handler refuses leaves the previous version running: a
// problem to fix all the same, in the exit code, the table and the metric.
TEST_F(DowserctlTest, ARefusedChangeIsAProblemWhileThePreviousVersionRuns) {
  auto& node = cams_node();
  ASSERT_EQ(remote({"configs"}).exit_code, 0) << node.log();
  echo_configuration("cams", {"cam0", "\"\""}, 2);  // debugEcho refuses an empty description
  ASSERT_TRUE(node.wait_for_log("Configuration default/cams: refused by handler debugEcho"))
      << node.log();
  auto configs = remote({"configs"});
  EXPECT_EQ(configs.exit_code, 1) << configs.out;
  EXPECT_THAT(configs.out, HasSubstr("discovering (change refused)"));
  const auto cams = api(url_, "/api/v1/configurations")["items"].at(0);
  EXPECT_EQ(cams["state"], "discovering");
  EXPECT_EQ(cams["change_refused"], true);
  EXPECT_EQ(metric(url_, "dowser_configurations{state=\"change_refused\"}"), 1);
  EXPECT_TRUE(std::isnan(metric(url_, "dowser_configurations{state=\"discovering\"}")));

  echo_configuration("cams", {"cam0", "cam1"}, 2);  // taken back
  ASSERT_TRUE(eventually([&] { return remote({"configs"}).exit_code == 0; })) << node.log();
}

// What the host leaves out of a handler's reports is logged, and shown in
// configs, the API and a metric too: a handler whose devices are all left
// out would otherwise look like one still starting.
TEST_F(DowserctlTest, ConfigsShowsWhatTheHostLeftOutOfTheHandlersReports) {
  fixture_configuration(FIXTURE_REPORTS_BAD_DEVICES_SO, "fixtureReportsBadDevices", "mixed");
  auto& node = add_node("node-a", {"--http-listen=127.0.0.1:0"});
  url_ = status_url(node);
  ASSERT_TRUE(node.wait_for_log("device left out of the snapshot")) << node.log();
  nlohmann::json mixed;
  ASSERT_TRUE(eventually([&] {
    mixed = api(url_, "/api/v1/configurations")["items"].at(0);
    return mixed["report_problems"].get<uint64_t>() > 0;
  })) << node.log();
  EXPECT_THAT(mixed["last_report_problem"].get<std::string>(),
              HasSubstr("device left out of the snapshot: device "));
  EXPECT_FALSE(mixed["last_report_problem_at"].get<std::string>().empty());
  EXPECT_EQ(mixed["errors"], 0) << "discovery itself runs";
  EXPECT_GE(
      metric(url_, "dowser_discovery_report_problems_total{handler=\"fixtureReportsBadDevices\"}"),
      1);
  auto configs = remote({"configs"});
  EXPECT_THAT(configs.out, HasSubstr("handler: device left out of the snapshot: device "))
      << configs.out;
}

// The dry run runs the handler in dowserctl's own process: a handler that
// crashes says so on its way out, naming its thread; one whose
// stop_discovery never returns is given up on, and the run fails.
TEST_F(DowserctlTest, DiscoverNamesAHandlerThatCrashesOrDoesNotStop) {
  fs::copy_file(CRASHES_IN_START_SO, handler_dir_ / "libfixture-crashes-in-start.so");
  fs::copy_file(HANGS_ON_REQUEST_SO, handler_dir_ / "libfixture-hangs-on-request.so");
  auto crash =
      ctl({"discover", "--handler=fixtureCrashesInStart", "--details=" + manifest("empty.yaml", ""),
           "--handler-dir=" + handler_dir_.string()});
  EXPECT_NE(crash.exit_code, 0);
  EXPECT_THAT(crash.err, HasSubstr("[dowserctl] fatal signal SIGILL in thread h:fixtureCrashe "
                                   "(a discovery handler's thread)"));

  auto hangs = ctl({"discover", "--handler=fixtureHangs",
                    "--details=" + manifest("stop-hangs.yaml", "stop-hangs"),
                    "--handler-dir=" + handler_dir_.string()});
  EXPECT_EQ(hangs.exit_code, 1) << hangs.out << hangs.err;
  EXPECT_THAT(hangs.err, HasSubstr("handler fixtureHangs: a control call did not return within "
                                   "10 s; abandoning it"));
  EXPECT_THAT(hangs.out, HasSubstr("0 devices found by fixtureHangs"))
      << "the pass itself went well: " << hangs.err;
}

// The dry run says what dowserd would leave out of the handler's reports,
// and --strict fails on it (for a handler author's CI).
TEST_F(DowserctlTest, DiscoverCountsWhatDowserdWouldLeaveOut) {
  fs::copy_file(FIXTURE_REPORTS_BAD_DEVICES_SO, handler_dir_ / "libfixture-reports-bad-devices.so");
  auto details = manifest("none.yaml", "");
  std::vector<std::string> args = {"discover", "--handler=fixtureReportsBadDevices",
                                   "--details=" + details, "--node=n1",
                                   "--handler-dir=" + handler_dir_.string()};
  auto table = ctl(args);
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("1 device found by fixtureReportsBadDevices on node n1; "));
  EXPECT_THAT(table.out, HasSubstr(" problem(s) in the handler's reports (on stderr)"));
  EXPECT_THAT(table.err, HasSubstr("device left out of the snapshot: device \"cam-utf8\""));

  args.push_back("--strict");
  EXPECT_EQ(ctl(args).exit_code, 1);
  args.insert(args.end(), {"-o", "json"});
  auto json = nlohmann::json::parse(ctl(args).out);
  EXPECT_FALSE(json["problems"].empty());
  EXPECT_EQ(json["instances"].size(), 1u) << "only the valid device";

  // A handler whose devices are all valid passes --strict.
  auto good = manifest("good.yaml", "descriptions: [cam0]\n");
  EXPECT_EQ(ctl({"discover", "--strict", "--handler=debugEcho", "--details=" + good, "--node=n1",
                 "--handler-dir=" + handler_dir_.string()})
                .exit_code,
            0);
}

// An error discovery has recovered from stays visible, but says so.
TEST_F(DowserctlTest, ConfigsSaysWhenDiscoveryHasRecovered) {
  const auto ghost = config_dir_ / "ghost.yaml";
  write_file(ghost,
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: ghost}\n"
             "spec:\n  discoveryHandler: {name: nope, discoveryDetails: ''}\n");
  auto& node = add_node("node-a", {"--http-listen=127.0.0.1:0"});
  url_ = status_url(node);
  auto ghost_status = [&] {
    for (const auto& c : api(url_, "/api/v1/configurations")["items"]
                             .get<std::vector<status_api::ConfigurationStatus>>())
      if (c.name == "ghost") return c;
    return status_api::ConfigurationStatus{};
  };
  ASSERT_TRUE(eventually([&] { return ghost_status().state == "failing"; })) << node.log();
  EXPECT_THAT(remote({"configs"}).out, Not(HasSubstr("recovered; was")));

  write_file(ghost,
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: ghost}\n"
             "spec:\n  discoveryHandler: {name: debugEcho, discoveryDetails: "
             "'descriptions: [g0]'}\n");
  ASSERT_TRUE(eventually([&] { return ghost_status().state == "discovering"; })) << node.log();
  auto recovered = ghost_status();
  EXPECT_FALSE(recovered.last_error_current);
  EXPECT_THAT(recovered.last_error, HasSubstr("no discovery handler named 'nope'"));
  EXPECT_FALSE(recovered.last_error_at.empty());
  EXPECT_THAT(remote({"configs"}).out,
              HasSubstr("recovered; was: no discovery handler named 'nope'"));
}

// Not a reason to be unready (see OperabilityTest.HealthAndReadinessFollowTheDaemon).
TEST_F(DowserctlTest, StatusNamesAHandlerThatConfigurationsWaitFor) {
  write_file(config_dir_ / "ghost.yaml",
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: ghost}\n"
             "spec:\n  discoveryHandler: {name: nope, discoveryDetails: ''}\n");
  auto& node = add_node("node-a", {"--http-listen=127.0.0.1:0"});
  url_ = status_url(node);
  ASSERT_TRUE(node.wait_for_log("no discovery handler named 'nope'")) << node.log();
  auto status = remote({"status"});
  EXPECT_THAT(status.out, HasSubstr("  handlers        ok: "));
  EXPECT_THAT(status.out, HasSubstr(" loaded; Configurations wait for missing: nope\n"));
}

// A configuration directory that is gone makes the daemon not ready (it
// cannot see changes) until one is back, which is then read as it is.
TEST_F(DowserctlTest, ALostConfigurationDirectoryIsNotReadyUntilItIsBack) {
  auto& node = cams_node();
  const auto moved = config_dir_.string() + ".old";
  fs::rename(config_dir_, moved);
  CommandResult status;
  ASSERT_TRUE(eventually([&] {
    status = remote({"status"});
    return status.exit_code == 1;
  })) << status.out;
  EXPECT_THAT(status.out, HasSubstr("  configurations  FAILING: " + config_dir_.string() +
                                    ": the directory was removed or renamed"));
  EXPECT_EQ(http(url_, "/readyz").status, 503);
  EXPECT_TRUE(node.wait_allocatable("akri.sh/cams", 2)) << "what was read keeps running";

  fs::create_directories(config_dir_);
  echo_configuration("other", {"o0"}, 1);
  EXPECT_TRUE(node.wait_allocatable("akri.sh/other", 1)) << node.log();
  EXPECT_TRUE(node.wait_stopped("akri.sh/cams")) << "its manifest is not in the new directory";
  EXPECT_TRUE(eventually([&] { return remote({"status"}).exit_code == 0; }));
  EXPECT_THAT(remote({"status"}).out,
              HasSubstr("  configurations  ok: following " + config_dir_.string()));
}

// The manifests of the daemon test ABadManifestIsReportedAndTheOthersKeepRunning:
// validate reports them with the daemon's messages.
TEST_F(DowserctlTest, ValidateCatchesWhatTheDaemonRefuses) {
  auto good = manifest("good.yaml",
                       "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: good}\n"
                       "spec:\n  discoveryHandler: {name: debugEcho, discoveryDetails: "
                       "'descriptions: [g0]'}\n");
  auto bad = manifest("bad.yaml",
                      "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: bad}\n"
                      "spec:\n  capacity: -3\n  discoveryHandler: {name: debugEcho}\n");
  auto refused =
      manifest("refused.yaml",
               "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: refused}\n"
               "spec:\n  discoveryHandler: {name: debugEcho, discoveryDetails: '{{{'}\n");
  auto again = manifest("again.yaml",
                        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: good}\n"
                        "spec:\n  discoveryHandler: {name: debugEcho, discoveryDetails: "
                        "'descriptions: [x]'}\n");
  auto elsewhere = manifest(
      "elsewhere.yaml",
      "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: good, namespace: site-b}\n"
      "spec:\n  discoveryHandler: {name: debugEcho, discoveryDetails: 'descriptions: [y]'}\n");
  auto ghost = manifest("ghost.yaml",
                        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: ghost}\n"
                        "spec:\n  discoveryHandler: {name: nope, discoveryDetails: ''}\n");
  auto secret = manifest(
      "secret.yaml",
      "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: secret}\n"
      "spec:\n  discoveryHandler:\n    name: debugEcho\n    discoveryDetails: 'descriptions: [s]'\n"
      "    discoveryProperties:\n    - name: password\n      valueFrom:\n"
      "        secretKeyRef: {name: cams, key: password}\n");
  auto handlers = "--handler-dir=" + handler_dir_.string();

  // A required Secret reference cannot be met by a manifest file: a problem, not a crash.
  auto from_secret = ctl({"validate", handlers, secret});
  EXPECT_EQ(from_secret.exit_code, 1) << from_secret.out << from_secret.err;
  EXPECT_THAT(from_secret.out, HasSubstr(secret + ": Configuration default/secret: discovery "
                                                  "property password takes its value from a"));

  auto ok = ctl({"validate", handlers, good});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_THAT(ok.out, HasSubstr(good + ": Configuration default/good: valid (handler debugEcho)"));
  EXPECT_THAT(ok.out, HasSubstr("0 problems in 1 file"));

  auto all = ctl({"validate", handlers, good, bad, refused, again, ghost});
  EXPECT_EQ(all.exit_code, 1);
  EXPECT_THAT(all.out, HasSubstr(bad + ": spec.capacity: must be an integer"));
  EXPECT_THAT(all.out,
              HasSubstr(refused + ": Configuration default/refused: refused by handler debugEcho: "
                                  "discovery details are not valid YAML"));
  EXPECT_THAT(all.out, HasSubstr(again + ": Configuration default/good: also defined in " + good));
  EXPECT_THAT(all.out, HasSubstr(ghost + ": Configuration default/ghost: no discovery handler "
                                         "named 'nope' is loaded"));
  EXPECT_THAT(all.out, HasSubstr("4 problems in 5 files"));

  // The same name in another namespace would ask for the same resource name.
  auto clash = ctl({"validate", "--skip-handlers", good, elsewhere});
  EXPECT_EQ(clash.exit_code, 1) << clash.out;
  EXPECT_THAT(clash.out, HasSubstr(elsewhere +
                                   ": Configuration site-b/good: its resource name "
                                   "akri.sh/good is taken by Configuration "
                                   "default/good in " +
                                   good));

  // Without the handlers, only the manifests are checked.
  auto manifests_only = ctl({"validate", "--skip-handlers", good, refused, ghost});
  EXPECT_EQ(manifests_only.exit_code, 0) << manifests_only.out;
  EXPECT_THAT(manifests_only.out,
              HasSubstr(good + ": Configuration default/good: manifest valid; handler debugEcho "
                               "not asked (--skip-handlers)"));

  auto json = ctl({"validate", handlers, "-o", "json", good, bad});
  EXPECT_EQ(json.exit_code, 1);
  auto parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed["problems"], 1);
  EXPECT_EQ(parsed["results"].size(), 2u);

  auto missing = (root_ / "missing.yaml").string();
  auto unreadable = ctl({"validate", handlers, missing});
  EXPECT_EQ(unreadable.exit_code, 1);
  EXPECT_THAT(unreadable.out, HasSubstr(missing + ": (file): No such file or directory"));
}

// What a handler warns of while it checks a Configuration is part of the
// result (table and JSON), not only a line on stderr; --strict fails on it.
TEST_F(DowserctlTest, ValidateReportsWhatTheHandlerWarnsOf) {
  const fs::path udev_dir = root_ / "udev-handlers";
  fs::create_directories(udev_dir);
  fs::copy_file(UDEV_SO, udev_dir / "libdowser-handler-udev.so");
  auto lookalike = manifest("lookalike.yaml",
                            "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: cams}\n"
                            "spec:\n  discoveryHandler:\n    name: udev\n    discoveryDetails: |\n"
                            "      udevRules:\n      - KERNEL==\"video*\", DRIVERS==\"uvc.*\"\n");
  auto plain = manifest("plain.yaml",
                        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: mics}\n"
                        "spec:\n  discoveryHandler:\n    name: udev\n    discoveryDetails: |\n"
                        "      udevRules:\n      - SUBSYSTEM==\"sound\"\n");
  auto handlers = "--handler-dir=" + udev_dir.string();

  auto table = ctl({"validate", handlers, lookalike, plain});
  EXPECT_EQ(table.exit_code, 0) << table.out << table.err;  // a warning is not a problem
  EXPECT_THAT(table.out, HasSubstr("warn   " + lookalike +
                                   ": Configuration default/cams: [udev] udevRules[0]: "
                                   "DRIVERS==\"uvc.*\": \".*\" reads like a regular expression"));
  EXPECT_THAT(table.out, HasSubstr("0 problems, 1 warning in 2 files"));
  EXPECT_THAT(table.err, Not(HasSubstr("reads like"))) << "reported once, in the result";

  auto json = ctl({"validate", handlers, "-o", "json", lookalike, plain});
  auto parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed["warnings"], 1);
  ASSERT_EQ(parsed["results"].size(), 2u);
  ASSERT_EQ(parsed["results"][0]["warnings"].size(), 1u);
  EXPECT_THAT(parsed["results"][0]["warnings"][0].get<std::string>(), HasSubstr("\"uvc.*\""));
  EXPECT_TRUE(parsed["results"][1]["warnings"].empty());

  auto strict = ctl({"validate", "--strict", handlers, lookalike});
  EXPECT_EQ(strict.exit_code, 1) << strict.out;
  EXPECT_EQ(ctl({"validate", "--strict", handlers, plain}).exit_code, 0);

  // With --verbose, stderr shows every handler line, the warning too.
  auto verbose = ctl({"validate", "-v", handlers, lookalike});
  EXPECT_THAT(verbose.err, HasSubstr("reads like a regular expression"));
  EXPECT_THAT(verbose.out, HasSubstr("warn   " + lookalike));
}

// File names (and handler messages) may hold bytes that are not UTF-8: the
// JSON result says them with U+FFFD rather than dowserctl aborting.
TEST_F(DowserctlTest, ValidateAsJsonTakesAFileNameThatIsNotUtf8) {
  auto latin1 = manifest("cam\xe9ra.yaml",
                         "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: good}\n"
                         "spec:\n  discoveryHandler: {name: debugEcho, discoveryDetails: "
                         "'descriptions: [g0]'}\n");
  auto json = ctl({"validate", "--handler-dir=" + handler_dir_.string(), "-o", "json", latin1});
  EXPECT_EQ(json.exit_code, 0) << json.out << json.err;
  const auto parsed = nlohmann::json::parse(json.out);
  ASSERT_EQ(parsed["results"].size(), 1u) << json.out;
  EXPECT_THAT(parsed["results"][0]["file"].get<std::string>(), HasSubstr("cam\xef\xbf\xbdra.yaml"));
  EXPECT_TRUE(parsed["results"][0]["ok"].get<bool>());
}

// A directory is read as dowserd reads --config-dir; an empty file defines
// nothing, for both, and is not a problem.
TEST_F(DowserctlTest, ValidateReadsADirectoryAsTheDaemonDoes) {
  const auto dir = root_ / "manifests";
  fs::create_directories(dir / "empty-dir");
  write_file(dir / "good.yaml",
             "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: good}\n"
             "spec:\n  discoveryHandler: {name: debugEcho, discoveryDetails: 'descriptions: "
             "[g]'}\n");
  write_file(dir / "bad.json", "{\"apiVersion\": \"akri.sh/v0\", \"kind\": \"Nope\"}");
  write_file(dir / "placeholder.yml", "# nothing yet\n");
  for (const auto* ignored : {".hidden.yaml", "good.yaml~", "good.yaml.swp", "notes.txt"})
    write_file(dir / ignored, "not: [a manifest");

  auto result = ctl({"validate", "--handler-dir=" + handler_dir_.string(), dir.string()});
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  EXPECT_THAT(result.out, HasSubstr((dir / "good.yaml").string() + ": Configuration default/good: "
                                                                   "valid (handler debugEcho)"));
  EXPECT_THAT(result.out,
              HasSubstr("error  " + (dir / "bad.json").string() + ": kind: must be Configuration"));
  EXPECT_THAT(result.out,
              HasSubstr("ok     " + (dir / "placeholder.yml").string() + ": no Configuration"));
  EXPECT_THAT(result.out, HasSubstr("1 problem in 3 files")) << "the others are not manifests";

  // A file named twice (itself and through its directory) is read once.
  auto twice = ctl({"validate", "--skip-handlers", dir.string(), (dir / "good.yaml").string(),
                    (dir / ".." / "manifests" / "good.yaml").string()});
  EXPECT_THAT(twice.out, Not(HasSubstr("also defined in"))) << twice.out;
  EXPECT_THAT(twice.out, HasSubstr("1 problem in 3 files")) << twice.out;

  // What is not a regular file is read as a stream: a pipe, or /dev/null.
  const fs::path fifo = root_ / "manifest.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    std::ofstream(fifo) << "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: "
                           "piped}\nspec:\n  discoveryHandler: {name: debugEcho}\n";
  });
  auto piped = ctl({"validate", "--skip-handlers", fifo.string(), "/dev/null"});
  writer.join();
  EXPECT_EQ(piped.exit_code, 0) << piped.out << piped.err;
  EXPECT_THAT(piped.out,
              HasSubstr(fifo.string() + ": Configuration default/piped: manifest valid"));
  EXPECT_THAT(piped.out, HasSubstr("ok     /dev/null: no Configuration in the file"));
  // In a directory, as for dowserd, it is refused unread (it would block).
  fs::create_directories(root_ / "with-fifo");
  ASSERT_EQ(::mkfifo((root_ / "with-fifo" / "x.yaml").c_str(), 0600), 0);
  auto fifo_in_dir = ctl({"validate", "--skip-handlers", (root_ / "with-fifo").string()});
  EXPECT_EQ(fifo_in_dir.exit_code, 1);
  EXPECT_THAT(fifo_in_dir.out, HasSubstr("x.yaml: (file): not a regular file; ignored"));

  auto none = ctl({"validate", "--skip-handlers", (dir / "empty-dir").string()});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_THAT(none.out, HasSubstr("empty-dir: no manifest file (*.yaml, *.yml, *.json) in the "
                                  "directory"));
}

// A dry run names Instances exactly as the daemon does.
TEST_F(DowserctlTest, DiscoverPrintsTheInstancesTheDaemonMakes) {
  cams_node();
  auto details = manifest("details.yaml", "descriptions: [cam0, cam1]\n");
  auto result = ctl({"discover", "--handler=debugEcho", "--details=" + details, "--name=cams",
                     "--node=node-a", "--capacity=2", "--handler-dir=" + handler_dir_.string(),
                     "-o", "json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto parsed = nlohmann::json::parse(result.out);
  std::set<std::string> dry_run;
  for (const auto& instance : parsed["instances"]) {
    dry_run.insert(instance["instance"].get<std::string>());
    EXPECT_EQ(instance["properties"]["DEBUG_ECHO_DESCRIPTION"], instance["device_id"]);
    EXPECT_EQ(instance["capacity"], 2);
  }
  std::set<std::string> made;
  for (const auto& stored : instances()) made.insert(stored.instance.name);
  EXPECT_EQ(dry_run, made);

  auto table = ctl({"discover", "--handler=debugEcho", "--details=" + details, "--node=n1", "-p",
                    "DEBUG_ECHO_INSTANCES_SHARED=true", "--handler-dir=" + handler_dir_.string()});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(lines_with(table.out, "discover-"), 2u) << table.out;
  EXPECT_EQ(lines_with(table.out, " yes "), 2u) << "shared devices";
  EXPECT_THAT(table.out, HasSubstr("2 devices found by debugEcho on node n1"));

  // What a handler reports is shown with control characters spelled out: an
  // escape sequence in a device's property never reaches the terminal.
  auto escapes =
      manifest("escapes.yaml", "devices: [{id: cam0, properties: {NOTE: \"a\\e[2J\\nb\"}}]\n");
  auto escaped = ctl({"discover", "--handler=testDevices", "--details=" + escapes,
                      "--handler-dir=" + handler_dir_.string()});
  EXPECT_EQ(escaped.exit_code, 0) << escaped.err;
  EXPECT_THAT(escaped.out, HasSubstr("NOTE=a\\x1b[2J\\nb")) << escaped.out;
  EXPECT_THAT(escaped.out, Not(HasSubstr("\x1b"))) << "the raw escape character";
  EXPECT_THAT(escaped.out, HasSubstr("1 device found by testDevices"));

  auto bad = manifest("bad-details.yaml", "{{{");
  auto refused = ctl({"discover", "--handler=debugEcho", "--details=" + bad,
                      "--handler-dir=" + handler_dir_.string()});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("refused by handler debugEcho: discovery details are not "
                                     "valid YAML"));
  auto missing = ctl({"discover", "--handler=nope", "--details=" + details,
                      "--handler-dir=" + handler_dir_.string()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("no discovery handler named 'nope'"));

  // Names dowserd would refuse would make Instance names it never makes.
  auto bad_name = ctl({"discover", "--handler=debugEcho", "--details=" + details, "--name=Cams",
                       "--handler-dir=" + handler_dir_.string()});
  EXPECT_EQ(bad_name.exit_code, 2);
  EXPECT_THAT(bad_name.err, HasSubstr("--name 'Cams': must be a DNS-1123 subdomain"));
  auto bad_node = ctl({"discover", "--handler=debugEcho", "--details=" + details, "--node=a:b",
                       "--handler-dir=" + handler_dir_.string()});
  EXPECT_EQ(bad_node.exit_code, 2);
  EXPECT_THAT(bad_node.err, HasSubstr("--node 'a:b': a node name must be a DNS subdomain"));
  // Properties dowserd would refuse are refused, with its reasons.
  auto bad_property = ctl({"discover", "--handler=debugEcho", "--details=" + details, "-p",
                           "my-prop=1", "--handler-dir=" + handler_dir_.string()});
  EXPECT_EQ(bad_property.exit_code, 2);
  EXPECT_THAT(bad_property.err, HasSubstr("-p 'my-prop=1': must match ^[_A-Za-z][_A-Za-z0-9]*$"));
  auto twice = ctl({"discover", "--handler=debugEcho", "--details=" + details, "-p", "A=1", "-p",
                    "A=2", "--handler-dir=" + handler_dir_.string()});
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_THAT(twice.err, HasSubstr("-p 'A=2': duplicate property name A (also at [0])"));
  auto before_details = ctl({"discover", "--handler=debugEcho", "--details=/nonexistent", "-p",
                             "my-prop=1", "--handler-dir=" + handler_dir_.string()});
  EXPECT_EQ(before_details.exit_code, 2) << "told before the details file is read";
  // Without --node the name comes from NODE_NAME: the message says so.
  auto bad_environment = run_command(
      root_, {"/usr/bin/env", "NODE_NAME=Bad_Name", DOWSERCTL, "discover", "--handler=debugEcho",
              "--details=" + details, "--handler-dir=" + handler_dir_.string()});
  EXPECT_EQ(bad_environment.exit_code, 2);
  EXPECT_THAT(bad_environment.err,
              HasSubstr("'Bad_Name' from the NODE_NAME environment variable (no --node given): a "
                        "node name must start and end with a lowercase letter or digit"));
}

}  // namespace
}  // namespace dowser::it
