#include "debug_echo_session.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "test_support.hpp"

namespace debug_echo {
namespace {

using namespace std::chrono_literals;
using testing::ids;
using testing::RecordingHost;
using testing::TempDir;
using testing::write_file;

const std::vector<std::string> kBoth{"foo0", "foo1"};

bool has_both(const RecordingHost::Snapshot& s) { return ids(s) == kBoth; }
bool is_empty(const RecordingHost::Snapshot& s) { return s.empty(); }

// Settings whose periodic scan is too slow to explain anything a test sees
// within its deadline: what the test sees came through inotify.
Settings slow_polling(const std::string& availability_file) {
  Settings settings;
  settings.descriptions = kBoth;
  settings.availability_file = availability_file;
  settings.poll_interval = 1h;
  return settings;
}

TEST(DebugEchoSession, FirstScanReportsEveryDescription) {
  TempDir dir;
  RecordingHost host;
  DebugEchoSession session(slow_polling(dir.file("availability")), host.reporter());
  EXPECT_TRUE(host.wait_for(has_both));
  EXPECT_TRUE(session.watching());
}

TEST(DebugEchoSession, FirstScanReportsEmptyListWhenAlreadyOffline) {
  TempDir dir;
  write_file(dir.file("availability"), "OFFLINE");
  RecordingHost host;
  DebugEchoSession session(slow_polling(dir.file("availability")), host.reporter());
  EXPECT_TRUE(host.wait_for(is_empty));
}

TEST(DebugEchoSession, GoesOfflineAndBackThroughInotify) {
  TempDir dir;
  RecordingHost host;
  DebugEchoSession session(slow_polling(dir.file("availability")), host.reporter());
  ASSERT_TRUE(host.wait_for(has_both));
  write_file(dir.file("availability"), "OFFLINE\n");
  EXPECT_TRUE(host.wait_for(is_empty));
  write_file(dir.file("availability"), "ONLINE\n");
  EXPECT_TRUE(host.wait_for(has_both));
}

TEST(DebugEchoSession, SeesFileReplacedByRenameAndDeleted) {
  TempDir dir;
  RecordingHost host;
  DebugEchoSession session(slow_polling(dir.file("availability")), host.reporter());
  ASSERT_TRUE(host.wait_for(has_both));
  write_file(dir.file("next"), "OFFLINE");
  ASSERT_EQ(std::rename(dir.file("next").c_str(), dir.file("availability").c_str()), 0);
  EXPECT_TRUE(host.wait_for(is_empty));
  ASSERT_EQ(std::remove(dir.file("availability").c_str()), 0);
  EXPECT_TRUE(host.wait_for(has_both));
}

TEST(DebugEchoSession, ReportsOnlyChangesAndIgnoresOtherFiles) {
  TempDir dir;
  RecordingHost host;
  DebugEchoSession session(slow_polling(dir.file("availability")), host.reporter());
  ASSERT_TRUE(host.wait_for(has_both));
  write_file(dir.file("unrelated"), "OFFLINE");
  write_file(dir.file("availability"), "still online");
  write_file(dir.file("availability"), "OFFLINE");
  ASSERT_TRUE(host.wait_for(is_empty));
  EXPECT_EQ(host.report_count(), 2u);  // the first snapshot, then offline
}

TEST(DebugEchoSession, MissingDirectoryFallsBackToPeriodicScan) {
  TempDir dir;
  std::string file = (dir.path() / "later" / "availability").string();
  Settings settings = slow_polling(file);
  settings.poll_interval = 10ms;
  RecordingHost host;
  DebugEchoSession session(settings, host.reporter());
  EXPECT_FALSE(session.watching());
  EXPECT_TRUE(host.wait_for_log("session: debugEcho: cannot watch"));
  ASSERT_TRUE(host.wait_for(has_both));
  std::filesystem::create_directory(dir.path() / "later");
  write_file(file, "OFFLINE");
  EXPECT_TRUE(host.wait_for(is_empty));
}

TEST(DebugEchoSession, SharedSettingMarksEveryDeviceShared) {
  TempDir dir;
  Settings settings = slow_polling(dir.file("availability"));
  settings.shared = true;
  RecordingHost host;
  DebugEchoSession session(settings, host.reporter());
  EXPECT_TRUE(host.wait_for([](const RecordingHost::Snapshot& s) {
    return s.size() == 2 && s[0].sharing == dowser::Sharing::shared &&
           s[1].sharing == dowser::Sharing::shared;
  }));
}

TEST(DebugEchoSession, StopsPromptlyDespiteLongInterval) {
  TempDir dir;
  RecordingHost host;
  auto session =
      std::make_unique<DebugEchoSession>(slow_polling(dir.file("availability")), host.reporter());
  ASSERT_TRUE(host.wait_for(has_both));
  auto before = std::chrono::steady_clock::now();
  session.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 1s);
}

}  // namespace
}  // namespace debug_echo
