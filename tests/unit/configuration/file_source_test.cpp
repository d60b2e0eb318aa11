#include "configuration.hpp"
#include "log_capture.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>

namespace dowser::configuration {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Changes must take effect well within a second.
constexpr auto kWithinASecond = 1s;

struct Event {
  enum class Kind { upserted, removed, invalid, valid } kind;
  Configuration configuration;                               // upserted
  std::string namespace_name;                                // removed
  std::string name;                                          // removed
  std::string source;                                        // invalid, valid
  std::string field_path;                                    // invalid
  std::string reason;                                        // invalid
  std::optional<std::pair<std::string, std::string>> about;  // invalid: the Configuration, if known
};

// Records the source's events; tests wait for conditions on it with a deadline.
class EventLog {
 public:
  FileConfigurationSource::Events callbacks() {
    return {
        [this](const Configuration& c) {
          add({Event::Kind::upserted, c, {}, {}, {}, {}, {}, {}});
        },
        [this](const std::string& ns, const std::string& name) {
          add({Event::Kind::removed, {}, ns, name, {}, {}, {}, {}});
        },
        [this](const ConfigurationError& e) {
          add({Event::Kind::invalid,
               {},
               {},
               {},
               e.source(),
               e.field_path(),
               e.reason(),
               e.configuration()});
        },
        [this](const std::string& source) {
          add({Event::Kind::valid, {}, {}, {}, source, {}, {}, {}});
        },
    };
  }

  // Waits until some event from index `from` on satisfies matches.
  template <typename Predicate>
  bool wait_for_event(std::size_t from, Predicate matches,
                      std::chrono::steady_clock::duration timeout = kWithinASecond) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] {
      return std::any_of(
          events_.begin() + static_cast<std::ptrdiff_t>(std::min(from, events_.size())),
          events_.end(), matches);
    });
  }

  std::vector<Event> since(std::size_t from) const {
    std::lock_guard lock(mutex_);
    return {events_.begin() + static_cast<std::ptrdiff_t>(std::min(from, events_.size())),
            events_.end()};
  }

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return events_.size();
  }

 private:
  void add(Event event) {
    {
      std::lock_guard lock(mutex_);
      events_.push_back(std::move(event));
    }
    changed_.notify_all();
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Event> events_;
};

auto upserted(const std::string& name) {
  return [name](const Event& e) {
    return e.kind == Event::Kind::upserted && e.configuration.name == name;
  };
}
auto removed(const std::string& name) {
  return [name](const Event& e) { return e.kind == Event::Kind::removed && e.name == name; };
}
auto invalid_from(const std::string& source) {
  return [source](const Event& e) { return e.kind == Event::Kind::invalid && e.source == source; };
}
auto valid_from(const std::string& source) {
  return [source](const Event& e) { return e.kind == Event::Kind::valid && e.source == source; };
}

std::string manifest(const std::string& name, const std::string& details = "", int capacity = 1) {
  return "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: " + name +
         "\nspec:\n  discoveryHandler:\n    name: debugEcho\n    discoveryDetails: \"" + details +
         "\"\n  capacity: " + std::to_string(capacity) + "\n";
}

std::string two(const std::string& first, const std::string& second) {
  return first + "---\n" + second;
}

class FileSourceTest : public ::testing::Test {
 protected:
  void start() {
    source_ = std::make_unique<FileConfigurationSource>(directory_, log_.callbacks());
    source_->start();
  }

  std::string path(const std::string& file) const { return (directory_ / file).string(); }

  void write(const std::string& file, const std::string& text) const {
    std::ofstream(directory_ / file) << text;
  }

  // As editors save: write a temporary file, then rename it over the old one.
  void write_by_rename(const std::string& file, const std::string& text) const {
    write(file + ".tmp", text);
    fs::rename(directory_ / (file + ".tmp"), directory_ / file);
  }

  // Every event caused by earlier changes has been delivered once this
  // returns: files are processed in order, and the sentinel sorts last.
  void wait_until_settled() {
    const std::string name = "zz-sentinel-" + std::to_string(++sentinels_);
    std::size_t mark = log_.size();
    write(name + ".yaml", manifest(name));
    ASSERT_TRUE(log_.wait_for_event(mark, upserted(name)));
  }

  void expect_read_once_closed(const std::string& file, const std::function<void()>& meanwhile);

