// FileInstanceStore beyond the store contract: the on-disk form, corrupt and
// hostile input, restarts, and compare-and-swap across processes.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "instance_store.hpp"
#include "log_capture.hpp"
#include "test_support.hpp"

namespace {

// Set by a test: the errno fallocate fails with (0: the real call). A full
// disk simulated where the store reserves room, since filling a real one
// takes a mount of its own (the operability tests do that, with tmpfs).
std::atomic<int> fallocate_error{0};

}  // namespace

extern "C" int fallocate(int fd, int mode, off_t offset, off_t length) {
  using Real = int (*)(int, int, off_t, off_t);
  static const auto real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "fallocate"));
  if (const int error = fallocate_error.load(); error != 0) {
    errno = error;
    return -1;
  }
  return real(fd, mode, offset, length);
}

namespace dowser::store::testing {
namespace {

class FileInstanceStoreTest : public ::testing::Test {
 protected:
  std::filesystem::path store_directory() const { return temporary_.path() / "store"; }
  std::filesystem::path file_of(const std::string& namespace_name, const std::string& name) const {
    return store_directory() / namespace_name / (name + ".json");
  }
  // The message of the StoreError(io) that action throws.
  static std::string io_error_of(const std::function<void()>& action) {
    try {
      action();
    } catch (const StoreError& error) {
      EXPECT_EQ(error.kind(), StoreError::Kind::io) << error.what();
      return error.what();
    }
    ADD_FAILURE() << "expected a StoreError";
    return "";
  }

  TemporaryDirectory temporary_;
  FileInstanceStore store_{store_directory()};
};

TEST_F(FileInstanceStoreTest, StoresEachInstanceAsAnAkriInstanceDocument) {
  const Instance instance = sample_instance("akri-onvif-4294ea", "edge");
  const uint64_t revision = store_.create(instance);

  const auto document = nlohmann::json::parse(read_text(file_of("edge", "akri-onvif-4294ea")));
  EXPECT_EQ(document.at("apiVersion"), "akri.sh/v0");
  EXPECT_EQ(document.at("kind"), "Instance");
  EXPECT_EQ(document.at("metadata").at("name"), "akri-onvif-4294ea");
  EXPECT_EQ(document.at("metadata").at("namespace"), "edge");
  EXPECT_EQ(document.at("revision"), revision);
  const auto& spec = document.at("spec");
  EXPECT_EQ(spec.at("configurationName"), "akri-onvif");
  EXPECT_EQ(spec.at("cdiName"), "akri.sh/akri-onvif=akri-onvif-4294ea");
  EXPECT_EQ(spec.at("capacity"), 3);
  EXPECT_EQ(spec.at("shared"), true);
  EXPECT_EQ(spec.at("nodes"), nlohmann::json::array({"node-a", "node-b"}));
  EXPECT_EQ(spec.at("brokerProperties").at("UNICODE"), "caméra ✓");
  EXPECT_EQ(spec.at("deviceUsage").at("akri-onvif-4294ea-1"), "C:0:node-b");
}

TEST_F(FileInstanceStoreTest, ListSkipsAndReportsACorruptFile) {
  const Instance good = sample_instance("cam-000001");
  store_.create(good);
  write_text(file_of("default", "cam-broken"), "{ not json");

  const dowser::test::LogCapture log;
  const std::vector<StoredInstance> listed = store_.list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].instance, good);
  EXPECT_NE(log.text().find(file_of("default", "cam-broken").string()), std::string::npos)
      << log.text();
  EXPECT_NE(log.text().find("not JSON"), std::string::npos) << log.text();

  // Listed again (the watch thread lists too, at its start): said once, and shown.
  ASSERT_EQ(store_.list().size(), 1u);
  const std::string text = log.text();
  EXPECT_EQ(text.find("cam-broken"), text.rfind("cam-broken")) << "warned once: " << text;
  ASSERT_EQ(store_.skipped().size(), 1u);
  EXPECT_NE(store_.skipped()[0].find("cam-broken.json: not JSON"), std::string::npos);
  EXPECT_NO_THROW(store_.check_access()) << "one bad file does not make the store unusable";

  // Fixed (here: written by the store), it is no longer skipped.
  std::filesystem::remove(file_of("default", "cam-broken"));
  store_.create(sample_instance("cam-broken"));
  EXPECT_TRUE(store_.get("default", "cam-broken"));
  EXPECT_TRUE(store_.skipped().empty());
}

