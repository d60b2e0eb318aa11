// The file store after a machine crash: opening it redoes, from the journal,
// the writes its files lost. A real power cut cannot be staged here, so each
// test puts the files into a state such a crash can leave (a rewrite or
// removal that never reached the disk, a torn file, a lost counter) by
// writing them directly while no store is open, then opens the store as
// dowserd does when it starts.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "instance_store.hpp"
#include "log_capture.hpp"
#include "store_journal.hpp"
#include "test_support.hpp"

namespace dowser::store::testing {
namespace {

class FileInstanceStoreRecoveryTest : public ::testing::Test {
 protected:
  std::filesystem::path directory() const { return temporary_.path() / "store"; }
  std::filesystem::path file_of(const std::string& name,
                                const std::string& namespace_name = "default") const {
    return directory() / namespace_name / (name + ".json");
  }
  size_t journalled_records() const {
    return detail::StoreJournal(directory() / ".journal", kDefaultJournalCapacity).records().size();
  }

  TemporaryDirectory temporary_;
};

// That the store holds instance at revision.
void expect_stored(InstanceStore& store, const Instance& instance, uint64_t revision) {
  const std::optional<StoredInstance> got = store.get(instance.namespace_name, instance.name);
  ASSERT_TRUE(got.has_value()) << instance.name;
  EXPECT_EQ(got->revision, revision);
  EXPECT_EQ(got->instance, instance);
}

// Claims one more slot of instance for node-a, as an Allocate does.
uint64_t claim_next_slot(FileInstanceStore& store, Instance& instance, uint64_t revision) {
  const std::string slot = instance.name + "-" + std::to_string(instance.device_usage.size());
  instance.device_usage[slot] = "C:0:node-a";
  return store.update(instance, revision);
}

TEST_F(FileInstanceStoreRecoveryTest, ClaimsTheFileLostAreRedoneFromTheJournal) {
  Instance instance = sample_instance("cam-000001");
  instance.device_usage.clear();
  std::string file_before_claims;
  uint64_t revision = 0;
  {
    FileInstanceStore store(directory());
    revision = store.create(instance);
    file_before_claims = read_text(file_of("cam-000001"));
    revision = claim_next_slot(store, instance, revision);
    revision = claim_next_slot(store, instance, revision);
  }
  write_text(file_of("cam-000001"), file_before_claims);  // the rewrites never reached the disk

  const dowser::test::LogCapture log;
  FileInstanceStore reopened(directory());
  expect_stored(reopened, instance, revision);
  EXPECT_NE(log.text().find("1 Instance file(s) had lost their last journalled write (1 "
                            "Instances in the journal)"),
            std::string::npos)
      << log.text();
}

// A clean stop leaves the journal as it is; what it holds of an Instance
// that was created and then removed is no lost write.
TEST_F(FileInstanceStoreRecoveryTest, AnInstanceCreatedAndRemovedIsNoLostWrite) {
  Instance kept = sample_instance("cam-000001");
  Instance gone = sample_instance("cam-000002");
  uint64_t kept_revision = 0;
  {
    FileInstanceStore store(directory());
    kept_revision = store.create(kept);
    store.remove(gone.namespace_name, gone.name, store.create(gone));
  }
  ASSERT_GT(journalled_records(), 0u) << "the journal still holds the writes";

  const dowser::test::LogCapture log;
  FileInstanceStore reopened(directory());
  expect_stored(reopened, kept, kept_revision);
  EXPECT_FALSE(reopened.get(gone.namespace_name, gone.name).has_value());
  EXPECT_FALSE(std::filesystem::exists(file_of("cam-000002")));
  EXPECT_EQ(log.text().find("lost"), std::string::npos) << log.text();
}

// A namespace's directory removed by hand while the journal still holds its
// last writes (a removal): nothing there is left to make durable, and the
// store opens, emptying the journal.
TEST_F(FileInstanceStoreRecoveryTest, ANamespaceDirectoryRemovedByHandDoesNotStopTheStore) {
  Instance gone = sample_instance("cam-000002");
  gone.namespace_name = "old-ns";
  {
    FileInstanceStore store(directory());
    store.remove(gone.namespace_name, gone.name, store.create(gone));
  }
  ASSERT_GT(journalled_records(), 0u) << "the journal still holds the writes";
  std::filesystem::remove_all(directory() / "old-ns");

  FileInstanceStore reopened(directory());
  EXPECT_FALSE(reopened.get(gone.namespace_name, gone.name).has_value());
  EXPECT_EQ(journalled_records(), 0u) << "emptied once the rest was durable";
}

TEST_F(FileInstanceStoreRecoveryTest, ATornFileIsRedoneFromTheJournal) {
  Instance instance = sample_instance("cam-000001");
  uint64_t revision = 0;
  {
    FileInstanceStore store(directory());
    revision = claim_next_slot(store, instance, store.create(instance));
  }
  const std::string whole = read_text(file_of("cam-000001"));
  write_text(file_of("cam-000001"), whole.substr(0, whole.size() / 2));

  FileInstanceStore reopened(directory());
  expect_stored(reopened, instance, revision);
}

// A FIFO where a file to redo should be: opening it for writing would wait
// for a reader for ever. The store does not open, and says why.
TEST_F(FileInstanceStoreRecoveryTest, AFifoWhereAFileIsToBeRedoneIsRefusedNotWaitedOn) {
  Instance instance = sample_instance("cam-000001");
  {
    FileInstanceStore store(directory());
    claim_next_slot(store, instance, store.create(instance));
  }
  std::filesystem::remove(file_of("cam-000001"));
  ASSERT_EQ(::mkfifo(file_of("cam-000001").c_str(), 0600), 0);
  try {
    FileInstanceStore reopened(directory());
    ADD_FAILURE() << "the store opened over a FIFO";
  } catch (const StoreError& error) {
    EXPECT_NE(std::string(error.what()).find("cam-000001.json: not a regular file"),
              std::string::npos)
        << error.what();
  }
}

TEST_F(FileInstanceStoreRecoveryTest, ACreationTheDirectoryLostIsRedone) {
  const Instance instance = sample_instance("cam-000001", "edge");
  uint64_t revision = 0;
  {
    FileInstanceStore store(directory());
    revision = store.create(instance);
  }
  std::filesystem::remove(file_of("cam-000001", "edge"));

  FileInstanceStore reopened(directory());
  expect_stored(reopened, instance, revision);
}

TEST_F(FileInstanceStoreRecoveryTest, ARemovalTheDirectoryLostIsRedone) {
  std::string removed_file;
  {
    FileInstanceStore store(directory());
    const uint64_t revision = store.create(sample_instance("cam-000001"));
    removed_file = read_text(file_of("cam-000001"));
    store.remove("default", "cam-000001", revision);
  }
  write_text(file_of("cam-000001"), removed_file);

  FileInstanceStore reopened(directory());
  EXPECT_FALSE(reopened.get("default", "cam-000001").has_value());
  EXPECT_FALSE(std::filesystem::exists(file_of("cam-000001")));
}

TEST_F(FileInstanceStoreRecoveryTest, AFileNewerThanTheJournalIsKept) {
  Instance instance = sample_instance("cam-000001");
  {
    FileInstanceStore store(directory());
    claim_next_slot(store, instance, store.create(instance));
  }
  // Written by something that keeps no journal (an operator's editor).
  auto document = nlohmann::json::parse(read_text(file_of("cam-000001")));
  document["revision"] = 1000;
  document["spec"]["capacity"] = 9;
  write_text(file_of("cam-000001"), document.dump());

  FileInstanceStore reopened(directory());
  const std::optional<StoredInstance> got = reopened.get("default", "cam-000001");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->revision, 1000u);
  EXPECT_EQ(got->instance.capacity, 9u);
}

TEST_F(FileInstanceStoreRecoveryTest, RevisionsStayAboveJournalledOnesWhenTheCounterWasLost) {
  Instance instance = sample_instance("cam-000001");
  std::string first_file;
  uint64_t revision = 0;
  {
    FileInstanceStore store(directory());
    revision = store.create(instance);
    first_file = read_text(file_of("cam-000001"));
    for (int i = 0; i < 5; ++i) revision = claim_next_slot(store, instance, revision);
  }
  // The counter and the rewrites are lost: the files alone say revision 1.
  write_text(directory() / ".revision", "1\n");
  write_text(file_of("cam-000001"), first_file);

  FileInstanceStore reopened(directory());
  EXPECT_GT(reopened.create(sample_instance("cam-000002")), revision);
}

TEST_F(FileInstanceStoreRecoveryTest, OpeningEmptiesTheJournalOnceTheFilesAreDurable) {
  {
    FileInstanceStore store(directory());
    store.create(sample_instance("cam-000001"));
    store.create(sample_instance("cam-000002"));
  }
  EXPECT_EQ(journalled_records(), 2u);
  const FileInstanceStore reopened(directory());
  EXPECT_EQ(journalled_records(), 0u);
}

TEST_F(FileInstanceStoreRecoveryTest, AFullJournalIsCheckpointedWithoutLosingAWrite) {
  // Room for a few records only, so that claims fill it many times over.
  const size_t capacity = size_t{4} * 1024;
  FileInstanceStore store(directory(), capacity);
  std::vector<Instance> instances;
  std::vector<uint64_t> revisions;
  for (const char* name : {"cam-000001", "cam-000002", "cam-000003"}) {
    instances.push_back(sample_instance(name));
    instances.back().device_usage.clear();
    revisions.push_back(store.create(instances.back()));
  }
  for (int round = 0; round < 20; ++round) {
    for (size_t i = 0; i < instances.size(); ++i) {
      revisions[i] = claim_next_slot(store, instances[i], revisions[i]);
    }
  }
  EXPECT_LE(std::filesystem::file_size(directory() / ".journal"), capacity);
  EXPECT_LT(journalled_records(), 10u);
  for (size_t i = 0; i < instances.size(); ++i) expect_stored(store, instances[i], revisions[i]);
}

TEST_F(FileInstanceStoreRecoveryTest, EveryWriteStaysJournalledUntilACheckpointEmptiesIt) {
  // From a quarter full, the store's checkpoint thread empties the journal between
  // or during the writes; until it does, the journal holds every write.
  const size_t capacity = size_t{64} * 1024;
  FileInstanceStore store(directory(), capacity);
  std::vector<Instance> instances;
  std::vector<uint64_t> revisions;
  for (int i = 0; i < 10; ++i) {
    instances.push_back(sample_instance("cam-" + std::to_string(i)));
    instances.back().device_usage.clear();
    revisions.push_back(store.create(instances.back()));
  }
  size_t journalled = journalled_records();
  uint64_t epoch = detail::StoreJournal(directory() / ".journal", capacity).epoch();
  int emptied = 0;
  for (int round = 0; round < 60; ++round) {
    for (size_t i = 0; i < instances.size(); ++i) {
      Instance& instance = instances[i];
      instance.device_usage[instance.name + "-0"] = round % 2 == 0 ? "node-a" : "C:0:node-a";
      revisions[i] = store.update(instance, revisions[i]);
      // Read as a second process would, under the store's lock.
      const detail::FileLock lock(directory() / ".lock", detail::FileLock::Mode::shared);
      detail::StoreJournal journal(directory() / ".journal", capacity);
      const size_t now = journal.records().size();
      if (journal.epoch() != epoch) {
        ++emptied;
        EXPECT_LE(now, 1u) << "emptied, then more than this write";
      } else {
        EXPECT_EQ(now, journalled + 1) << "a record left the journal before a checkpoint";
      }
      journalled = now;
      epoch = journal.epoch();
    }
  }
  EXPECT_GE(emptied, 2);
  for (size_t i = 0; i < instances.size(); ++i) expect_stored(store, instances[i], revisions[i]);
}

TEST_F(FileInstanceStoreRecoveryTest, TwoStoresOnOneDirectoryCheckpointWithoutLosingAWrite) {
  // Two stores stand in for two dowserd processes sharing one directory:
  // each has its own checkpoint thread and folds in the other's records.
  const size_t capacity = size_t{32} * 1024;
  constexpr int kIncrements = 150;
  FileInstanceStore first(directory(), capacity);
  FileInstanceStore second(directory(), capacity);
  std::vector<std::string> names;
  for (int i = 0; i < 4; ++i) {
    Instance instance = sample_instance("cam-" + std::to_string(i));
    instance.broker_properties[kCountProperty] = "0";
    first.create(instance);
    names.push_back(instance.name);
  }
  auto increment_all = [&](FileInstanceStore& store) {
    for (int i = 0; i < kIncrements; ++i) {
      for (const std::string& name : names) {
        uint64_t written = 0;
        update_with_retry(store, "default", name, increment_count(written), kContendedAttempts);
      }
    }
  };
  std::thread other([&] { increment_all(second); });
  increment_all(first);
  other.join();
  for (const std::string& name : names) {
    EXPECT_EQ(count_of(first.get("default", name)->instance), 2u * kIncrements) << name;
  }
}

TEST_F(FileInstanceStoreRecoveryTest, AReaderNeverSeesAFileHalfRewritten) {
  // Files are rewritten in place; readers wait on the store's lock. Long and
  // short documents alternate, so an unlocked reader would catch one that is
  // a long one's tail behind a short one's head, or cut short.
  FileInstanceStore store(directory());
  Instance instance = sample_instance("cam-000001");
  uint64_t revision = store.create(instance);
  std::atomic<bool> writing{true};
  std::thread reader([&] {
    FileInstanceStore other(directory());
    while (writing) {
      EXPECT_NO_THROW(other.get("default", "cam-000001"));
    }
  });
  for (int i = 0; i < 300; ++i) {
    instance.broker_properties["PADDING"] = std::string(i % 2 == 0 ? 20000 : 10, 'x');
    revision = store.update(instance, revision);
  }
  writing = false;
  reader.join();
}

}  // namespace
}  // namespace dowser::store::testing