  // directory_ is what is followed now; `old`, where it led before, is not.
  void expect_followed_here_not_in(const fs::path& old) {
    const std::size_t mark = log_.size();
    write("c.yaml", manifest("c"));
    EXPECT_TRUE(log_.wait_for_event(mark, upserted("c"))) << "followed here";
    std::ofstream(old / "d.yaml") << manifest("d");
    wait_until_settled();
    EXPECT_EQ(count(log_.since(mark), upserted("d")), 0u) << old << " is not followed";
  }

  static std::size_t count(const std::vector<Event>& events,
                           const std::function<bool(const Event&)>& matches) {
    return static_cast<std::size_t>(std::count_if(events.begin(), events.end(), matches));
  }

  const test::TempDir temp_dir_{"dowser-configuration"};  // outlives the source
  fs::path directory_ = temp_dir_.path();                 // a test may point it elsewhere
  EventLog log_;
  std::unique_ptr<FileConfigurationSource> source_;
  int sentinels_ = 0;
};

TEST_F(FileSourceTest, InitialScanDeliversEverythingBeforeStartReturns) {
  write("b.json", R"({"apiVersion": "akri.sh/v0", "kind": "Configuration",
    "metadata": {"name": "from-json"}, "spec": {"discoveryHandler": {"name": "udev"}}})");
  write("a.yaml", two(manifest("first"), manifest("second")));
  write("c.yml", manifest("from-yml"));
  write("bad.yaml", manifest("broken", "", 0));
  write("notes.txt", manifest("from-txt"));
  start();

  std::vector<Event> all = log_.since(0);
  EXPECT_EQ(count(all, valid_from(path("a.yaml"))), 1u);
  EXPECT_EQ(count(all, valid_from(path("b.json"))), 1u);
  EXPECT_EQ(count(all, valid_from(path("bad.yaml"))), 0u);
  std::vector<Event> events;
  std::copy_if(all.begin(), all.end(), std::back_inserter(events),
               [](const Event& e) { return e.kind != Event::Kind::valid; });
  ASSERT_EQ(events.size(), 5u);
  EXPECT_TRUE(upserted("first")(events[0]));
  EXPECT_TRUE(upserted("second")(events[1]));
  EXPECT_TRUE(upserted("from-json")(events[2]));
  EXPECT_EQ(events[3].kind, Event::Kind::invalid);
  EXPECT_EQ(events[3].source, path("bad.yaml"));
  EXPECT_EQ(events[3].field_path, "spec.capacity");
  EXPECT_TRUE(upserted("from-yml")(events[4]));
}

TEST_F(FileSourceTest, MissingDirectoryIsAClearError) {
  directory_ /= "missing";
  try {
    start();
    FAIL() << "started on a missing directory";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find(directory_.string()), std::string::npos)
        << error.what();
  }
}

TEST_F(FileSourceTest, AddedFileTakesEffectWithinASecond) {
  start();
  write("cam.yaml", manifest("cam"));
  EXPECT_TRUE(log_.wait_for_event(0, upserted("cam"), kWithinASecond));
}

TEST_F(FileSourceTest, ChangedFileUpsertsOnlyWhatChanged) {
  write("cams.yaml", two(manifest("kept"), manifest("edited", "a")));
  start();
  const Configuration before = log_.since(1).at(0).configuration;

  std::size_t mark = log_.size();
  write("cams.yaml", two(manifest("kept"), manifest("edited", "b")));
  ASSERT_TRUE(log_.wait_for_event(mark, upserted("edited")));
  wait_until_settled();
  std::vector<Event> events = log_.since(mark);
  EXPECT_EQ(count(events, upserted("kept")), 0u);
  EXPECT_EQ(count(events, upserted("edited")), 1u);
  EXPECT_EQ(count(events,
                  [](const Event& e) {
                    return e.kind == Event::Kind::removed || e.kind == Event::Kind::invalid;
                  }),
            0u);
  const Configuration after =
      std::find_if(events.begin(), events.end(), upserted("edited"))->configuration;
  EXPECT_FALSE(before.same_discovery(after));

  mark = log_.size();
  write("cams.yaml", two(manifest("kept"), manifest("edited", "b", 4)));
  ASSERT_TRUE(log_.wait_for_event(mark, upserted("edited")));
  events = log_.since(mark);
  const Configuration resized =
      std::find_if(events.begin(), events.end(), upserted("edited"))->configuration;
  EXPECT_EQ(resized.capacity, 4u);
  EXPECT_TRUE(after.same_discovery(resized));
}