TEST_F(FileInstanceStoreTest, GetOfACorruptFileThrowsIoNamingTheFileAndField) {
  store_.create(sample_instance("cam-000001"));
  auto document = nlohmann::json::parse(read_text(file_of("default", "cam-000001")));
  document["spec"]["capacity"] = "three";
  write_text(file_of("default", "cam-000001"), document.dump());

  const std::string message = io_error_of([&] { store_.get("default", "cam-000001"); });
  EXPECT_NE(message.find(file_of("default", "cam-000001").string()), std::string::npos) << message;
  EXPECT_NE(message.find("spec.capacity"), std::string::npos) << message;
}

// Every slot is held in memory: a capacity no Configuration can have would
// run the daemon out of memory on every start, so the Instance is refused.
TEST_F(FileInstanceStoreTest, AnInstanceWithACapacityAboveAMillionIsSkippedNamingTheLimit) {
  store_.create(sample_instance("cam-000001"));
  store_.create(sample_instance("cam-000002"));
  auto document = nlohmann::json::parse(read_text(file_of("default", "cam-000002")));
  document["spec"]["capacity"] = 2'000'000'000;
  write_text(file_of("default", "cam-000002"), document.dump());

  EXPECT_EQ(store_.list().size(), 1u);
  ASSERT_EQ(store_.skipped().size(), 1u);
  EXPECT_NE(store_.skipped()[0].find("spec.capacity: expected an integer from 0 to 1000000"),
            std::string::npos)
      << store_.skipped()[0];
}

// Opening a FIFO blocks until a writer comes: the store must refuse it, not
// hang the daemon's core thread (or the watch thread) on it.
TEST_F(FileInstanceStoreTest, AFifoUnderAnInstanceFileNameIsRefusedWithoutBlocking) {
  store_.create(sample_instance("cam-000001"));
  ASSERT_EQ(::mkfifo(file_of("default", "cam-fifo").c_str(), 0600), 0);
  const dowser::test::LogCapture log;
  EXPECT_EQ(store_.list().size(), 1u);
  EXPECT_NE(log.text().find("cam-fifo.json: not a regular file"), std::string::npos) << log.text();
  const std::string message = io_error_of([&] { store_.get("default", "cam-fifo"); });
  EXPECT_NE(message.find("not a regular file"), std::string::npos) << message;
}

// A write that never got its bytes (the disk was full) leaves an empty file:
// it is no Instance, and creating the Instance again writes it.
TEST_F(FileInstanceStoreTest, AnEmptyFileIsNoInstanceAndIsWrittenOver) {
  write_text(file_of("default", "cam-000001"), "");
  EXPECT_TRUE(store_.list().empty());
  EXPECT_FALSE(store_.get("default", "cam-000001"));
  const Instance instance = sample_instance("cam-000001");
  const uint64_t revision = store_.create(instance);
  auto stored = store_.get("default", "cam-000001");
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->instance, instance);
  EXPECT_EQ(stored->revision, revision);
}

// A full disk fails the write, not the file: an update leaves the old text
// (not a torn new one), a create leaves no file (not an empty one), and the
// store names the failure until a write succeeds.
TEST_F(FileInstanceStoreTest, AWriteThatFindsNoRoomLeavesTheFilesAsTheyWere) {
  const uint64_t revision = store_.create(sample_instance("cam-a"));
  const std::string before = read_text(file_of("default", "cam-a"));
  EXPECT_EQ(store_.write_failure(), std::nullopt);
  Instance longer = sample_instance("cam-a");
  longer.broker_properties["PADDING"] = std::string(8192, 'p');

  fallocate_error = ENOSPC;
  const std::string full =
      "reserve room for " + file_of("default", "cam-a").string() + ": No space left on device";
  EXPECT_EQ(io_error_of([&] { store_.update(longer, revision); }), full);
  EXPECT_EQ(read_text(file_of("default", "cam-a")), before);
  EXPECT_EQ(
      io_error_of([&] { store_.create(sample_instance("cam-b")); }),
      "reserve room for " + file_of("default", "cam-b").string() + ": No space left on device");
  EXPECT_FALSE(std::filesystem::exists(file_of("default", "cam-b")));
  EXPECT_NE(store_.write_failure().value_or("").find("cam-b.json: No space left on device"),
            std::string::npos);
  // A lost race is no failure of the store: it does not hide the last one.
  EXPECT_THROW(store_.update(longer, revision + 100), StoreError);
  EXPECT_TRUE(store_.write_failure().has_value());

  fallocate_error = 0;
  // The journal holds the failed writes' records: a restart (another store
  // opened on the directory recovers from it) must not make them.
  {
    FileInstanceStore restarted(store_directory());
    EXPECT_EQ(restarted.get("default", "cam-a")->instance, sample_instance("cam-a"));
    EXPECT_FALSE(restarted.get("default", "cam-b").has_value());
  }
  const uint64_t now = store_.get("default", "cam-a")->revision;
  EXPECT_GT(now, revision) << "put back at a revision above the failed one";
  EXPECT_THROW(store_.update(longer, revision), StoreError) << "the failed write's revision";
  store_.update(longer, now);
  EXPECT_EQ(store_.write_failure(), std::nullopt);
  EXPECT_EQ(store_.get("default", "cam-a")->instance, longer);
}

