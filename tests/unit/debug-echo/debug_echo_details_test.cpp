#include "debug_echo_details.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace debug_echo {
namespace {

using dowser::InvalidArgument;

// Expects fn to throw InvalidArgument whose message contains `part`.
template <typename Fn>
void expect_refused(Fn&& fn, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "accepted; expected a refusal mentioning: " << part;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(DebugEchoDetails, ReadsDescriptionsInOrder) {
  EXPECT_EQ(parse_descriptions("descriptions: [foo0, foo1]"),
            (std::vector<std::string>{"foo0", "foo1"}));
  EXPECT_EQ(parse_descriptions("descriptions:\n  - \"a b\"\n  - '1'\n"),
            (std::vector<std::string>{"a b", "1"}));
}

TEST(DebugEchoDetails, AcceptsJsonAndEmptyListAndIgnoresOtherKeys) {
  EXPECT_EQ(parse_descriptions(R"({"descriptions": ["x"]})"), std::vector<std::string>{"x"});
  EXPECT_TRUE(parse_descriptions("descriptions: []").empty());
  EXPECT_EQ(parse_descriptions("descriptions: [x]\nother: 1"), std::vector<std::string>{"x"});
}

TEST(DebugEchoDetails, MergesDuplicateDescriptions) {
  EXPECT_EQ(parse_descriptions("descriptions: [a, b, a]"), (std::vector<std::string>{"a", "b"}));
}

TEST(DebugEchoDetails, RefusesBadDetailsNamingTheProblem) {
  expect_refused([] { parse_descriptions(""); }, "discovery details are empty");
  expect_refused([] { parse_descriptions("descriptions: [a"); },
                 "discovery details are not valid YAML: line ");
  expect_refused([] { parse_descriptions("just text"); }, "expected a mapping");
  expect_refused([] { parse_descriptions("other: [a]"); }, "'descriptions' is missing");
  expect_refused([] { parse_descriptions("descriptions: a"); }, "'descriptions' is not a sequence");
  expect_refused([] { parse_descriptions("descriptions: [a, b, {c: d}]"); },
                 "descriptions[2] is not a string");
  expect_refused([] { parse_descriptions("descriptions: [a, ~]"); },
                 "descriptions[1] is not a string");
  expect_refused([] { parse_descriptions("descriptions: [[a]]"); },
                 "descriptions[0] is not a string");
  expect_refused([] { parse_descriptions("descriptions: ['']"); }, "descriptions[0] is empty");
}

TEST(DebugEchoDetails, ParsesPollInterval) {
  EXPECT_EQ(parse_poll_interval("10"), std::chrono::milliseconds(10));
  EXPECT_EQ(parse_poll_interval(" 2500 "), std::chrono::milliseconds(2500));
  for (const char* bad : {"", "9", "-5", "abc", "10ms", "1.5", "99999999999999999999999"})
    expect_refused([&] { parse_poll_interval(bad); }, "DEBUG_ECHO_POLL_INTERVAL_MS");
}

TEST(DebugEchoDetails, ParsesInstancesShared) {
  EXPECT_TRUE(parse_instances_shared("true"));
  EXPECT_TRUE(parse_instances_shared(" TRUE\n"));
  EXPECT_FALSE(parse_instances_shared("False"));
  for (const char* bad : {"", "yes", "1", "truex"})
    expect_refused([&] { parse_instances_shared(bad); }, "DEBUG_ECHO_INSTANCES_SHARED");
}

TEST(DebugEchoDetails, ParsesAvailabilityFile) {
  EXPECT_EQ(parse_availability_file("/run/x.txt"), "/run/x.txt");
  for (const char* bad : {"", "relative.txt", "/tmp/"})
    expect_refused([&] { parse_availability_file(bad); }, "DEBUG_ECHO_AVAILABILITY_FILE");
}

TEST(DebugEchoDetails, RequestUsesDefaultsForAbsentProperties) {
  dowser::DiscoverRequest request{"descriptions: [a]", {{kPollIntervalProperty, std::nullopt}}};
  Settings settings = parse_request(request);
  EXPECT_EQ(settings.availability_file, kDefaultAvailabilityFile);
  EXPECT_EQ(settings.poll_interval, kDefaultPollInterval);
  EXPECT_FALSE(settings.shared);
}

TEST(DebugEchoDetails, RequestRefusesBadProperty) {
  dowser::DiscoverRequest request{"descriptions: [a]", {{kInstancesSharedProperty, "maybe"}}};
  expect_refused([&] { parse_request(request); }, "DEBUG_ECHO_INSTANCES_SHARED");
}

TEST(DebugEchoDetails, MakesOneDevicePerDescriptionWhenOnline) {
  Settings settings;
  settings.descriptions = {"foo0", "foo1"};
  settings.shared = true;
  auto devices = make_devices(settings, true);
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].id, "foo0");
  EXPECT_EQ(devices[0].properties, (dowser::Properties{{kDescriptionProperty, "foo0"}}));
  EXPECT_TRUE(devices[0].mounts.empty());
  EXPECT_TRUE(devices[0].device_nodes.empty());
  EXPECT_EQ(devices[0].sharing, dowser::Sharing::shared);
  settings.shared = false;
  EXPECT_EQ(make_devices(settings, true)[1].sharing, dowser::Sharing::local);
  EXPECT_TRUE(make_devices(settings, false).empty());
}

TEST(DebugEchoDetails, OfflineOnlyWhenReadableFileContainsOffline) {
  EXPECT_TRUE(says_offline("OFFLINE"));
  EXPECT_TRUE(says_offline("now OFFLINE\n"));
  EXPECT_FALSE(says_offline("offline"));
  EXPECT_FALSE(says_offline("ONLINE"));

  auto file = std::filesystem::temp_directory_path() /
              ("debug-echo-details-test-" + std::to_string(::getpid()) + ".txt");
  EXPECT_TRUE(is_online(file.string()));  // missing
  std::ofstream(file) << "OFFLINE\n";
  EXPECT_FALSE(is_online(file.string()));
  std::ofstream(file) << "ONLINE\n";
  EXPECT_TRUE(is_online(file.string()));
  std::filesystem::remove(file);
}

// Anyone may put something at the default path in /tmp: neither a FIFO
// (whose open waits for a writer) nor an endless device holds the poll.
TEST(DebugEchoDetails, AFifoOrADeviceAtThePathIsNotWaitedForNorReadWithoutEnd) {
  auto fifo = std::filesystem::temp_directory_path() /
              ("debug-echo-details-fifo-" + std::to_string(::getpid()));
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(is_online(fifo.string())) << "returned at all: no writer ever comes";
  std::filesystem::remove(fifo);
  EXPECT_TRUE(is_online("/dev/zero"));
}

}  // namespace
}  // namespace debug_echo