TEST_F(FileSourceTest, DefinitionDroppedFromAFileIsRemoved) {
  write("cams.yaml", two(manifest("kept"), manifest("dropped")));
  start();
  std::size_t mark = log_.size();
  write("cams.yaml", manifest("kept"));
  ASSERT_TRUE(log_.wait_for_event(mark, removed("dropped")));
  wait_until_settled();
  EXPECT_EQ(count(log_.since(mark), removed("kept")), 0u);
  EXPECT_EQ(count(log_.since(mark), upserted("kept")), 0u);
}

TEST_F(FileSourceTest, DeletedFileRemovesEachOfItsConfigurations) {
  write("cams.yaml", two(manifest("one"), manifest("two")));
  write("other.yaml", manifest("other"));
  start();
  std::size_t mark = log_.size();
  fs::remove(directory_ / "cams.yaml");
  ASSERT_TRUE(log_.wait_for_event(mark, removed("one")));
  ASSERT_TRUE(log_.wait_for_event(mark, removed("two")));
  wait_until_settled();
  EXPECT_EQ(count(log_.since(mark), removed("other")), 0u);
}

TEST_F(FileSourceTest, RenameOverIsAChangeNotARemoval) {
  write("cam.yaml", two(manifest("cam", "a"), manifest("same")));
  start();
  std::size_t mark = log_.size();
  write_by_rename("cam.yaml", two(manifest("cam", "b"), manifest("same")));
  ASSERT_TRUE(log_.wait_for_event(mark, upserted("cam")));
  wait_until_settled();
  std::vector<Event> events = log_.since(mark);
  EXPECT_EQ(count(events, [](const Event& e) { return e.kind == Event::Kind::removed; }), 0u);
  EXPECT_EQ(count(events, upserted("same")), 0u);
  EXPECT_EQ(count(events, invalid_from(path("cam.yaml.tmp"))), 0u);
}

// A manifest renamed within the directory (or a ConfigMap key renamed) is
// the same Configuration: removing and adding it again would withdraw its
// Instances and the claims of its running pods. Either way round the names sort.
TEST_F(FileSourceTest, AManifestRenamedInTheDirectoryIsNeitherRemovedNorAdded) {
  write("b-cam.yaml", manifest("cam"));
  start();
  for (const auto& [from, to] : {std::pair{"b-cam.yaml", "c-cam.yaml"},  // new name sorts after
                                 std::pair{"c-cam.yaml", "a-cam.yaml"}}) {
    std::size_t mark = log_.size();
    fs::rename(directory_ / from, directory_ / to);
    ASSERT_TRUE(log_.wait_for_event(mark, valid_from(path(to)))) << to;
    wait_until_settled();
    std::vector<Event> events = log_.since(mark);
    EXPECT_EQ(count(events, removed("cam")), 0u) << from << " -> " << to;
    EXPECT_EQ(count(events, upserted("cam")), 0u) << from << " -> " << to;
    EXPECT_EQ(count(events, invalid_from(path(to))), 0u) << "no clash with its own old name";
  }
  // The new file holds it now: deleting it removes the Configuration.
  std::size_t mark = log_.size();
  fs::remove(directory_ / "a-cam.yaml");
  EXPECT_TRUE(log_.wait_for_event(mark, removed("cam")));
}

// One batch that moves a Configuration to a file that also brings a new
// one: the new one had no holder yet when the moved one's clashes were
// checked, which ended dowserd (std::out_of_range on its watch thread).
TEST_F(FileSourceTest, AMoveToAFileThatAlsoAddsAConfigurationTakesBoth) {
  write("a.yaml", manifest("moved"));
  start();
  std::size_t mark = log_.size();
  write("b.yaml", two(manifest("moved"), manifest("new")));
  fs::remove(directory_ / "a.yaml");  // in the same batch: well within the quiet period
  ASSERT_TRUE(log_.wait_for_event(mark, upserted("new")));
  wait_until_settled();
  // The same whether or not a stalled test thread split the batch (then
  // b.yaml was a duplicate for a moment, and said so).
  std::vector<Event> events = log_.since(mark);
  EXPECT_EQ(count(events, removed("moved")), 0u);
  EXPECT_EQ(count(events, upserted("moved")), 0u);
  EXPECT_TRUE(log_.wait_for_event(mark, valid_from(path("b.yaml"))));
}

