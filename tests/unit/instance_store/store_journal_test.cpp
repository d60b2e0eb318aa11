// The file store's write-ahead journal on its own: what it keeps across
// reopening, where it ends (reset, torn writes, foreign files), how it grows
// and fills, and two writers sharing it as two processes sharing a store do.
//
// What the journal asks of the file (fstat) is counted by wrapping the C
// library's fstat in this executable (each call still goes to the real one):
// nothing else shows it, and it decides what fdatasync has to write.
#include "store_journal.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <fstream>
#include <string>
#include <vector>

#include "instance_store.hpp"
#include "log_capture.hpp"
#include "test_support.hpp"

namespace {
std::atomic<int> journal_stats{0};
}  // namespace

extern "C" int fstat(int fd, struct stat* status) noexcept {
  using Real = int (*)(int, struct stat*);
  static const auto real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "fstat"));
  if (dowser::store::testing::is_journal_fd(fd)) ++journal_stats;
  return real(fd, status);
}

namespace dowser::store::testing {
namespace {

using detail::JournalRecord;
using detail::StoreJournal;
using Kind = JournalRecord::Kind;

constexpr size_t kRoomy = size_t{4} << 20;

JournalRecord record(Kind kind, std::string payload) { return {kind, std::move(payload)}; }

std::vector<std::string> payloads(StoreJournal& journal) {
  std::vector<std::string> found;
  for (const JournalRecord& stored : journal.records()) found.push_back(stored.payload);
  return found;
}

// Overwrites one byte of a file in place.
void flip_byte(const std::filesystem::path& path, uint64_t offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(static_cast<std::streamoff>(offset));
  const char byte = static_cast<char>(file.get());
  file.seekp(static_cast<std::streamoff>(offset));
  file.put(static_cast<char>(~byte));
}

class StoreJournalTest : public ::testing::Test {
 protected:
  std::filesystem::path path() const { return temporary_.path() / ".journal"; }
  // Appends a 4-byte-payload record per entry, then closes the journal.
  void append_and_close(std::initializer_list<const char*> payloads) {
    StoreJournal journal(path(), kRoomy);
    for (const char* payload : payloads) ASSERT_TRUE(journal.append(record(Kind::put, payload)));
  }
  // Where the second record's payload starts, after append_and_close.
  static constexpr uint64_t kSecondPayload = StoreJournal::kHeaderSize +
                                             StoreJournal::kRecordHeaderSize + 4 +
                                             StoreJournal::kRecordHeaderSize;
  TemporaryDirectory temporary_;
};

TEST_F(StoreJournalTest, RecordsComeBackInOrderWithTheirKindAfterReopening) {
  const std::string binary("with\0nul\0bytes", 14);
  {
    StoreJournal journal(path(), kRoomy);
    EXPECT_TRUE(journal.records().empty());
    ASSERT_TRUE(journal.append(record(Kind::put, "first")));
    ASSERT_TRUE(journal.append(record(Kind::remove, binary)));
    ASSERT_TRUE(journal.append(record(Kind::put, "")));
  }
  StoreJournal reopened(path(), kRoomy);
  const std::vector<JournalRecord> found = reopened.records();
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].kind, Kind::put);
  EXPECT_EQ(found[0].payload, "first");
  EXPECT_EQ(found[1].kind, Kind::remove);
  EXPECT_EQ(found[1].payload, binary);
  EXPECT_EQ(found[2].kind, Kind::put);
  EXPECT_EQ(found[2].payload, "");
}

TEST_F(StoreJournalTest, ResetDropsEveryRecordAndLaterOnesStartAfresh) {
  StoreJournal journal(path(), kRoomy);
  for (const char* payload : {"one", "two", "three"}) {
    ASSERT_TRUE(journal.append(record(Kind::put, payload)));
  }
  journal.reset();
  EXPECT_TRUE(journal.records().empty());
  // The old records' bytes are still in the file after the new one; their
  // epoch keeps them out.
  ASSERT_TRUE(journal.append(record(Kind::put, "four")));
  EXPECT_EQ(payloads(journal), std::vector<std::string>{"four"});
  StoreJournal reopened(path(), kRoomy);
  EXPECT_EQ(payloads(reopened), std::vector<std::string>{"four"});
}

