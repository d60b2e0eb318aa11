// dowser-handler-check run as a process: on debugEcho, which must pass, and on
// each misbehaving fixture, which must fail the right check without taking
// the checker down.
#include <dowser/handler.h>
#include "temp_dir.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

using nlohmann::json;

using dowser::test::TempDir;

std::string read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct CheckRun {
  int exit_code = -1;  // -1 when it did not exit normally
  int signal = 0;
  std::string out;
  std::string err;
};

// Runs the checker with args (in directory, if given); output goes through
// files, so no pipe can fill up.
CheckRun run_check(const std::vector<std::string>& args,
                   const std::filesystem::path& directory = {}) {
  TempDir dir;
  const auto out_file = dir.path() / "out";
  const auto err_file = dir.path() / "err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_file.c_str(), O_WRONLY | O_CREAT, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_file.c_str(), O_WRONLY | O_CREAT, 0600);
  if (!directory.empty()) posix_spawn_file_actions_addchdir_np(&actions, directory.c_str());
  std::vector<std::string> command = {CHECK_TOOL};
  command.insert(command.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& arg : command) argv.push_back(arg.data());
  argv.push_back(nullptr);

  pid_t pid = 0;
  int spawned = ::posix_spawn(&pid, CHECK_TOOL, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  CheckRun run;
  if (spawned != 0) {
    ADD_FAILURE() << "cannot start " << CHECK_TOOL << ": " << std::strerror(spawned);
    return run;
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
  run.out = read_file(out_file);
  run.err = read_file(err_file);
  return run;
}

// The checker on `file`, with `details` in a details file, then `args`.
CheckRun run_check_with_details(const std::string& file, const std::string& details,
                                const std::vector<std::string>& args) {
  TempDir dir;
  const auto details_file = dir.path() / "details.yaml";
  std::ofstream(details_file) << details;
  std::vector<std::string> command = {file, "--details", details_file.string()};
  command.insert(command.end(), args.begin(), args.end());
  return run_check(command);
}

std::vector<std::string> lines_starting_with(const std::string& text, const std::string& prefix) {
  std::vector<std::string> found;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) found.push_back(line);
  return found;
}

std::string abi(int major, int minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// ---- debugEcho ----------------------------------------------------------------

class CheckOnDebugEcho : public ::testing::Test {
 protected:
  CheckOnDebugEcho() { std::ofstream(details_file()) << "descriptions:\n  - foo0\n  - foo1\n"; }
  std::filesystem::path details_file() const { return dir_.path() / "details.yaml"; }
  // Its own availability file, so a test elsewhere cannot switch it offline.
  std::vector<std::string> args() const {
    return {DEBUG_ECHO_SO, "--details", details_file().string(), "--property",
            "DEBUG_ECHO_AVAILABILITY_FILE=" + (dir_.path() / "availability").string()};
  }

  TempDir dir_;
};

TEST_F(CheckOnDebugEcho, PassesEveryCheckAndReportsBothDevicesAsJson) {
  auto command = args();
  command.push_back("--json");
  CheckRun run = run_check(command);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;

  json report = json::parse(run.out);
  EXPECT_TRUE(report["passed"].get<bool>());
  EXPECT_EQ(report["handler"]["name"], "debugEcho");
  EXPECT_EQ(report["handler"]["abi"], abi(DOWSER_ABI_VERSION_MAJOR, DOWSER_ABI_VERSION_MINOR));
  EXPECT_EQ(report["handler"]["shared"], false);
  ASSERT_EQ(report["devices"].size(), 2u) << run.out;
  EXPECT_EQ(report["devices"][0]["id"], "foo0");
  EXPECT_EQ(report["devices"][0]["properties"]["DEBUG_ECHO_DESCRIPTION"], "foo0");
  EXPECT_EQ(report["devices"][1]["id"], "foo1");
  EXPECT_EQ(report["devices"][1]["sharing"], "local");

  std::vector<std::string> names;
  for (const auto& check : report["checks"]) {
    names.push_back(check["name"]);
    EXPECT_TRUE(check["passed"].get<bool>()) << check.dump();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"load", "negotiate", "init", "discover",
                                             "invalid-details", "start-stop-100", "stop-latency",
                                             "no-report-after-stop", "concurrent-reports"}));
}