// A renamed file keeps its Configuration though another file defines the
// same name differently (refused as a duplicate): that one does not take
// over, and stays refused.
TEST_F(FileSourceTest, ARenamedFileKeepsItsConfigurationOverARefusedDuplicate) {
  write("a.yaml", manifest("cam", "first"));
  write("m.yaml", manifest("cam", "duplicate"));
  start();
  std::size_t mark = log_.size();
  fs::rename(directory_ / "a.yaml", directory_ / "z.yaml");
  ASSERT_TRUE(log_.wait_for_event(mark, valid_from(path("z.yaml"))));
  wait_until_settled();
  std::vector<Event> events = log_.since(mark);
  EXPECT_EQ(count(events, upserted("cam")), 0u) << "the duplicate took over";
  EXPECT_EQ(count(events, removed("cam")), 0u);
  EXPECT_EQ(count(events, valid_from(path("m.yaml"))), 0u) << "the duplicate stays refused";
}

// A duplicate whose file then broke takes over from what it duplicated (its
// last good reading keeps running), and its read error stands: the file was
// reported valid, which also let dowserd withdraw what it held for it.
TEST_F(FileSourceTest, ABrokenFileThatTakesADefinitionOverStaysReportedBroken) {
  write("a.yaml", manifest("cam", "from-a"));
  write("g.yaml", manifest("cam", "from-g"));
  start();
  std::size_t mark = log_.size();
  write("g.yaml", "apiVersion: akri.sh/v0\nkind: [\n");
  ASSERT_TRUE(log_.wait_for_event(mark, invalid_from(path("g.yaml"))));
  mark = log_.size();
  fs::remove(directory_ / "a.yaml");
  ASSERT_TRUE(log_.wait_for_event(mark, upserted("cam")));
  wait_until_settled();
  EXPECT_EQ(count(log_.since(mark), valid_from(path("g.yaml"))), 0u);
}

// Two duplicates of a Configuration whose file goes: the first takes it
// over, and the other now names that one as the holder, not the file gone.
TEST_F(FileSourceTest, ADuplicateNamesTheNewHolderWhenTheOldOneGoes) {
  write("a.yaml", manifest("cam", "from-a"));
  write("m.yaml", manifest("cam", "from-m"));
  write("n.yaml", manifest("cam", "from-n"));
  start();
  std::size_t mark = log_.size();
  fs::remove(directory_ / "a.yaml");
  ASSERT_TRUE(log_.wait_for_event(mark, upserted("cam")));
  EXPECT_TRUE(log_.wait_for_event(mark, [&](const Event& e) {
    return invalid_from(path("n.yaml"))(e) &&
           e.reason.find("already defined in " + path("m.yaml")) != std::string::npos;
  }));
}

TEST_F(FileSourceTest, FileMovedAwayRemovesAndMovedInAdds) {
  fs::path outside = directory_ / "outside";
  fs::create_directory(outside);
  write("cam.yaml", manifest("cam"));
  start();
  std::size_t mark = log_.size();
  fs::rename(directory_ / "cam.yaml", outside / "cam.yaml");
  ASSERT_TRUE(log_.wait_for_event(mark, removed("cam")));
  mark = log_.size();
  fs::rename(outside / "cam.yaml", directory_ / "back.yaml");
  ASSERT_TRUE(log_.wait_for_event(mark, upserted("cam")));
}

TEST_F(FileSourceTest, InvalidFileKeepsItsLastGoodConfigurationsUntilFixed) {
  write("cams.yaml", two(manifest("one"), manifest("two")));
  start();
  std::size_t mark = log_.size();
  write("cams.yaml", two(manifest("one"), manifest("two", "", 0)));
  ASSERT_TRUE(log_.wait_for_event(mark, invalid_from(path("cams.yaml"))));
  wait_until_settled();
  std::vector<Event> events = log_.since(mark);
  const Event& invalid =
      *std::find_if(events.begin(), events.end(), invalid_from(path("cams.yaml")));
  EXPECT_EQ(invalid.field_path, "spec.capacity");
  EXPECT_NE(invalid.reason.find("document 2"), std::string::npos) << invalid.reason;
  EXPECT_EQ(count(events, [](const Event& e) { return e.kind == Event::Kind::removed; }), 0u);
  EXPECT_EQ(count(events, upserted("one")), 0u);

  mark = log_.size();
  write("cams.yaml", manifest("two", "", 3));  // fixed, and "one" dropped
  ASSERT_TRUE(log_.wait_for_event(mark, upserted("two")));
  ASSERT_TRUE(log_.wait_for_event(mark, removed("one")));
  ASSERT_TRUE(log_.wait_for_event(mark, valid_from(path("cams.yaml"))));
}