TEST_F(StoreJournalTest, ATornRecordEndsTheJournalAndTheNextAppendReplacesIt) {
  append_and_close({"kept", "torn", "after"});
  flip_byte(path(), kSecondPayload + 1);

  const test::LogCapture log;
  StoreJournal reopened(path(), kRoomy);
  EXPECT_EQ(payloads(reopened), std::vector<std::string>{"kept"});
  EXPECT_NE(log.text().find("[error]"), std::string::npos) << log.text();
  EXPECT_NE(log.text().find("the record at byte 92 is damaged and 1 acknowledged record(s) follow"),
            std::string::npos)
      << log.text();
  ASSERT_TRUE(reopened.append(record(Kind::put, "new")));
  EXPECT_EQ(payloads(reopened), (std::vector<std::string>{"kept", "new"}));
}

TEST_F(StoreJournalTest, ATornLastRecordIsAWarningAndAnEmptyTailNothing) {
  append_and_close({"kept", "torn"});
  {
    const test::LogCapture log;
    StoreJournal intact(path(), kRoomy);
    EXPECT_EQ(payloads(intact), (std::vector<std::string>{"kept", "torn"}));
    EXPECT_EQ(log.text(), "") << "zeros after the last record are no damage";
  }
  flip_byte(path(), kSecondPayload + 3);

  const test::LogCapture log;
  StoreJournal reopened(path(), kRoomy);
  EXPECT_EQ(payloads(reopened), std::vector<std::string>{"kept"});
  EXPECT_EQ(log.text().find("[error]"), std::string::npos) << log.text();
  EXPECT_NE(log.text().find("[warning]"), std::string::npos) << log.text();
  EXPECT_NE(log.text().find(path().string() + ": replay ends at byte 92"), std::string::npos)
      << log.text();
}

TEST_F(StoreJournalTest, AppendsWriteIntoSpaceZeroFilledAhead) {
  StoreJournal journal(path(), kRoomy);
  ASSERT_TRUE(journal.append(record(Kind::put, std::string(1000, 'x'))));
  const auto grown = std::filesystem::file_size(path());
  EXPECT_EQ(grown, StoreJournal::kGrowthStep);
  // Further appends change no file size, so fdatasync writes only their blocks.
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(journal.append(record(Kind::put, "record")));
  EXPECT_EQ(std::filesystem::file_size(path()), grown);
}

// On kernels with fine-grained timestamps (Linux 6.13 on), a stat of the
// journal before a write makes the write change the inode's times, so that
// fdatasync writes the inode too: on ext4 without a journal, two disk writes
// per record instead of one (about 210 instead of 130 us here).
TEST_F(StoreJournalTest, AppendsIntoSpaceZeroFilledAheadDoNotStatTheJournal) {
  StoreJournal journal(path(), kRoomy);
  ASSERT_TRUE(journal.append(record(Kind::put, "grows the file")));
  const int stats_before = journal_stats.load();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(journal.append(record(Kind::put, "record")));
  EXPECT_EQ(journal_stats.load(), stats_before);
}

// A writer that has not looked at the file since another one grew it still
// reads the other's records past the end it knew, and appends after them.
TEST_F(StoreJournalTest, AWriterFollowsRecordsPastTheEndItLastSaw) {
  StoreJournal first(path(), kRoomy);
  StoreJournal second(path(), kRoomy);
  ASSERT_TRUE(first.append(record(Kind::put, "first")));
  const std::string large(StoreJournal::kGrowthStep / 4, 'x');
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(second.append(record(Kind::put, large)));
  ASSERT_GT(std::filesystem::file_size(path()), StoreJournal::kGrowthStep);

  EXPECT_EQ(first.take_changes().records.size(), 6u);
  ASSERT_TRUE(first.append(record(Kind::put, "last")));
  const std::vector<std::string> found = payloads(second);
  ASSERT_EQ(found.size(), 8u);
  EXPECT_EQ(found.front(), "first");
  EXPECT_EQ(found.back(), "last");
}

TEST_F(StoreJournalTest, AFullJournalRefusesWithoutWritingAndTakesRecordsAfterReset) {
  const std::string payload(100, 'p');
  const size_t capacity = StoreJournal::kHeaderSize + 3 * (StoreJournal::kRecordHeaderSize + 100);
  StoreJournal journal(path(), capacity);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(journal.append(record(Kind::put, payload)));
  EXPECT_FALSE(journal.append(record(Kind::put, payload)));
  EXPECT_EQ(journal.records().size(), 3u);
  EXPECT_LE(std::filesystem::file_size(path()), capacity);
  journal.reset();
  EXPECT_TRUE(journal.append(record(Kind::put, payload)));
  EXPECT_EQ(journal.records().size(), 1u);
}