TEST_F(CheckOnDebugEcho, PrintsATableOfDevicesAndOneLinePerCheck) {
  CheckRun run = run_check(args());
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  auto foo1 = lines_starting_with(run.out, "foo1 ");
  ASSERT_EQ(foo1.size(), 1u) << run.out;
  EXPECT_NE(foo1[0].find("DEBUG_ECHO_DESCRIPTION=foo1"), std::string::npos) << foo1[0];
  EXPECT_EQ(lines_starting_with(run.out, "PASS ").size(), 9u) << run.out;
  EXPECT_TRUE(lines_starting_with(run.out, "FAIL ").empty()) << run.out;
  EXPECT_TRUE(lines_starting_with(run.out, "WARN ").empty()) << "it exports only its entry";
}

TEST_F(CheckOnDebugEcho, ShowsAnEmptyDeviceListWhenOffline) {
  std::ofstream(dir_.path() / "availability") << "OFFLINE";
  CheckRun run = run_check(args());
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  // Offline, debugEcho reports an empty list: a snapshot, but no devices.
  EXPECT_NE(run.out.find("(no devices reported)"), std::string::npos) << run.out;
}

// A line about one session (log_session) says which session it is about.
TEST_F(CheckOnDebugEcho, ShowsWhichSessionALineIsAbout) {
  const std::string missing = (dir_.path() / "not-there").string();
  CheckRun run = run_check({DEBUG_ECHO_SO, "--details", details_file().string(), "--property",
                            "DEBUG_ECHO_AVAILABILITY_FILE=" + missing + "/availability",
                            "--show-log", "--duration", "0.1"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(lines_starting_with(
                run.out, "LOG  discover: warn: [session 0] debugEcho: cannot watch " + missing)
                .size(),
            1u)
      << run.out;
}

// An SDK handler needs the host minor it was built with; each older host is
// refused with a message, as the summary says.
TEST_F(CheckOnDebugEcho, NegotiateSaysWhatEachHostWasAnswered) {
  CheckRun run = run_check(args());
  const auto negotiate = lines_starting_with(run.out, "PASS negotiate: ");
  ASSERT_EQ(negotiate.size(), 1u) << run.out;
  const std::string current = abi(DOWSER_ABI_VERSION_MAJOR, DOWSER_ABI_VERSION_MINOR);
  EXPECT_NE(negotiate[0].find("host ABI " + current + " accepted"), std::string::npos)
      << negotiate[0];
  const std::string newer = abi(DOWSER_ABI_VERSION_MAJOR, DOWSER_ABI_VERSION_MINOR + 1);
  EXPECT_NE(negotiate[0].find("host ABI " + newer + " accepted"), std::string::npos)
      << negotiate[0];
  for (int minor = 0; minor < DOWSER_ABI_VERSION_MINOR; ++minor) {
    const std::string older = abi(DOWSER_ABI_VERSION_MAJOR, minor);
    EXPECT_NE(negotiate[0].find("host ABI " + older + " refused: \"handler needs ABI " + current +
                                ", host offers " + older + "\""),
              std::string::npos)
        << negotiate[0];
  }
}

// A handler that wants exactly the host minor it was built with loads today
// and breaks on the next dowserd of the same major: negotiate says so.
TEST(CheckNegotiate, AHandlerRefusingANewerMinorFails) {
  const std::string file = std::string(FIXTURE_DIR) + "/libfixture-exact-minor.so";
  CheckRun run = run_check({file, "--duration", "0.1"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  const auto failures = lines_starting_with(run.out, "FAIL negotiate: ");
  ASSERT_EQ(failures.size(), 1u) << run.out;
  const std::string newer = abi(DOWSER_ABI_VERSION_MAJOR, DOWSER_ABI_VERSION_MINOR + 1);
  EXPECT_NE(failures[0].find("host ABI " + newer +
                             " (a newer dowserd's) refused: \"fixture: only the host ABI it "
                             "was built with\"; a handler must accept every host of its major "
                             "from its own minor on (rule V2)"),
            std::string::npos)
      << failures[0];
}

// A thread of the handler's own that crashes is blamed, not the call the
// checker was making then (starting or waiting, whichever it was).
TEST(CheckCrash, AHandlerThreadsCrashIsNotBlamedOnTheCall) {
  const std::string file = std::string(FIXTURE_DIR) + "/libfixture-crashes-in-thread.so";
  CheckRun run = run_check({file, "--duration", "0.5"});
  ASSERT_EQ(run.signal, 0) << "the checker itself was killed by signal " << run.signal;
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  const auto failures = lines_starting_with(run.out, "FAIL discover: ");
  ASSERT_EQ(failures.size(), 1u) << run.out;
  EXPECT_NE(failures[0].find("a thread of the handler's own crashed during "), std::string::npos)
      << failures[0];
  EXPECT_NE(failures[0].find(" (not the host's call): child killed by signal 4 (SIGILL)"),
            std::string::npos)
      << failures[0];
}

// A write to a socket whose peer is gone fails with EPIPE in the checker's
// child, as in dowserd: SIGPIPE kills neither (a handler may not change
// signal dispositions, rule T6).
TEST(CheckCrash, AWriteToAClosedSocketIsNoCrash) {
  const std::string file = std::string(FIXTURE_DIR) + "/libfixture-writes-to-closed-socket.so";
  CheckRun run = run_check({file, "--duration", "0.1"});
  ASSERT_EQ(run.signal, 0) << "the checker itself was killed by signal " << run.signal;
  EXPECT_EQ(lines_starting_with(run.out, "PASS discover").size(), 1u) << run.out << run.err;
  EXPECT_EQ(run.out.find("signal 13"), std::string::npos) << run.out;
}

// ---- usage errors -------------------------------------------------------------------

TEST(CheckUsage, AnUnreadableDetailsFileIsAUsageErrorNamingTheFile) {
  CheckRun run = run_check({DEBUG_ECHO_SO, "--details", "/nonexistent/details.yaml"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("/nonexistent/details.yaml"), std::string::npos) << run.err;
}

TEST(CheckUsage, AnUnknownFlagIsAUsageError) {
  EXPECT_EQ(run_check({DEBUG_ECHO_SO, "--no-such-flag"}).exit_code, 2);
}

TEST(CheckUsage, AMissingHandlerFileIsAUsageError) {
  EXPECT_EQ(run_check({"/nonexistent/libhandler.so"}).exit_code, 2);
}

// dlopen would search the library path for a bare name, and check whatever
// library of that name it found there instead of the file in this directory.
TEST(CheckUsage, ABareFileNameIsTheFileInTheWorkingDirectory) {
  TempDir dir;
  std::filesystem::copy_file(DEBUG_ECHO_SO, dir.path() / "libbare.so");
  std::ofstream(dir.path() / "details.yaml") << "descriptions: [foo0]\n";
  CheckRun run =
      run_check({"libbare.so", "--details", "details.yaml", "--duration", "0.2"}, dir.path());
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(lines_starting_with(run.out, "PASS negotiate: ").size(), 1u) << run.out;
}

// A link left behind by an uninstall: the link and where it points.
TEST(CheckUsage, ADanglingSymlinkIsAUsageErrorNamingItsTarget) {
  TempDir dir;
  const auto link = dir.path() / "libhandler.so";
  std::filesystem::create_symlink(dir.path() / "gone" / "libhandler.so", link);
  CheckRun run = run_check({link.string()});
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(
      run.err.find(link.string() + ": a symbolic link to " +
                   (dir.path() / "gone" / "libhandler.so").string() + ", which does not exist"),
      std::string::npos)
      << run.err;
}

TEST(CheckUsage, ADurationOverADayIsAUsageError) {
  CheckRun run = run_check({DEBUG_ECHO_SO, "--duration", "1e10"});
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find("--duration"), std::string::npos) << run.err;
}

TEST(CheckUsage, ANonPositiveOrNonNumericDurationSaysWhich) {
  CheckRun zero = run_check({DEBUG_ECHO_SO, "--duration", "0"});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("--duration: 0 is out of range: must be from 0.001 to 86400 seconds"),
            std::string::npos)
      << zero.err;
  CheckRun word = run_check({DEBUG_ECHO_SO, "--duration", "soon"});
  EXPECT_EQ(word.exit_code, 2);
  EXPECT_NE(word.err.find("--duration: 'soon' is not a number"), std::string::npos) << word.err;
}

// negotiate dlopens the file itself: not one the loader refuses, whose
// constructors would then run in the checker anyway.
TEST(CheckPermissions, AFileTheLoaderRefusesIsNotOpenedByAnyCheck) {
  TempDir dir;
  const auto copy = dir.path() / "libwritable.so";
  std::filesystem::copy_file(DEBUG_ECHO_SO, copy);
  std::filesystem::permissions(copy, std::filesystem::perms::group_write,
                               std::filesystem::perm_options::add);
  CheckRun run = run_check({copy.string(), "--duration", "0.2"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  for (const auto* check : {"load", "negotiate"}) {
    auto failures = lines_starting_with(run.out, std::string("FAIL ") + check + ": ");
    ASSERT_EQ(failures.size(), 1u) << run.out;
    EXPECT_NE(failures[0].find("permissions: mode 0775 is group- or other-writable"),
              std::string::npos)
        << failures[0];
  }
}

// start_discovery must return promptly (rule T3): one that takes 300 ms
// fails against a 100 ms limit, naming the rule, and stderr tells each check
// as it ends (a run can take minutes).
TEST(CheckHang, ASlowStartFailsAgainstTheStartLimit) {
  CheckRun run =
      run_check_with_details(std::string(FIXTURE_DIR) + "/libfixture-hangs-on-request.so",
                             "start-slow", {"--duration", "0.2", "--start-timeout-ms", "100"});
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  auto failed = lines_starting_with(run.out, "FAIL discover: ");
  ASSERT_EQ(failed.size(), 1u) << run.out;
  EXPECT_NE(failed[0].find("start_discovery took "), std::string::npos) << failed[0];
  EXPECT_NE(failed[0].find("over 100 ms (--start-timeout-ms): rule T3"), std::string::npos)
      << failed[0];
  EXPECT_EQ(lines_starting_with(run.err, "dowser-handler-check: discover: FAIL").size(), 1u)
      << run.err;
  EXPECT_EQ(lines_starting_with(run.err, "dowser-handler-check: load: PASS").size(), 1u) << run.err;
}

// dowserd runs no discovery validate_request refuses: the details the
// author gives are validated before discover starts them.
TEST(CheckDiscover, DetailsValidateRequestRefusesFailDiscover) {
  CheckRun run =
      run_check_with_details(std::string(FIXTURE_DIR) + "/libfixture-validate-refuses.so",
                             "anything: 1\n", {"--duration", "0.2"});
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  auto failed = lines_starting_with(run.out, "FAIL discover: ");
  ASSERT_EQ(failed.size(), 1u) << run.out;
  EXPECT_NE(failed[0].find("validate_request failed: status "), std::string::npos) << failed[0];
  EXPECT_NE(failed[0].find("(DOWSER_ERR_INVALID_ARGUMENT)"), std::string::npos) << failed[0];
  EXPECT_NE(failed[0].find("\"fixture: validate refuses what start takes\" on the details given"),
            std::string::npos)
      << failed[0];
}

// A validate_request that could not check the details (not
// DOWSER_ERR_INVALID_ARGUMENT) says nothing of them: dowserd starts the
// discovery all the same, and discover passes with a warning.
TEST(CheckDiscover, AValidateRequestThatCouldNotCheckIsAWarning) {
  CheckRun run = run_check_with_details(
      std::string(FIXTURE_DIR) + "/libfixture-validate-refuses.so", "anything: 1\n",
      {"--property", "FIXTURE_VALIDATE_BUSY=1", "--duration", "0.2"});
  EXPECT_EQ(lines_starting_with(run.out, "PASS discover: ").size(), 1u) << run.out << run.err;
  auto warned = lines_starting_with(run.out, "WARN discover: validate_request failed: ");
  ASSERT_EQ(warned.size(), 1u) << run.out;
  EXPECT_NE(warned[0].find("\"fixture: too busy to validate\" on the details given; dowserd "
                           "starts discovery all the same"),
            std::string::npos)
      << warned[0];
}

TEST(CheckUsage, APropertyWithoutANameIsAUsageError) {
  EXPECT_EQ(run_check({DEBUG_ECHO_SO, "--property", "=value"}).exit_code, 2);
}

// ---- misbehaving fixtures -------------------------------------------------------------

// A start that never returns is waited out once (about 10 s here), not once
// per check that starts a session.
TEST(CheckHang, AStartThatNeverReturnsSkipsTheChecksAfterIt) {
  const std::string file = std::string(FIXTURE_DIR) + "/libfixture-start-hangs.so";
  CheckRun run = run_check({file, "--duration", "0.2", "--stop-timeout-ms", "300"});
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  auto failed = lines_starting_with(run.out, "FAIL discover: ");
  ASSERT_EQ(failed.size(), 1u) << run.out;
  EXPECT_NE(failed[0].find("start_discovery did not return within"), std::string::npos)
      << failed[0];
  for (const auto* later : {"invalid-details", "start-stop-100", "stop-latency",
                            "no-report-after-stop", "concurrent-reports"}) {
    EXPECT_EQ(lines_starting_with(run.out, std::string("SKIP ") + later +
                                               ": not run: start_discovery did not return in "
                                               "discover")
                  .size(),
              1u)
        << later << ":\n"
        << run.out;
  }
  // It logged every 100 ms while hung (which must not have kept the child
  // alive): the last 50 lines follow the failure, after a count of the others.
  auto logged = lines_starting_with(run.out, "LOG  discover: ");
  ASSERT_EQ(logged.size(), 51u) << run.out;
  EXPECT_TRUE(logged.front().starts_with("LOG  discover: (")) << logged.front();
  EXPECT_NE(logged.front().find(" earlier lines not shown)"), std::string::npos) << logged.front();
  EXPECT_TRUE(logged.back().starts_with("LOG  discover: info: fixture: still waiting ("))
      << logged.back();
}

// The handler's own words next to a failure (and in the JSON of every check).
TEST(CheckLog, WhatTheHandlerLoggedFollowsItsFailure) {
  const std::string file = std::string(FIXTURE_DIR) + "/libfixture-throws-in-start.so";
  CheckRun run = run_check({file, "--duration", "0.2"});
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_EQ(lines_starting_with(run.out, "LOG  discover: warn: fixture: about to throw").size(), 1u)
      << run.out;
  EXPECT_TRUE(lines_starting_with(run.out, "LOG  init: ").empty()) << "init passed: " << run.out;

  CheckRun json_run = run_check({file, "--duration", "0.2", "--json"});
  bool logged = false;
  const json report = json::parse(json_run.out);
  for (const auto& check : report["checks"])
    if (check["name"] == "discover")
      logged = check["log"].get<std::vector<std::string>>() ==
               std::vector<std::string>{"warn: fixture: about to throw"};
  EXPECT_TRUE(logged) << json_run.out;
}

// What a handler prints goes to stderr: stdout holds the report alone, so
// that `dowser-handler-check --json | jq` reads it.
TEST(CheckOutput, WhatTheHandlerPrintsStaysOutOfTheReport) {
  const std::string file = std::string(FIXTURE_DIR) + "/libfixture-prints-to-stdout.so";
  CheckRun run = run_check({file, "--duration", "0.1", "--json"});
  EXPECT_EQ(run.exit_code, 1) << "it accepts invalid details: " << run.out << run.err;
  ASSERT_TRUE(json::accept(run.out)) << "not the JSON report alone:\n" << run.out;
  const json report = json::parse(run.out);
  bool discovered = false;
  for (const auto& check : report["checks"])
    discovered = discovered || (check["name"] == "discover" && check["passed"] == true);
  EXPECT_TRUE(discovered) << run.out;
  EXPECT_NE(run.err.find("fixture: init printed this"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("fixture: start_discovery printed this"), std::string::npos) << run.err;
}

// A crash kills the child with all it had: each line went to the checker as
// it was logged.
TEST(CheckLog, WhatTheHandlerLoggedBeforeACrashIsShown) {
  const std::string file = std::string(FIXTURE_DIR) + "/libfixture-crashes-in-start.so";
  CheckRun run = run_check({file, "--duration", "0.2", "--json"});
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  const json report = json::parse(run.out);
  std::optional<json> discover;
  for (const auto& check : report["checks"])
    if (check["name"] == "discover") discover = check;
  ASSERT_TRUE(discover) << run.out;
  EXPECT_FALSE(discover->at("passed").get<bool>());
  EXPECT_EQ(discover->at("log").get<std::vector<std::string>>(),
            std::vector<std::string>{"warn: fixture: about to crash"})
      << run.out;
}

// Devices are judged by the host's own rules (host/src/device_rules), and a
// failure says what dowserd logs: every device left out of the snapshot.
TEST(CheckDevices, DevicesThatBreakTheDeviceRulesFailDiscoverInTheHostsWords) {
  const std::string file = std::string(FIXTURE_DIR) + "/libfixture-reports-bad-devices.so";
  CheckRun run = run_check({file, "--duration", "0.2"});
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  auto failures = lines_starting_with(run.out, "FAIL discover: ");
  ASSERT_EQ(failures.size(), 1u) << run.out;
  EXPECT_EQ(failures[0],
            "FAIL discover: devices left out of a snapshot: "
            "device \"cam-utf8\": property \"NAME\": value is not valid UTF-8 (byte 4); "
            "device 3: struct_size 4 is smaller than the 1.0 device record (76 bytes): rule V3; "
            "device \"cam-env\": property \"A=B\": not a valid environment variable name; "
            "device \"cam-env\": property \"NUL\": value contains a NUL byte (byte 1); "
            "device \"cam-env\": mount 1: container path \"data\" is not absolute; "
            "device \"cam-env\": mount 1: host path \"../etc\" is not absolute; "
            "device \"cam-env\": device node 1: permissions \"xyz\" must be a non-empty "
            "subset of \"rwm\"; "
            "device 5: id is empty; device 5: property 1: key is empty");
  EXPECT_EQ(lines_starting_with(run.out, "FAIL concurrent-reports: ").size(), 1u) << run.out;
}

// Names other libraries may use too: a warning with the fix, not a failure.
TEST(CheckExports, SymbolsBesidesTheEntryAreAWarningThatNamesThem) {
  const std::string file = std::string(FIXTURE_DIR) + "/libfixture-exports-extra.so";
  CheckRun run = run_check({file, "--duration", "0.2"});
  EXPECT_EQ(lines_starting_with(run.out, "PASS load: ").size(), 1u) << run.out << run.err;
  auto warnings = lines_starting_with(run.out, "WARN load: exports ");
  ASSERT_EQ(warnings.size(), 1u) << run.out;
  for (const auto* part : {" symbol(s) besides dowser_get_handler_api: ", "parse_config", "verbose",
                           "-fvisibility=hidden", "dowser-handler.map"})
    EXPECT_NE(warnings[0].find(part), std::string::npos) << part << " in " << warnings[0];
}

// One long id must not pad every row of the table; the JSON keeps it whole.
TEST(CheckTable, LongTextIsCutWithItsLengthNoted) {
  const std::string long_id = "cam-" + std::string(996, 'x');
  TempDir dir;
  std::ofstream(dir.path() / "details.yaml")
      << "devices:\n  - id: " << long_id << "\n    properties: {DATA: " << std::string(5000, 'v')
      << "}\n  - id: cam-2\n";
  const std::vector<std::string> args = {
      TEST_DEVICES_SO, "--details", (dir.path() / "details.yaml").string(), "--duration", "0.2"};
  CheckRun run = run_check(args);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  auto long_row = lines_starting_with(run.out, "cam-xxx");
  ASSERT_EQ(long_row.size(), 1u) << run.out;
  EXPECT_NE(long_row[0].find("xxx... (1000 bytes)  local"), std::string::npos) << long_row[0];
  EXPECT_NE(long_row[0].find("DATA=" + std::string(160, 'v') + "... (5000 bytes)"),
            std::string::npos)
      << long_row[0];
  auto short_row = lines_starting_with(run.out, "cam-2 ");
  ASSERT_EQ(short_row.size(), 1u) << run.out;
  EXPECT_LT(short_row[0].size(), 250u)
      << "padded to the cut id, not to 1000 bytes: " << short_row[0];

  auto with_json = args;
  with_json.push_back("--json");
  const json report = json::parse(run_check(with_json).out);
  EXPECT_EQ(report["devices"][0]["id"], long_id);
}

struct FixtureCase {
  std::string fixture;       // libfixture-<fixture>.so
  std::string check;         // the check that must fail
  std::string seen;          // part of what its failure line must say
  std::string details = {};  // the discovery details to check with, if any
};

void PrintTo(const FixtureCase& c, std::ostream* out) { *out << c.fixture; }

class CheckOnFixture : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(CheckOnFixture, FailsTheRightCheckWithoutCrashing) {
  const FixtureCase& c = GetParam();
  std::string file = std::string(FIXTURE_DIR) + "/libfixture-" + c.fixture + ".so";
  // Short limits: the hanging fixture is found in a fraction of a second.
  std::vector<std::string> args = {file, "--duration", "0.2", "--stop-timeout-ms", "300"};
  TempDir dir;
  if (!c.details.empty()) {
    std::ofstream(dir.path() / "details.yaml") << c.details;
    args.insert(args.end(), {"--details", (dir.path() / "details.yaml").string()});
  }
  CheckRun run = run_check(args);
  ASSERT_EQ(run.signal, 0) << "the checker itself was killed by signal " << run.signal;
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  auto failures = lines_starting_with(run.out, "FAIL " + c.check + ": ");
  ASSERT_EQ(failures.size(), 1u) << run.out;
  EXPECT_NE(failures[0].find(c.seen), std::string::npos) << failures[0];
}

const std::string kHostAbi = abi(DOWSER_ABI_VERSION_MAJOR, DOWSER_ABI_VERSION_MINOR);

INSTANTIATE_TEST_SUITE_P(
    Fixtures, CheckOnFixture,
    ::testing::Values(
        FixtureCase{"no-entry", "load",
                    "libfixture-no-entry.so: resolve entry: no exported symbol "
                    "dowser_get_handler_api"},
        FixtureCase{"no-entry", "negotiate",
                    "no exported symbol dowser_get_handler_api: not a dowser handler"},
        FixtureCase{"mangled-entry", "load",
                    "it exports _Z22dowser_get_handler_apittPcm, which is C++ for "
                    "dowser_get_handler_api(unsigned short, unsigned short, char*, unsigned "
                    "long): declare the entry extern \"C\""},
        FixtureCase{"mangled-entry", "negotiate",
                    "it exports _Z22dowser_get_handler_apittPcm, which is C++ for"},
        // The loader's words, not a table of ABI 0.0 read from zeros.
        FixtureCase{"table-size-zero", "load", "check table: struct_size 0 is smaller than the "},
        FixtureCase{"table-size-zero", "negotiate",
                    "host ABI " + kHostAbi + ": check table: struct_size 0 is smaller than the "},
        FixtureCase{"wrong-major", "load",
                    "libfixture-wrong-major.so: negotiate: handler ABI " +
                        abi(DOWSER_ABI_VERSION_MAJOR + 1, DOWSER_ABI_VERSION_MINOR) +
                        ", host ABI " + kHostAbi + " (major differs)"},
        // The oldest host of this major is offered the table first.
        FixtureCase{"wrong-major", "negotiate",
                    "host ABI " + abi(DOWSER_ABI_VERSION_MAJOR, 0) + ": negotiate: handler ABI " +
                        abi(DOWSER_ABI_VERSION_MAJOR + 1, DOWSER_ABI_VERSION_MINOR) +
                        ", host ABI " + abi(DOWSER_ABI_VERSION_MAJOR, 0) + " (major differs)"},
        FixtureCase{"newer-minor", "load",
                    "libfixture-newer-minor.so: negotiate: handler ABI " +
                        abi(DOWSER_ABI_VERSION_MAJOR, DOWSER_ABI_VERSION_MINOR + 1) +
                        ", host ABI " + kHostAbi},
        FixtureCase{"newer-minor", "negotiate", "(handler is newer than this host)"},
        FixtureCase{"init-fails", "init",
                    "init failed: status 1 (DOWSER_ERR_GENERIC): \"fixture: init always fails\""},
        FixtureCase{"throws-in-start", "discover",
                    "start_discovery failed: status 1 (DOWSER_ERR_GENERIC): \"fixture: start "
                    "throws\""},
        FixtureCase{"unresolved-symbol", "load", "libfixture-unresolved-symbol.so: open: "},
        FixtureCase{"unresolved-symbol", "negotiate",
                    "undefined symbol: fixture_function_nobody_defines"},
        FixtureCase{"reports-after-stop", "no-report-after-stop",
                    "report_devices after stop_discovery returned"},
        FixtureCase{"stop-hangs", "stop-latency", "stop_discovery did not return within 300 ms"},
        FixtureCase{"sdk-reports-after-stop", "no-report-after-stop",
                    "the handler logged: a report came after its session stopped (rule T4)"},
        // Every check that stops sessions looks at the log too, not only at the host's records.
        FixtureCase{"sdk-reports-after-stop", "start-stop-100",
                    "the handler logged: a report came after its session stopped (rule T4)"},
        FixtureCase{"error-without-nul", "invalid-details",
                    "start_discovery left no NUL in the error buffer (rule O5)"},
        FixtureCase{"error-past-cap", "negotiate",
                    "dowser_get_handler_api(" + abi(DOWSER_ABI_VERSION_MAJOR, 0) +
                        ") wrote past the end of the " + std::to_string(DOWSER_MAX_ERRLEN) +
                        "-byte error buffer it was given (err_cap), against rule O5"},
        FixtureCase{"error-past-cap", "invalid-details",
                    "validate_request wrote past the end of the " +
                        std::to_string(DOWSER_MAX_ERRLEN) +
                        "-byte error buffer it was given (err_cap), against rule O5; its message: "
                        "fixture: refused"},
        FixtureCase{"raw-table-throws", "discover",
                    "start_discovery failed: status 1 (DOWSER_ERR_GENERIC): \"threw a C++ "
                    "exception across the C ABI (rule T6): fixture: start throws past the ABI\"",
                    "throw"},
        // An exception is no refusal, though dowserd turns it into an error status.
        FixtureCase{"raw-table-throws", "invalid-details",
                    "validate_request threw a C++ exception across the C ABI (rule T6)"},
        // Without "throw", start succeeds and stop throws: the first stop fails it.
        FixtureCase{"raw-table-throws", "start-stop-100",
                    "cycle 1: stop_discovery threw a C++ exception across the C ABI (rule T6): "
                    "fixture: stop throws past the ABI"},
        // Where no status can say it: an exception out of destroy, or out of the entry.
        FixtureCase{"throws-at-edges", "init",
                    "destroy threw a C++ exception across the C ABI (rule T6): fixture: destroy "
                    "throws past the ABI"},
        FixtureCase{"throws-at-edges", "negotiate",
                    "dowser_get_handler_api(2.0) threw a C++ exception across the C ABI (rule "
                    "T6): fixture: the entry throws past the ABI"},
        FixtureCase{"hangs-on-request", "discover",
                    "the host logged: log message: data is NULL but len is 5: rule O4", "log-null"},
        FixtureCase{"crashes-in-start", "discover",
                    "start_discovery crashed: child killed by signal 4 (SIGILL)"}),
    [](const ::testing::TestParamInfo<FixtureCase>& info) {
      std::string name = info.param.fixture + "_" + info.param.check;
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

}  // namespace