TEST_F(FileSourceTest, DeletingAnInvalidFileRemovesItsLastGoodConfigurations) {
  write("cam.yaml", manifest("cam"));
  start();
  std::size_t mark = log_.size();
  write("cam.yaml", "apiVersion: akri.sh/v0\nkind: [\n");
  ASSERT_TRUE(log_.wait_for_event(mark, invalid_from(path("cam.yaml"))));
  EXPECT_EQ(log_.since(mark).at(0).field_path, "(document)");
  mark = log_.size();
  fs::remove(directory_ / "cam.yaml");
  ASSERT_TRUE(log_.wait_for_event(mark, removed("cam")));
  // Nothing of a deleted file can be wrong any more.
  ASSERT_TRUE(log_.wait_for_event(mark, valid_from(path("cam.yaml"))));
}

// A full rescan (kubelet swapping a ConfigMap's ..data) that comes with a
// broken manifest's deletion still says the file is no longer wrong: the
// daemon holds orphaned Instances while any manifest is refused.
TEST_F(FileSourceTest, ABrokenFileDeletedAsTheDataIsSwappedIsNoLongerReported) {
  write("a.yaml", manifest("a"));
  write("bad.yaml", "apiVersion: akri.sh/v0\nkind: [\n");
  start();
  ASSERT_EQ(count(log_.since(0), invalid_from(path("bad.yaml"))), 1u);
  const std::size_t mark = log_.size();
  fs::remove(directory_ / "bad.yaml");
  fs::create_symlink("a.yaml", directory_ / "..data");  // one batch with the deletion
  EXPECT_TRUE(log_.wait_for_event(mark, valid_from(path("bad.yaml"))));
}

TEST_F(FileSourceTest, SameConfigurationInTwoFilesKeepsTheFirstAndNamesBoth) {
  write("a.yaml", manifest("cam", "from-a"));
  start();
  std::size_t mark = log_.size();
  write("b.yaml", manifest("cam", "from-b"));
  ASSERT_TRUE(log_.wait_for_event(mark, invalid_from(path("b.yaml"))));
  wait_until_settled();
  std::vector<Event> events = log_.since(mark);
  const Event& refused = *std::find_if(events.begin(), events.end(), invalid_from(path("b.yaml")));
  EXPECT_EQ(refused.field_path, "metadata.name");
  EXPECT_NE(refused.reason.find(path("a.yaml")), std::string::npos) << refused.reason;
  // Named, so that dowserd does not take b.yaml for a file it cannot read
  // (which would keep the Instances of every Configuration not found).
  EXPECT_EQ(refused.about, (std::pair<std::string, std::string>{"default", "cam"}));
  EXPECT_EQ(count(events, upserted("cam")), 0u);
  EXPECT_EQ(count(events, valid_from(path("b.yaml"))), 0u);

  // Once the first definition goes, the second takes over without a removal.
  mark = log_.size();
  fs::remove(directory_ / "a.yaml");
  ASSERT_TRUE(log_.wait_for_event(mark, upserted("cam")));
  wait_until_settled();
  events = log_.since(mark);
  EXPECT_EQ(count(events, removed("cam")), 0u);
  EXPECT_EQ(count(events, valid_from(path("b.yaml"))), 1u);
  EXPECT_EQ(
      std::find_if(events.begin(), events.end(), upserted("cam"))->configuration.discovery_details,
      "from-b");
}

// Live, the file read first keeps a name; at a start files are read in name
// order. With an owners file, the one that held the name keeps it across a
// restart, though another file sorts first.
TEST_F(FileSourceTest, TheFileHoldingANameSeveralDefineKeepsItAcrossARestart) {
  const test::TempDir state_dir{"dowser-state"};
  const fs::path owners = state_dir.path() / "configuration-owners";
  auto start_keeping_owners = [&] {
    source_ = std::make_unique<FileConfigurationSource>(directory_, log_.callbacks(), owners);
    source_->start();
  };
  write("b.yaml", manifest("cam", "from-b"));
  start_keeping_owners();
  std::size_t mark = log_.size();
  write("a.yaml", manifest("cam", "from-a"));  // sorts first, came second
  ASSERT_TRUE(log_.wait_for_event(mark, invalid_from(path("a.yaml"))));
  wait_until_settled();
  source_->stop();

  mark = log_.size();
  start_keeping_owners();
  std::vector<Event> events = log_.since(mark);
  const auto cam = std::find_if(events.begin(), events.end(), upserted("cam"));
  ASSERT_NE(cam, events.end());
  EXPECT_EQ(cam->configuration.discovery_details, "from-b");
  EXPECT_EQ(count(events, invalid_from(path("a.yaml"))), 1u);
  EXPECT_EQ(count(events, invalid_from(path("b.yaml"))), 0u);

  // Without it, name order decides.
  source_->stop();
  mark = log_.size();
  start();
  events = log_.since(mark);
  EXPECT_EQ(
      std::find_if(events.begin(), events.end(), upserted("cam"))->configuration.discovery_details,
      "from-a");
}

