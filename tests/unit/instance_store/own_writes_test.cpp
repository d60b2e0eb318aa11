// The file store's watch thread reports the store's own writes from memory,
// and only when nothing else touched the file since: OwnWrites' rules, then
// the store with other writers and hand edits around.
#include <gtest/gtest.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "instance_store.hpp"
#include "own_writes.hpp"
#include "test_support.hpp"

namespace dowser::store::testing {
namespace {

using detail::FileIdentity;
using detail::OwnWrites;

const OwnWrites::Key kCamera{"default", "cam-000001"};
const OwnWrites::Key kOther{"default", "cam-000002"};
const FileIdentity kAsWritten{1, 2, 300, 4000, 5000};

TEST(OwnWritesTest, AWriteIsCurrentWhileEveryRevisionSinceIsThisStores) {
  OwnWrites own;
  own.wrote(kCamera, 5, "five", kAsWritten);
  own.wrote(kOther, 6, "six", kAsWritten);
  EXPECT_EQ(own.take_if_current(kCamera, kAsWritten, 6), "five");
  EXPECT_EQ(own.take_if_current(kOther, kAsWritten, 6), "six");
}

TEST(OwnWritesTest, ARevisionHandedOutToAnotherWriterMakesItStale) {
  OwnWrites own;
  own.wrote(kCamera, 5, "five", kAsWritten);
  own.wrote(kOther, 7, "seven", kAsWritten);  // 6 went to someone else
  EXPECT_EQ(own.take_if_current(kCamera, kAsWritten, 7), std::nullopt);
  EXPECT_EQ(own.take_if_current(kOther, kAsWritten, 7), "seven");
}

TEST(OwnWritesTest, AFileThatChangedOrWentIsStale) {
  OwnWrites own;
  own.wrote(kCamera, 5, "five", kAsWritten);
  FileIdentity edited = kAsWritten;
  edited.modified_ns += 1;
  EXPECT_EQ(own.take_if_current(kCamera, edited, 5), std::nullopt);
  own.wrote(kCamera, 6, "six", kAsWritten);
  EXPECT_EQ(own.take_if_current(kCamera, std::nullopt, 6), std::nullopt);
}

TEST(OwnWritesTest, AnUnreadableOrLowerCounterProvesNothing) {
  OwnWrites own;
  own.wrote(kCamera, 5, "five", kAsWritten);
  EXPECT_EQ(own.take_if_current(kCamera, kAsWritten, std::nullopt), std::nullopt);
  own.wrote(kCamera, 6, "six", kAsWritten);
  EXPECT_EQ(own.take_if_current(kCamera, kAsWritten, 5), std::nullopt);
}

TEST(OwnWritesTest, EachWriteIsTakenOnceAndTheNewestOfAFileWins) {
  OwnWrites own;
  own.wrote(kCamera, 5, "five", kAsWritten);
  own.wrote(kCamera, 6, "six", kAsWritten);
  EXPECT_EQ(own.pending(), 1u);
  EXPECT_EQ(own.take_if_current(kCamera, kAsWritten, 6), "six");
  EXPECT_EQ(own.take_if_current(kCamera, kAsWritten, 6), std::nullopt);
  EXPECT_EQ(own.pending(), 0u);
}

TEST(OwnWritesTest, RevisionsOfWritesAlreadyTakenStillCountAsOwn) {
  OwnWrites own;
  own.wrote(kCamera, 5, "five", kAsWritten);
  own.wrote(kOther, 6, "six", kAsWritten);
  own.wrote({"default", "cam-000003"}, 7, "seven", kAsWritten);
  ASSERT_EQ(own.take_if_current(kOther, kAsWritten, 7), "six");
  EXPECT_EQ(own.take_if_current(kCamera, kAsWritten, 7), "five");
}

TEST(OwnWritesTest, ARemovedFileHasNothingToTake) {
  OwnWrites own;
  own.wrote(kCamera, 5, "five", kAsWritten);
  own.removed(kCamera);
  EXPECT_EQ(own.take_if_current(kCamera, kAsWritten, 5), std::nullopt);
  EXPECT_EQ(own.pending(), 0u);
}

// Holds the store's watch thread in the callback for an event about the gate
// Instance, so that the events of later writes queue up unread and inotify
// merges those about one file into one.
class WatchThreadGate {
 public:
  std::function<void(const WatchEvent&)> callback(EventRecorder& recorder) {
    return [this, &recorder](const WatchEvent& event) {
      if (event.object.instance.name == kName) {
        std::unique_lock lock(mutex_);
        held_ = true;
        changed_.notify_all();
        changed_.wait_for(lock, kEventDeadline, [&] { return open_; });
      }
      recorder.record(event);
    };
  }
  // Writes the gate Instance and waits until the watch thread is held.
  bool close(FileInstanceStore& store, uint64_t gate_revision) {
    store.update(sample_instance(kName), gate_revision);
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kEventDeadline, [&] { return held_; });
  }
  void open() {
    {
      const std::lock_guard lock(mutex_);
      open_ = true;
    }
    changed_.notify_all();
  }

