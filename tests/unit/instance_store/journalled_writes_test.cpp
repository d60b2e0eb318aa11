// JournalledWrites: writes through the file store's journal, and the
// checkpoint that empties the journal in steps spread over writes. A power cut
// cannot be staged here, so what a crash would keep is derived from what was
// fsynced: JournalledWrites reports each fsync to the test after making it
// (the real fsync, on real files), and a crash is staged by tearing every file
// whose last write was not fsynced since.
#include "journalled_writes.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "instance_json.hpp"
#include "log_capture.hpp"
#include "posix_io.hpp"
#include "test_support.hpp"

namespace dowser::store::testing {
namespace {

using detail::InstanceFiles;
using detail::JournalledWrites;
using detail::JournalRecord;
using detail::StoreJournal;

constexpr size_t kSmallJournal = size_t{64} * 1024;
constexpr size_t kFiles = 20;

class JournalledWritesTest : public ::testing::Test {
 protected:
  JournalledWrites open(size_t capacity = kSmallJournal) {
    return JournalledWrites(files_, capacity,
                            [this](const std::filesystem::path& path) { synced_.push_back(path); });
  }

  std::string name_of(size_t file) const { return "cam-" + std::to_string(file); }

  // Writes the next revision of file `file` through writes, as the store does,
  // then checks what a checkpoint finished by this write left durable.
  void put(JournalledWrites& writes, size_t file) {
    const std::string name = name_of(file);
    const uint64_t revision = ++revision_;
    const std::string document = detail::to_json_text({sample_instance(name), revision});
    const std::filesystem::path path = files_.instance_file("default", name);
    detail::ensure_directory_durably(path.parent_path());
    const size_t synced_before = synced_.size();
    writes.write(JournalRecord::Kind::put, {"default", name, revision, document}, [&] {
      detail::rewrite_file(path, document);
      written_at_[path] = {synced_.size(), writes.journal().epoch()};
    });
    latest_[name] = revision;
    most_synced_by_a_write_ = std::max(most_synced_by_a_write_, synced_.size() - synced_before);
    if (writes.journal().epoch() != epoch_) expect_durable_before_emptied(writes.journal().epoch());
  }

  // The journal was just emptied (a new epoch began): each file written in an
  // earlier epoch was fsynced after its last write, and so was its directory.
  void expect_durable_before_emptied(uint64_t epoch) {
    ++checkpoints_;
    epoch_ = epoch;
    for (auto file = written_at_.begin(); file != written_at_.end();) {
      const auto& [path, written] = *file;
      if (written.epoch == epoch) {
        ++file;  // written after the journal was emptied (a full journal's checkpoint)
        continue;
      }
      EXPECT_TRUE(synced_since(path, written.synced)) << path << ", checkpoint " << checkpoints_;
      EXPECT_TRUE(synced_since(path.parent_path(), written.synced))
          << path.parent_path() << ", checkpoint " << checkpoints_;
      file = written_at_.erase(file);
    }
  }

  bool synced_since(const std::filesystem::path& path, size_t index) const {
    return std::find(synced_.begin() + static_cast<std::ptrdiff_t>(index), synced_.end(), path) !=
           synced_.end();
  }

  // What a machine crash now may do: every file not fsynced since its last
  // write is torn.
  void tear_unsynced_files() {
    for (const auto& [path, written] : written_at_) {
      if (synced_since(path, written.synced)) continue;
      const std::string whole = read_text(path);
      write_text(path, whole.substr(0, whole.size() / 3));
      ++torn_;
    }
  }

  // fsync is free in memory, and these tests are about which files it is
  // called on, not about the disk.
  TemporaryDirectory temporary_{TemporaryDirectory::Medium::memory};
  InstanceFiles files_{temporary_.path()};
  uint64_t revision_ = 0;
  std::vector<std::filesystem::path> synced_;  // every fsync, in order
  // Per file written since the journal was last emptied, at its last write:
  // synced_.size() and the journal's epoch.
  struct Written {
    size_t synced = 0;
    uint64_t epoch = 0;
  };
  std::map<std::filesystem::path, Written> written_at_;
  uint64_t epoch_ = 1;                      // a new journal's
  std::map<std::string, uint64_t> latest_;  // revision per name
  size_t most_synced_by_a_write_ = 0;
  int checkpoints_ = 0;
  int torn_ = 0;
};

TEST_F(JournalledWritesTest, EveryFileIsDurableBeforeTheJournalIsEmptied) {
  JournalledWrites writes = open();
  for (size_t i = 0; i < 1000; ++i) put(writes, (i * 7) % kFiles);
  EXPECT_GE(checkpoints_, 3);
}

TEST_F(JournalledWritesTest, TheJournalIsEmptiedInStepsOfAFewFilesBeforeItFills) {
  const dowser::test::LogCapture log;
  JournalledWrites writes = open();
  uint64_t most_used = 0;
  for (size_t i = 0; i < 1000; ++i) {
    put(writes, (i * 7) % kFiles);
    most_used = std::max(most_used, writes.journal().used());
  }
  EXPECT_GE(checkpoints_, 3);
  // Each write fsynced at most a step's files and the directory, never all
  // kFiles files the journal covers at once...
  EXPECT_LE(most_synced_by_a_write_, JournalledWrites::kMinFilesPerStep + 1);
  // ...and the steps were done before the journal was full.
  EXPECT_LT(most_used, kSmallJournal - kSmallJournal / 16);
  EXPECT_EQ(log.text().find("filled before its checkpoint finished"), std::string::npos)
      << log.text();
}

TEST_F(JournalledWritesTest, TwoWritersSharingTheJournalKeepEveryWriteUntilItIsDurable) {
  // As two processes sharing one store: each sees the other's records and resets.
  JournalledWrites first = open();
  JournalledWrites second = open();
  for (size_t i = 0; i < 1000; ++i) put(i % 2 == 0 ? first : second, (i * 7) % kFiles);
  EXPECT_GE(checkpoints_, 3);
}

TEST_F(JournalledWritesTest, ACrashHalfwayThroughACheckpointLosesNoWrite) {
  {
    JournalledWrites writes = open();
    const size_t synced_at_start = synced_.size();
    // Write until the checkpoint is under way: some files synced, the journal not emptied.
    for (size_t i = 0; synced_.size() < synced_at_start + 5; ++i) {
      put(writes, (i * 7) % kFiles);
      ASSERT_LT(i, 1000u) << "no checkpoint started";
    }
    ASSERT_EQ(checkpoints_, 0);
  }
  tear_unsynced_files();
  ASSERT_GT(torn_, 0);

  const dowser::test::LogCapture log;
  JournalledWrites reopened = open();
  for (const auto& [name, revision] : latest_) {
    const std::optional<StoredInstance> stored = files_.read("default", name);
    ASSERT_TRUE(stored.has_value()) << name;
    EXPECT_EQ(stored->revision, revision) << name;
    EXPECT_EQ(stored->instance, sample_instance(name));
  }
  EXPECT_NE(log.text().find("journalled writes the files had lost"), std::string::npos)
      << log.text();
  EXPECT_EQ(reopened.journal().used(), StoreJournal::kHeaderSize);  // recovered, then emptied
}

}  // namespace
}  // namespace dowser::store::testing