// An owners file that cannot be read costs only which file holds a name
// several define: the source starts, and the warning names the file.
TEST_F(FileSourceTest, AnOwnersFileThatCannotBeReadIsToldAndTheSourceStarts) {
  const test::TempDir state_dir{"dowser-state"};
  const fs::path owners = state_dir.path() / "configuration-owners";
  fs::create_directories(owners);
  const test::LogCapture captured;
  write("a.yaml", manifest("cam", "from-a"));
  source_ = std::make_unique<FileConfigurationSource>(directory_, log_.callbacks(), owners);
  source_->start();
  const std::vector<Event> events = log_.since(0);
  EXPECT_EQ(count(events, upserted("cam")), 1u);
  EXPECT_NE(captured.text().find("cannot read " + owners.string() +
                                 ": Is a directory; which file holds a name several define"),
            std::string::npos)
      << captured.text();
}

// Writes half of a manifest of "cam" to `file` and, with it still open, does
// `meanwhile`; then writes the rest and closes it. Read half written, it
// would be a valid Configuration with the rest missing (its details): it
// must be read once, whole, once closed.
void FileSourceTest::expect_read_once_closed(const std::string& file,
                                             const std::function<void()>& meanwhile) {
  const std::string whole = manifest("cam", "all-of-it");
  const std::string half = whole.substr(0, whole.find("    discoveryDetails"));
  const std::size_t mark = log_.size();
  {
    std::ofstream writing(directory_ / file);
    writing << half << std::flush;
    meanwhile();
    // Past the 400 ms within which a change is read, while the file is open.
    EXPECT_FALSE(log_.wait_for_event(mark, upserted("cam"), std::chrono::seconds(1)))
        << "read while still being written";
    writing << whole.substr(half.size());
  }
  ASSERT_TRUE(log_.wait_for_event(mark, upserted("cam")));
  const std::vector<Event> events = log_.since(mark);
  ASSERT_EQ(count(events, upserted("cam")), 1u);
  EXPECT_EQ(
      std::find_if(events.begin(), events.end(), upserted("cam"))->configuration.discovery_details,
      "all-of-it");
}

TEST_F(FileSourceTest, ANewFileIsReadOnceItsWriterClosesIt) {
  start();
  expect_read_once_closed("cam.yaml", [] {});
}

// Renamed while still open, it is still being written.
TEST_F(FileSourceTest, ANewFileRenamedBeforeItsWriterClosesItIsReadOnceClosed) {
  start();
  expect_read_once_closed("a.yaml",
                          [&] { fs::rename(directory_ / "a.yaml", directory_ / "b.yaml"); });
}

// A full rescan (here a ConfigMap's ..data link swapped) leaves it out too.
TEST_F(FileSourceTest, ARescanLeavesOutAFileStillBeingWritten) {
  start();
  expect_read_once_closed("cam.yaml",
                          [&] { fs::create_directory_symlink(".", directory_ / "..data"); });
}

// Also one whose name held a definition before: deleted and created again
// at once (well within the 100 ms a change waits), it is being written.
TEST_F(FileSourceTest, ARescanLeavesOutAFileWrittenAnewUnderAKnownName) {
  write("cam.yaml", manifest("cam", "before"));
  start();
  fs::remove(directory_ / "cam.yaml");
  expect_read_once_closed("cam.yaml",
                          [&] { fs::create_directory_symlink(".", directory_ / "..data"); });
}

TEST_F(FileSourceTest, HiddenAndTemporaryFilesAreIgnored) {
  write(".hidden.yaml", manifest("hidden"));
  start();
  EXPECT_EQ(log_.size(), 0u);
  write("backup.yaml~", manifest("backup"));
  write(".cam.yaml.swp", manifest("swap"));
  write("cam.yaml.swp", manifest("swap2"));
  write("cam.yaml.tmp", manifest("temporary"));
  write("readme.txt", "not a manifest");
  wait_until_settled();
  // Only the sentinel, which may be reported valid too.
  for (const Event& event : log_.since(0)) {
    EXPECT_TRUE(upserted("zz-sentinel-1")(event) || valid_from(path("zz-sentinel-1.yaml"))(event))
        << "event about " << event.configuration.name << event.source;
  }
  EXPECT_EQ(count(log_.since(0), upserted("zz-sentinel-1")), 1u);
}