TEST_F(StoreJournalTest, ARecordLargerThanTheJournalIsAnErrorNamingIt) {
  StoreJournal journal(path(), 1024);
  try {
    journal.append(record(Kind::put, std::string(2000, 'p')));
    FAIL() << "expected a StoreError";
  } catch (const StoreError& error) {
    EXPECT_EQ(error.kind(), StoreError::Kind::io);
    EXPECT_NE(std::string(error.what()).find(path().string()), std::string::npos) << error.what();
  }
}

TEST_F(StoreJournalTest, TwoWritersSeeEachOthersRecordsAndResets) {
  StoreJournal first(path(), kRoomy);
  StoreJournal second(path(), kRoomy);
  ASSERT_TRUE(first.append(record(Kind::put, "a")));
  ASSERT_TRUE(second.append(record(Kind::put, "b")));  // after "a", not over it
  ASSERT_TRUE(first.append(record(Kind::put, "c")));
  EXPECT_EQ(payloads(second), (std::vector<std::string>{"a", "b", "c"}));

  second.reset();
  ASSERT_TRUE(first.append(record(Kind::put, "d")));  // in the new epoch
  EXPECT_EQ(payloads(first), std::vector<std::string>{"d"});
  EXPECT_EQ(payloads(second), std::vector<std::string>{"d"});
}

std::vector<std::string> payloads_of(const StoreJournal::Changes& changes) {
  std::vector<std::string> found;
  for (const JournalRecord& stored : changes.records) found.push_back(stored.payload);
  return found;
}

TEST_F(StoreJournalTest, ChangesAreWhatOtherWritersAppendedAndWhetherTheyReset) {
  StoreJournal first(path(), kRoomy);
  StoreJournal second(path(), kRoomy);
  ASSERT_TRUE(first.append(record(Kind::put, "a")));
  ASSERT_TRUE(second.append(record(Kind::remove, "b")));  // catches up with "a" first
  StoreJournal::Changes changes = second.take_changes();
  EXPECT_FALSE(changes.reset);
  EXPECT_EQ(payloads_of(changes), std::vector<std::string>{"a"});
  ASSERT_EQ(changes.records.size(), 1u);
  EXPECT_EQ(changes.records[0].kind, Kind::put);
  EXPECT_TRUE(second.take_changes().records.empty());  // each change is reported once

  changes = first.take_changes();
  EXPECT_FALSE(changes.reset);
  EXPECT_EQ(payloads_of(changes), std::vector<std::string>{"b"});

  first.reset();
  ASSERT_TRUE(first.append(record(Kind::put, "c")));
  EXPECT_FALSE(first.take_changes().reset);  // its own reset and append are not changes
  changes = second.take_changes();
  EXPECT_TRUE(changes.reset);
  EXPECT_EQ(payloads_of(changes), std::vector<std::string>{"c"});
}

TEST_F(StoreJournalTest, RecordsReadAtOpeningOrThroughRecordsAreNoChanges) {
  {
    StoreJournal writer(path(), kRoomy);
    ASSERT_TRUE(writer.append(record(Kind::put, "before")));
  }
  StoreJournal reader(path(), kRoomy);
  StoreJournal writer(path(), kRoomy);
  EXPECT_TRUE(reader.take_changes().records.empty());
  ASSERT_TRUE(writer.append(record(Kind::put, "after")));
  EXPECT_EQ(reader.records().size(), 2u);
  EXPECT_TRUE(reader.take_changes().records.empty());
  EXPECT_EQ(reader.used(), writer.used());  // both at the end of the same records
}

TEST_F(StoreJournalTest, AFileThatIsNoJournalIsStartedAfresh) {
  std::ofstream(path()) << std::string(500, 'g');
  StoreJournal journal(path(), kRoomy);
  EXPECT_TRUE(journal.records().empty());
  ASSERT_TRUE(journal.append(record(Kind::put, "fresh")));
  StoreJournal reopened(path(), kRoomy);
  EXPECT_EQ(payloads(reopened), std::vector<std::string>{"fresh"});
}

}  // namespace
}  // namespace dowser::store::testing