TEST_F(FileInstanceStoreTest, AFileUnderAnotherInstancesNameIsCorrupt) {
  store_.create(sample_instance("cam-000001"));
  std::filesystem::copy_file(file_of("default", "cam-000001"), file_of("default", "cam-000002"));
  const std::string message = io_error_of([&] { store_.get("default", "cam-000002"); });
  EXPECT_NE(message.find("cam-000002.json"), std::string::npos) << message;
  EXPECT_EQ(store_.list().size(), 1u);
}

TEST_F(FileInstanceStoreTest, NamesThatCouldLeaveTheDirectoryAreRefused) {
  for (const std::string bad : {"", ".", "..", "../escape", "a/b", ".hidden", "/abs"}) {
    SCOPED_TRACE("name \"" + bad + "\"");
    Instance bad_name = sample_instance(bad);
    Instance bad_namespace = sample_instance("cam-000001", bad);
    for (const Instance& instance : {bad_name, bad_namespace}) {
      const std::string message = io_error_of([&] { store_.create(instance); });
      EXPECT_NE(message.find("invalid Instance"), std::string::npos) << message;
      io_error_of([&] { store_.update(instance, 1); });
      io_error_of([&] { store_.get(instance.namespace_name, instance.name); });
      io_error_of([&] { store_.remove(instance.namespace_name, instance.name, 1); });
    }
  }
  // Nothing was written beside the store directory.
  std::vector<std::string> beside;
  for (const auto& entry : std::filesystem::directory_iterator(temporary_.path())) {
    beside.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(beside, std::vector<std::string>{"store"});
}

TEST_F(FileInstanceStoreTest, AStringThatIsNotUtf8IsRefusedWithoutWritingAnything) {
  Instance instance = sample_instance("cam-000001");
  instance.broker_properties["RAW"] = "\xff\xfe";
  io_error_of([&] { store_.create(instance); });
  EXPECT_FALSE(store_.get("default", "cam-000001").has_value());
  EXPECT_FALSE(std::filesystem::exists(file_of("default", "cam-000001")));
}

TEST_F(FileInstanceStoreTest, StateAndRevisionsSurviveARestart) {
  Instance instance = sample_instance("cam-000001");
  uint64_t revision = 0;
  {
    FileInstanceStore before(store_directory());
    revision = before.create(instance);
    instance.capacity = 7;
    revision = before.update(instance, revision);
  }
  FileInstanceStore after(store_directory());
  const std::optional<StoredInstance> got = after.get("default", "cam-000001");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->instance, instance);
  EXPECT_EQ(got->revision, revision);
  EXPECT_GT(after.create(sample_instance("cam-000002")), revision);
}

TEST_F(FileInstanceStoreTest, RevisionsKeepGrowingWhenTheCounterIsLostOrCorrupt) {
  Instance instance = sample_instance("cam-000001");
  uint64_t revision = store_.create(instance);
  instance.capacity = 7;
  revision = store_.update(instance, revision);

  std::filesystem::remove(store_directory() / ".revision");
  const uint64_t after_loss = store_.create(sample_instance("cam-000002"));
  EXPECT_GT(after_loss, revision);

  write_text(store_directory() / ".revision", "garbage that is longer than a number\n");
  const dowser::test::LogCapture log;
  const uint64_t after_corruption = store_.create(sample_instance("cam-000003"));
  EXPECT_GT(after_corruption, after_loss);
  EXPECT_NE(log.text().find(".revision"), std::string::npos) << log.text();
  EXPECT_GT(store_.create(sample_instance("cam-000004")), after_corruption);
}