// A directory renamed away (or removed) is not followed where it went; once
// one is back at the path, what it holds is what runs.
TEST_F(FileSourceTest, ALostDirectoryIsFollowedAgainOnceItIsBack) {
  const fs::path moved = directory_ / "moved";
  directory_ /= "configs";
  fs::create_directories(directory_);
  write("a.yaml", manifest("a"));
  start();

  std::size_t mark = log_.size();
  fs::rename(directory_, moved);
  ASSERT_TRUE(log_.wait_for_event(mark, invalid_from(directory_.string())));
  auto lost = log_.since(mark);
  EXPECT_NE(lost.back().reason.find("removed or renamed"), std::string::npos) << lost.back().reason;
  EXPECT_EQ(count(lost, removed("a")), 0u) << "what was read keeps running meanwhile";

  fs::create_directories(directory_);
  write("b.yaml", manifest("b"));
  // It is looked for once a second.
  EXPECT_TRUE(log_.wait_for_event(mark, upserted("b"), 5s));
  EXPECT_TRUE(log_.wait_for_event(mark, removed("a"))) << "a.yaml is not in the new directory";
  EXPECT_TRUE(log_.wait_for_event(mark, valid_from(directory_.string())));

  expect_followed_here_not_in(moved);
}

// A directory given as a symlink that is switched to another directory (how
// deployment tools publish a new version at once) is followed to the new
// one at once: no event on the old directory tells of it.
TEST_F(FileSourceTest, ASymlinkSwitchedToAnotherDirectoryIsFollowedThere) {
  const fs::path first = directory_ / "v1", second = directory_ / "v2";
  fs::create_directories(first);
  fs::create_directories(second);
  std::ofstream(first / "a.yaml") << manifest("a");
  std::ofstream(second / "b.yaml") << manifest("b");
  fs::create_symlink("v1", directory_ / "configs");
  directory_ /= "configs";
  start();
  ASSERT_EQ(count(log_.since(0), upserted("a")), 1u);

  std::size_t mark = log_.size();
  fs::create_symlink("v2", first.parent_path() / "configs.tmp");
  fs::rename(first.parent_path() / "configs.tmp", directory_);  // ln -sfn v2 configs, atomically
  EXPECT_TRUE(log_.wait_for_event(mark, upserted("b")));
  EXPECT_TRUE(log_.wait_for_event(mark, removed("a"))) << "a.yaml is not in v2";
  wait_until_settled();
  EXPECT_EQ(count(log_.since(mark), invalid_from(directory_.string())), 0u)
      << "nothing was ever missing";

  expect_followed_here_not_in(first);

  // A symlink removed is a directory lost, until it is back.
  mark = log_.size();
  fs::remove(directory_);
  ASSERT_TRUE(log_.wait_for_event(mark, invalid_from(directory_.string())));
  fs::create_symlink("v1", directory_);
  EXPECT_TRUE(log_.wait_for_event(mark, upserted("d"), 5s));
  EXPECT_TRUE(log_.wait_for_event(mark, valid_from(directory_.string())));
}

// A FIFO with a manifest's name would block its reader: it is reported, not
// read, and the directory is still followed.
TEST_F(FileSourceTest, AFifoWithAManifestNameIsReportedUnread) {
  start();
  std::size_t mark = log_.size();
  ASSERT_EQ(::mkfifo(path("zz.yaml").c_str(), 0600), 0);
  ASSERT_TRUE(log_.wait_for_event(mark, invalid_from(path("zz.yaml"))));
  EXPECT_EQ(log_.since(mark).back().reason, "not a regular file; ignored");
  mark = log_.size();
  fs::remove(path("zz.yaml"));
  EXPECT_TRUE(log_.wait_for_event(mark, valid_from(path("zz.yaml"))));
  write("a.yaml", manifest("a"));
  EXPECT_TRUE(log_.wait_for_event(mark, upserted("a")));
}