  static constexpr const char* kName = "gate-000001";

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool held_ = false, open_ = false;
};

class StoreOwnWritesTest : public ::testing::Test {
 protected:
  std::filesystem::path file_of(const std::string& name) const {
    return temporary_.path() / "default" / (name + ".json");
  }
  // The file as if edited by hand: capacity 8, revision + 100.
  void edit_by_hand(const std::string& name, uint64_t revision) const {
    auto document = nlohmann::json::parse(read_text(file_of(name)));
    document["spec"]["capacity"] = 8;
    document["revision"] = revision + 100;
    write_text(file_of(name), document.dump());
  }

  // Starts a watch whose thread is then held (see WatchThreadGate), and
  // makes the store's own write of camera_ (usage node-a): whatever is
  // written to its file next is merged into that write's event.
  void own_write_with_its_event_unread() {
    const uint64_t gate = store_.create(sample_instance(WatchThreadGate::kName));
    revision_ = store_.create(camera_);
    subscription_ = store_.watch(held_.callback(recorder_));
    ASSERT_TRUE(held_.close(store_, gate));
    camera_.device_usage["cam-000001-0"] = "node-a";
    revision_ = store_.update(camera_, revision_);
  }

  TemporaryDirectory temporary_;
  FileInstanceStore store_{temporary_.path()};
  Instance camera_ = sample_instance("cam-000001");
  uint64_t revision_ = 0;
  EventRecorder recorder_;
  WatchThreadGate held_;
  std::unique_ptr<WatchSubscription> subscription_;  // last: its callback uses the above
};

TEST_F(StoreOwnWritesTest, TheStoresOwnWritesAreReportedWithoutReadingTheFiles) {
  Instance camera = sample_instance("cam-000001");
  uint64_t revision = store_.create(camera);  // the namespace exists before the watch
  EventRecorder recorder;
  const auto subscription = store_.watch(recorder.callback());
  // One write at a time: an event handled while the next write of the same
  // file is under way reads the file (its times have moved already).
  for (int i = 0; i < 5; ++i) {
    camera.device_usage["cam-000001-0"] = i % 2 ? "" : "node-a";
    revision = store_.update(camera, revision);
    ASSERT_TRUE(recorder.wait_for(WatchEvent::Type::upserted, "cam-000001", revision));
    EXPECT_EQ(recorder.events().back().object.instance.device_usage, camera.device_usage);
  }
  EXPECT_EQ(store_.watch_file_reads(), 0u);
}

TEST_F(StoreOwnWritesTest, AnotherWritersChangeMergedIntoAnOwnWritesEventIsRead) {
  ASSERT_NO_FATAL_FAILURE(own_write_with_its_event_unread());
  // Another store's write of the same size: the file's times tell it from the
  // own write, or within one tick of them the counter (which OwnWritesTest
  // checks on its own: a test cannot hold the clock).
  camera_.device_usage["cam-000001-0"] = "node-b";
  const uint64_t others = FileInstanceStore(temporary_.path()).update(camera_, revision_);
  held_.open();
  ASSERT_TRUE(recorder_.wait_for(WatchEvent::Type::upserted, "cam-000001", others));
  EXPECT_EQ(
      recorder_.events_for("cam-000001").back().object.instance.device_usage.at("cam-000001-0"),
      "node-b");
}

TEST_F(StoreOwnWritesTest, AFileEditedByHandAfterAnOwnWriteIsRead) {
  // Merged with the own write's event: a hand edit takes no revision, only
  // the file's identity tells.
  ASSERT_NO_FATAL_FAILURE(own_write_with_its_event_unread());
  edit_by_hand("cam-000001", revision_);
  held_.open();
  ASSERT_TRUE(recorder_.wait_for(WatchEvent::Type::upserted, "cam-000001", revision_ + 100));
  EXPECT_EQ(recorder_.events_for("cam-000001").back().object.instance.capacity, 8u);
  // And one on its own, after the own write's event was handled.
  camera_.device_usage["cam-000001-0"] = "";
  revision_ = store_.update(camera_, revision_ + 100);
  ASSERT_TRUE(recorder_.wait_for(WatchEvent::Type::upserted, "cam-000001", revision_));
  edit_by_hand("cam-000001", revision_);
  ASSERT_TRUE(recorder_.wait_for(WatchEvent::Type::upserted, "cam-000001", revision_ + 100));
}

}  // namespace
}  // namespace dowser::store::testing