// A revision near the top of uint64 (a hand edit) would make the next one
// wrap to 0, which every watcher drops as old: the file is refused, naming
// the limit, and a counter that high is recounted from the files.
TEST_F(FileInstanceStoreTest, RevisionsNearTheTopAreRefusedRatherThanWrapped) {
  const uint64_t first = store_.create(sample_instance("cam-000001"));
  store_.create(sample_instance("cam-000002"));
  auto document = nlohmann::json::parse(read_text(file_of("default", "cam-000002")));
  document["revision"] = std::numeric_limits<uint64_t>::max();
  write_text(file_of("default", "cam-000002"), document.dump());
  EXPECT_EQ(store_.list().size(), 1u);
  ASSERT_EQ(store_.skipped().size(), 1u);
  EXPECT_NE(store_.skipped()[0].find("revision: expected an integer from 0 to 9223372036854775807"),
            std::string::npos)
      << store_.skipped()[0];

  write_text(store_directory() / ".revision", "18446744073709551615\n");
  const uint64_t after = store_.create(sample_instance("cam-000003"));
  EXPECT_GT(after, first);
  EXPECT_LT(after, uint64_t{1} << 63) << "recounted, not wrapped or stuck at the top";

  // The highest revision read: nothing may follow it, which is said.
  auto top = nlohmann::json::parse(read_text(file_of("default", "cam-000001")));
  top["revision"] = (uint64_t{1} << 63) - 1;
  write_text(file_of("default", "cam-000001"), top.dump());
  const auto stored = store_.get("default", "cam-000001");
  ASSERT_TRUE(stored);
  const std::string message =
      io_error_of([&] { store_.update(stored->instance, stored->revision); });
  EXPECT_NE(message.find("no revision is left above 9223372036854775807"), std::string::npos)
      << message;
}

// An Instance file that is a link to a device that never ends (/dev/zero)
// was read until memory ran out, and std::bad_alloc failed the whole list.
TEST_F(FileInstanceStoreTest, AFileLinkedToANeverEndingDeviceIsSkipped) {
  store_.create(sample_instance("cam-000001"));
  std::filesystem::create_symlink("/dev/zero", file_of("default", "cam-endless"));
  EXPECT_EQ(store_.list().size(), 1u);
  ASSERT_EQ(store_.skipped().size(), 1u);
  EXPECT_NE(store_.skipped()[0].find("cam-endless.json: not a regular file"), std::string::npos)
      << store_.skipped()[0];
}

TEST_F(FileInstanceStoreTest, WatchIgnoresCorruptAndTemporaryFiles) {
  EventRecorder recorder;
  const auto subscription = store_.watch(recorder.callback());
  write_text(file_of("default", "cam-broken"), "{ not json");
  write_text(store_directory() / "default" / ".tmp.abcdef", "{}");
  write_text(store_directory() / "default" / "notes.txt", "hello");
  const uint64_t revision =
      FileInstanceStore(store_directory()).create(sample_instance("cam-000001"));
  ASSERT_TRUE(recorder.wait_for(WatchEvent::Type::upserted, "cam-000001", revision));
  // One thread delivers in order, so anything about the earlier files came first.
  EXPECT_EQ(recorder.events().size(), 1u);
}

TEST_F(FileInstanceStoreTest, WatchSeesAFileEditedInPlace) {
  Instance instance = sample_instance("cam-000001");
  const uint64_t revision = store_.create(instance);
  EventRecorder recorder;
  const auto subscription = store_.watch(recorder.callback());
  auto document = nlohmann::json::parse(read_text(file_of("default", "cam-000001")));
  document["spec"]["capacity"] = 8;
  document["revision"] = revision + 100;
  write_text(file_of("default", "cam-000001"), document.dump());
  ASSERT_TRUE(recorder.wait_for(WatchEvent::Type::upserted, "cam-000001", revision + 100));
  EXPECT_EQ(recorder.events().back().object.instance.capacity, 8u);
}