// A symbolic link whose target is missing is there (ls shows it): reported
// with where it leads, not taken for a removed file; once the link is made
// again with a target there, it is read.
TEST_F(FileSourceTest, ALinkToNothingIsReportedAndReadOnceMadeAgain) {
  start();
  std::size_t mark = log_.size();
  const fs::path target = directory_ / "l.target";  // no manifest name: not read itself
  fs::create_symlink(target, path("l.yaml"));
  ASSERT_TRUE(log_.wait_for_event(mark, invalid_from(path("l.yaml"))));
  EXPECT_EQ(log_.since(mark).back().reason,
            "a symbolic link to " + target.string() +
                ", which does not exist; read again when the link changes");
  try {  // what dowserctl validate reads it with
    dowser::configuration::read_manifest(path("l.yaml"));
    ADD_FAILURE() << "read_manifest read a link to nothing";
  } catch (const dowser::configuration::ConfigurationError& e) {
    EXPECT_EQ(e.reason().rfind("a symbolic link to " + target.string(), 0), 0u) << e.reason();
  }

  mark = log_.size();
  std::ofstream(target) << manifest("l");
  fs::remove(path("l.yaml"));
  fs::create_symlink(target, path("l.yaml"));
  EXPECT_TRUE(log_.wait_for_event(mark, upserted("l")));
}

// A file that cannot be looked at (here a symlink loop; for a non-root
// daemon also a directory made unreadable) is an error, not a removal: what
// was read of it keeps running, as for a file that turns invalid.
TEST_F(FileSourceTest, AFileThatCannotBeLookedAtKeepsItsConfigurations) {
  write("a.yaml", manifest("a"));
  start();
  std::size_t mark = log_.size();
  fs::create_symlink("a.yaml", directory_ / "loop.tmp");
  fs::rename(directory_ / "loop.tmp", directory_ / "a.yaml");  // a.yaml -> a.yaml
  ASSERT_TRUE(log_.wait_for_event(mark, invalid_from(path("a.yaml"))));
  wait_until_settled();
  auto events = log_.since(mark);
  EXPECT_EQ(count(events, removed("a")), 0u);
  for (const auto& e : events) {
    if (e.kind == Event::Kind::invalid) {
      EXPECT_EQ(e.field_path, "(file)") << e.reason;
    }
  }
}

// Root as a systemd unit without CAP_DAC_OVERRIDE runs it: files are read
// with their owner's permissions. Drops both read overrides from this
// thread's effective set (threads started meanwhile inherit it) and puts
// them back when it goes. Raw syscalls: libcap is not a dependency.
class WithoutReadOverride {
 public:
  WithoutReadOverride() {
    header_.version = _LINUX_CAPABILITY_VERSION_3;
    if (::syscall(SYS_capget, &header_, saved_) != 0) return;
    if ((saved_[0].effective & (1u << CAP_CHOWN)) == 0) return;  // not root: nothing to drop
    __user_cap_data_struct dropped[2] = {saved_[0], saved_[1]};
    dropped[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH));
    dropped_ = ::syscall(SYS_capset, &header_, dropped) == 0;
  }
  ~WithoutReadOverride() {
    if (dropped_) ::syscall(SYS_capset, &header_, saved_);
  }
  bool dropped() const { return dropped_; }

 private:
  __user_cap_header_struct header_{};
  __user_cap_data_struct saved_[2]{};
  bool dropped_ = false;
};

// chmod and chown change no content, and fire only IN_ATTRIB: a manifest
// made readable must be read then, not at its next write or a restart.
TEST_F(FileSourceTest, AManifestMadeReadableIsReadThen) {
  write("a.yaml", manifest("a"));
  fs::permissions(path("a.yaml"), fs::perms::owner_read | fs::perms::owner_write);
  ASSERT_EQ(::chown(path("a.yaml").c_str(), 65534, 65534), 0) << "tests run as root";
  WithoutReadOverride unprivileged;
  if (!unprivileged.dropped()) GTEST_SKIP() << "needs root to drop CAP_DAC_OVERRIDE";
  start();
  std::size_t mark = 0;
  ASSERT_TRUE(log_.wait_for_event(mark, invalid_from(path("a.yaml"))));
  EXPECT_EQ(log_.since(mark).back().reason, "Permission denied");

  mark = log_.size();
  fs::permissions(path("a.yaml"), fs::perms::others_read, fs::perm_options::add);
  EXPECT_TRUE(log_.wait_for_event(mark, upserted("a"), 10s));
}

TEST_F(FileSourceTest, StopEndsTheWatchAndCanBeRepeated) {
  start();
  source_->stop();
  source_->stop();
  std::size_t mark = log_.size();
  write("late.yaml", manifest("late"));
  EXPECT_FALSE(log_.wait_for_event(mark, upserted("late"), 300ms));
}

}  // namespace
}  // namespace dowser::configuration