// A namespace's directory moved out of the store (by hand) takes its
// Instances along: they are reported deleted (they used to stay until a
// restart). Moved back, they are there again.
TEST_F(FileInstanceStoreTest, WatchSeesANamespaceDirectoryMovedOutAndBack) {
  Instance instance = sample_instance("cam-000001");
  instance.namespace_name = "cams";
  const uint64_t revision = store_.create(instance);
  EventRecorder recorder;
  const auto subscription = store_.watch(recorder.callback());
  const auto away = temporary_.path() / "away";
  std::filesystem::rename(store_directory() / "cams", away);
  ASSERT_TRUE(recorder.wait_for(WatchEvent::Type::deleted, "cam-000001", revision));

  std::filesystem::rename(away, store_directory() / "cams");
  EXPECT_TRUE(recorder.wait_until([](const std::vector<WatchEvent>& events) {
    return !events.empty() && events.back().type == WatchEvent::Type::upserted &&
           events.back().object.instance.name == "cam-000001";
  })) << "back after its deletion";
  EXPECT_TRUE(store_.get("cams", "cam-000001").has_value());
}

// A namespace moved out is checked alone: the Instances of the others are
// not read again (with thousands of Instances, each read costs).
TEST_F(FileInstanceStoreTest, ANamespaceMovedOutRereadsOnlyItsOwnInstances) {
  constexpr int kElsewhere = 20;
  FileInstanceStore other(store_directory());  // not this store's writes: the watch reads them
  Instance moved = sample_instance("cam-000001");
  moved.namespace_name = "cams";
  const uint64_t revision = other.create(moved);
  for (int i = 0; i < kElsewhere; ++i) other.create(sample_instance("mic-" + std::to_string(i)));
  EventRecorder recorder;
  const auto subscription = store_.watch(recorder.callback());
  const uint64_t reads_before = store_.watch_file_reads();

  std::filesystem::rename(store_directory() / "cams", temporary_.path() / "away");
  ASSERT_TRUE(recorder.wait_for(WatchEvent::Type::deleted, "cam-000001", revision));
  // The watch's thread handles one change after another: once the marker is
  // seen, the check that followed the move is over.
  const uint64_t marker = other.create(sample_instance("marker-000001"));
  ASSERT_TRUE(recorder.wait_for(WatchEvent::Type::upserted, "marker-000001", marker));
  const uint64_t reads = store_.watch_file_reads() - reads_before;
  EXPECT_GE(reads, 2u) << "the moved Instance, and the marker";
  EXPECT_LT(reads, uint64_t{kElsewhere}) << "the other namespace's Instances were read again";
}

// Runs in a forked child: increments COUNT and writes each value it wrote to
// out_fd. Returns the exit status.
int increment_in_child(const std::filesystem::path& directory, int increments, int out_fd) {
  try {
    FileInstanceStore store(directory);
    for (int i = 0; i < increments; ++i) {
      uint64_t written = 0;
      if (!update_with_retry(store, "default", "counter-000001", increment_count(written),
                             kContendedAttempts)) {
        return 2;
      }
      if (::write(out_fd, &written, sizeof written) != sizeof written) return 3;
    }
    return 0;
  } catch (...) {
    return 1;
  }
}

TEST(FileInstanceStoreAcrossProcesses, CompareAndSwapLosesNoUpdate) {
  constexpr int kProcesses = 3;
  constexpr int kIncrements = 200;
  constexpr uint64_t kTotal = uint64_t{kProcesses} * kIncrements;
  const TemporaryDirectory temporary(TemporaryDirectory::Medium::memory);
  const std::filesystem::path directory = temporary.path() / "store";
  {
    // Closed before forking, so that no thread of the store's can hold a lock
    // (the sanitizers' allocator's, say) that a child would wait for forever.
    FileInstanceStore store(directory);
    Instance counter = sample_instance("counter-000001");
    counter.broker_properties[kCountProperty] = "0";
    store.create(counter);
  }

  int pipe_ends[2];
  ASSERT_EQ(::pipe(pipe_ends), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(pipe_ends[0]);
      ::_exit(increment_in_child(directory, kIncrements, pipe_ends[1]));
    }
    children.push_back(child);
  }
  ::close(pipe_ends[1]);
  std::vector<uint64_t> written;
  uint64_t value = 0;
  while (::read(pipe_ends[0], &value, sizeof value) == sizeof value) written.push_back(value);
  ::close(pipe_ends[0]);
  for (const pid_t child : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }

  FileInstanceStore store(directory);
  EXPECT_EQ(count_of(store.get("default", "counter-000001")->instance), kTotal);
  std::vector<uint64_t> expected(kTotal);
  std::iota(expected.begin(), expected.end(), 1);
  std::sort(written.begin(), written.end());
  EXPECT_EQ(written, expected);
}

}  // namespace
}  // namespace dowser::store::testing
