// The loader and the host side of the function table, against real handler
// libraries (debugEcho and the negative fixtures) and against a probe
// handler defined here, which hands its session handle to the test so the
// test can call the host table exactly as a handler thread would.
#include "handler_registry.hpp"
#include "eventually.hpp"
#include "temp_dir.hpp"
#include "writer_preferring_mutex.hpp"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>

namespace fs = std::filesystem;
using namespace dowser::host;
using namespace std::chrono_literals;

namespace {

// ---- helpers ---------------------------------------------------------------

using dowser::test::TempDir;

// The refusal load() ends in; a failure of the test if what it loads is taken.
template <typename Load>
HandlerLoadError refusal(Load load, const fs::path& what) {
  try {
    load();
  } catch (const HandlerLoadError& e) {
    return e;
  }
  ADD_FAILURE() << what << " loaded, but it should have been refused";
  return HandlerLoadError(what, "", "");
}

HandlerLoadError load_error(const fs::path& file, const LoadPolicy& policy = {}) {
  return refusal([&] { load_handler(file, policy); }, file);
}

void ignore_log(int32_t, std::string_view) {}

// Records everything a session delivers; waits with a deadline.
class RecordingSink : public SessionSink {
 public:
  void on_snapshot(Snapshot snapshot) override {
    update([&] { snapshots.push_back(snapshot); });
  }
  void on_error(dowser_status code, std::string message) override {
    if (std::exchange(refuse_next_error, false)) throw std::runtime_error("the sink failed");
    update([&] { errors.emplace_back(code, message); });
  }
  void on_log(int32_t level, std::string_view text) override {
    update([&] { logs.emplace_back(level, text); });
  }
  void on_late_call(std::string_view) override {
    update([&] { ++late_calls; });
  }
  void on_bad_report(const std::string& reason) override {
    update([&] { bad_reports.push_back(reason); });
  }
  void on_invalid_devices(const std::vector<InvalidDevice>& devices) override {
    update([&] { invalid_devices.push_back(devices); });
  }
  void on_stop_failed(const std::string& reason) override {
    update([&] { stop_failures.push_back(reason); });
  }

  template <typename Predicate>
  bool wait_until(Predicate predicate, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, timeout, predicate);
  }

  std::mutex mutex;
  std::condition_variable changed;
  std::vector<Snapshot> snapshots;
  std::vector<std::pair<dowser_status, std::string>> errors;
  std::vector<std::string> bad_reports;
  std::vector<std::vector<InvalidDevice>> invalid_devices;  // one entry per snapshot
  std::vector<std::string> stop_failures;
  std::vector<std::pair<int32_t, std::string>> logs;  // log_session lines
  int late_calls = 0;
  bool refuse_next_error = false;  // on_error throws once, as a failing sink would

 private:
  template <typename Change>
  void update(Change change) {
    {
      std::lock_guard lock(mutex);
      change();
    }
    changed.notify_all();
  }
};

// ---- the probe handler -------------------------------------------------------

std::atomic<dowser_host_ctx*> probe_context{nullptr};
std::atomic<dowser_session_host*> probe_session{nullptr};
std::atomic<bool> report_during_stop_refused{false};

dowser_status probe_init(const dowser_host_api*, dowser_host_ctx* context, dowser_str,
                         dowser_handler** out, char*, size_t) {
  probe_context = context;
  static int instance;
  *out = reinterpret_cast<dowser_handler*>(&instance);
  return DOWSER_OK;
}
void probe_destroy(dowser_handler*) {}
dowser_status probe_start(dowser_handler*, const dowser_discover_request*,
                          dowser_session_host* session, dowser_session** out, char*, size_t) {
  probe_session = session;
  static int state;
  *out = reinterpret_cast<dowser_session*>(&state);
  return DOWSER_OK;
}
void probe_stop(dowser_handler*, dowser_session*) {
  // A report while stopping is refused, but it is not a violation (T2).
  report_during_stop_refused =
      host_api().report_devices(probe_session, nullptr, 0) == DOWSER_ERR_STOPPED;
}

dowser_status probe_validate(dowser_handler*, const dowser_discover_request*, char*, size_t) {
  return DOWSER_OK;
}

dowser_handler_api probe_api(uint32_t flags) {
  dowser_handler_api api{};
  api.struct_size = sizeof api;
  api.abi_major = DOWSER_ABI_VERSION_MAJOR;
  api.abi_minor = DOWSER_ABI_VERSION_MINOR;
  api.name = "probe";
  api.version = "1";
  api.flags = flags;
  api.init = probe_init;
  api.destroy = probe_destroy;
  api.start_discovery = probe_start;
  api.stop_discovery = probe_stop;
  return api;
}

dowser_status report(const std::vector<dowser::Device>& devices) {
  dowser::abi::DeviceViews views(devices);
  return host_api().report_devices(probe_session, views.data(), views.size());
}

dowser::Device device(std::string id, dowser::Sharing sharing = dowser::Sharing::handler_default) {
  return dowser::Device{std::move(id), {{"K", "v"}}, {}, {}, sharing};
}

struct ProbeSession {
  explicit ProbeSession(uint32_t flags = 0)
      : api(probe_api(flags)),
        instance(adopt_handler("probe", &api), ignore_log),
        sink(std::make_shared<RecordingSink>()),
        session(instance.start({}, sink)) {}
  dowser_handler_api api;
  HandlerInstance instance;
  std::shared_ptr<RecordingSink> sink;
  std::unique_ptr<DiscoverySession> session;
};

// ---- loading -----------------------------------------------------------------

TEST(HandlerLoader, LoadsDebugEchoAndReadsItsTable) {
  auto handler = load_handler(DEBUG_ECHO_SO);
  EXPECT_EQ(handler->name(), "debugEcho");
  EXPECT_FALSE(handler->version().empty());
  EXPECT_FALSE(handler->shares_devices());
  EXPECT_TRUE(handler->has_validate());
}

TEST(HandlerLoader, RefusesGroupOrOtherWritableFiles) {
  TempDir dir;
  fs::path copy = dir.path() / "libcopy.so";
  fs::copy_file(DEBUG_ECHO_SO, copy);
  fs::permissions(copy, fs::perms::others_write, fs::perm_options::add);
  auto error = load_error(copy);
  EXPECT_EQ(error.stage(), "permissions");
  EXPECT_NE(error.reason().find("writable"), std::string::npos) << error.what();
  EXPECT_NE(std::string(error.what()).find(copy.string()), std::string::npos);
}

// Whoever may write the directory could swap a checked file before dlopen,
// or put a library of their own beside it.
TEST(HandlerLoader, RefusesAFileInAGroupOrOtherWritableDirectory) {
  TempDir dir;
  fs::path copy = dir.path() / "libcopy.so";
  fs::copy_file(DEBUG_ECHO_SO, copy);
  EXPECT_NO_THROW(load_handler(copy));
  fs::permissions(dir.path(), fs::perms::others_write, fs::perm_options::add);
  auto error = load_error(copy);
  EXPECT_EQ(error.stage(), "permissions");
  EXPECT_NE(error.reason().find("its directory " + dir.path().string() + ": mode 0"),
            std::string::npos)
      << error.what();
  EXPECT_NE(error.reason().find("group- or other-writable"), std::string::npos) << error.what();
}

// Through a symlink, the real file's directory counts too; a sticky one
// (/tmp) is fine: others may add files there, not replace ours.
TEST(HandlerLoader, ChecksTheRealFilesDirectoryAndAcceptsAStickyOne) {
  TempDir dir;
  const fs::path open_dir = dir.path() / "open";
  const fs::path links = dir.path() / "links";
  fs::create_directories(open_dir);
  fs::create_directories(links);
  fs::copy_file(DEBUG_ECHO_SO, open_dir / "libreal.so");
  fs::create_symlink(open_dir / "libreal.so", links / "libreal.so");
  fs::permissions(open_dir, fs::perms::all, fs::perm_options::replace);
  auto error = load_error(links / "libreal.so");
  EXPECT_EQ(error.stage(), "permissions");
  EXPECT_NE(error.reason().find("its directory " + open_dir.string() + ": mode 0777"),
            std::string::npos)
      << error.what();

  fs::permissions(open_dir, fs::perms::all | fs::perms::sticky_bit, fs::perm_options::replace);
  EXPECT_NO_THROW(load_handler(links / "libreal.so"));
}

TEST(HandlerLoader, RefusesFilesOwnedBySomeoneUntrusted) {
  LoadPolicy policy;
  policy.trusted_owners = {::geteuid() + 4242};  // the file's real owner is not trusted
  auto error = load_error(DEBUG_ECHO_SO, policy);
  EXPECT_EQ(error.stage(), "permissions");
  EXPECT_NE(error.reason().find("owned by uid"), std::string::npos) << error.what();
}

TEST(HandlerLoader, RefusesWhatIsNotALibrary) {
  TempDir dir;
  fs::path text = dir.path() / "libtext.so";
  { std::ofstream(text) << "not an ELF file"; }
  auto error = load_error(text);
  EXPECT_EQ(error.stage(), "open");
  EXPECT_NE(error.reason().find("(not a shared library: is this the built .so?)"),
            std::string::npos)
      << error.what();
  EXPECT_EQ(error.reason().find("ldd"), std::string::npos) << "no dependency to check";
  EXPECT_EQ(load_error(dir.path() / "missing.so").stage(), "permissions");
}

std::string bytes_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A handler copied into the directory (cp, not mv) can be scanned while
// the copy is still being written: it is refused until it is whole, and
// loads at the next scan once it is.
TEST(HandlerRegistry, AFileStillBeingWrittenIsRefusedUntilItIsWhole) {
  TempDir dir;
  const fs::path file = dir.path() / "libcopied.so";
  const std::string whole = bytes_of(DEBUG_ECHO_SO);
  std::ofstream out(file, std::ios::binary);
  out.write(whole.data(), static_cast<std::streamsize>(whole.size() / 2)).flush();
  HandlerRegistry registry;
  auto partial = registry.scan(dir.path());
  ASSERT_EQ(partial.failures.size(), 1u);
  EXPECT_EQ(partial.failures[0].stage(), "open");
  EXPECT_NE(partial.failures[0].reason().find("is it still being written?"), std::string::npos)
      << partial.failures[0].what();

  out.write(whole.data() + whole.size() / 2,
            static_cast<std::streamsize>(whole.size() - whole.size() / 2))
      .flush();
  auto complete = registry.scan(dir.path());
  EXPECT_TRUE(complete.failures.empty()) << complete.failures[0].what();
  ASSERT_EQ(complete.loaded.size(), 1u);
  EXPECT_EQ(complete.loaded[0]->name(), "debugEcho");
}

// Cut where its last loaded segment begins, a file is mapped past its end:
// the loader's first write there (zeroing the rest of a page for .bss, or a
// relocation) killed dowserd with SIGBUS.
// Without a section table (sstrip leaves none) only the program headers
// tell that the file is not whole.
TEST(HandlerLoader, AFileCutInsideALoadedSegmentIsNotOpened) {
  std::string image = bytes_of(DEBUG_ECHO_SO);
  ElfW(Ehdr) header{};
  std::memcpy(&header, image.data(), sizeof header);
  uint64_t last_segment = 0;
  for (size_t i = 0; i < header.e_phnum; ++i) {
    ElfW(Phdr) segment{};
    std::memcpy(&segment, image.data() + header.e_phoff + i * sizeof segment, sizeof segment);
    if (segment.p_type == PT_LOAD)
      last_segment = std::max<uint64_t>(last_segment, segment.p_offset);
  }
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  ASSERT_GE(last_segment, page);
  header.e_shoff = 0;
  header.e_shnum = 0;
  header.e_shstrndx = 0;
  std::memcpy(image.data(), &header, sizeof header);
  image.resize(last_segment / page * page);

  TempDir dir;
  const fs::path file = dir.path() / "libcut.so";
  { std::ofstream(file, std::ios::binary) << image; }
  auto error = load_error(file);
  EXPECT_EQ(error.stage(), "open");
  EXPECT_NE(error.reason().find("is it still being written?"), std::string::npos) << error.what();
}

TEST(HandlerLoader, RefusesALibraryWithoutTheEntrySymbol) {
  auto error = load_error(FIXTURE_NO_ENTRY);
  EXPECT_EQ(error.stage(), "resolve entry");
  EXPECT_NE(error.reason().find(DOWSER_ENTRY_SYMBOL), std::string::npos);
}

// The usual slip of a C++ author: the entry is there, under its mangled name.
TEST(HandlerLoader, AnEntryWithoutExternCIsNamedWithTheFix) {
  auto error = load_error(FIXTURE_MANGLED_ENTRY);
  EXPECT_EQ(error.stage(), "resolve entry");
  EXPECT_EQ(error.reason(),
            "no exported symbol dowser_get_handler_api: not a dowser handler, or built without "
            "the SDK's export; it exports _Z22dowser_get_handler_apittPcm, which is C++ for "
            "dowser_get_handler_api(unsigned short, unsigned short, char*, unsigned long): "
            "declare the entry extern \"C\" (in C++, or use the SDK's DOWSER_HANDLER macro)");
  EXPECT_EQ(load_error(FIXTURE_NO_ENTRY).reason().find("extern"), std::string::npos)
      << "no hint without a mangled entry";
}

// Read from the file (no code runs): what the dynamic loader can bind to.
TEST(ExportedSymbols, ListsWhatTheFileExportsAndNothingHidden) {
  EXPECT_EQ(exported_symbols(DEBUG_ECHO_SO), std::vector<std::string>{DOWSER_ENTRY_SYMBOL});
  auto extra = exported_symbols(FIXTURE_EXPORTS_EXTRA);
  std::sort(extra.begin(), extra.end());
  EXPECT_EQ(extra, (std::vector<std::string>{"dowser_get_handler_api", "parse_config", "verbose"}));
  TempDir dir;
  { std::ofstream(dir.path() / "libtext.so") << "not an ELF file"; }
  try {
    exported_symbols(dir.path() / "libtext.so");
    FAIL() << "a text file has no symbol table";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), (dir.path() / "libtext.so").string() + ": not an ELF file");
  }
}

// A link left behind by an uninstall: the message names what it points to.
TEST(HandlerLoader, ADanglingSymlinkIsNamedWithItsMissingTarget) {
  TempDir dir;
  fs::create_symlink(dir.path() / "gone.so", dir.path() / "libdangling.so");
  fs::create_symlink("libdangling.so", dir.path() / "libchain.so");
  auto error = load_error(dir.path() / "libdangling.so");
  EXPECT_EQ(error.stage(), "permissions");
  EXPECT_EQ(error.reason(),
            "a symbolic link to " + (dir.path() / "gone.so").string() + ", which does not exist");
  EXPECT_EQ(load_error(dir.path() / "libchain.so").reason(),
            "a symbolic link (through " + (dir.path() / "libdangling.so").string() + ") to " +
                (dir.path() / "gone.so").string() + ", which does not exist");
  fs::create_symlink("../gone.so", dir.path() / "librelative.so");
  EXPECT_EQ(missing_file_reason(dir.path() / "librelative.so"),
            "a symbolic link to ../gone.so (" + (dir.path().parent_path() / "gone.so").string() +
                "), which does not exist");
  EXPECT_EQ(missing_file_reason(dir.path() / "libnothing.so"), "No such file or directory");
}

TEST(HandlerLoader, RefusesAnotherMajor) {
  auto error = load_error(FIXTURE_WRONG_MAJOR);
  EXPECT_EQ(error.stage(), "negotiate");
  EXPECT_NE(error.reason().find("major differs"), std::string::npos) << error.what();
}

TEST(HandlerLoader, RefusesAHandlerNewerThanTheHost) {
  auto error = load_error(FIXTURE_NEWER_MINOR);
  EXPECT_EQ(error.stage(), "negotiate");
  EXPECT_NE(error.reason().find("newer"), std::string::npos) << error.what();
}

TEST(HandlerLoader, AnSdkHandlerRefusesAnOlderHostItself) {
  LoadPolicy policy;
  policy.host_abi_major = DOWSER_ABI_VERSION_MAJOR + 1;
  auto error = load_error(DEBUG_ECHO_SO, policy);
  EXPECT_EQ(error.stage(), "negotiate");
  EXPECT_NE(error.reason().find("handler refused host ABI"), std::string::npos) << error.what();
}

TEST(HandlerLoader, ChecksRequiredMembersOfTheTable) {
  auto api = probe_api(0);
  api.stop_discovery = nullptr;
  const auto one = refusal([&] { adopt_handler("probe", &api); }, "no stop_discovery");
  EXPECT_EQ(one.reason(), "required function stop_discovery is NULL") << one.what();
  api.init = nullptr;
  const auto two = refusal([&] { adopt_handler("probe", &api); }, "no init, no stop_discovery");
  EXPECT_EQ(two.reason(), "required functions init, stop_discovery are NULL") << two.what();
  api = probe_api(0x80);
  EXPECT_THROW(adopt_handler("probe", &api), HandlerLoadError);
  api = probe_api(0);
  api.struct_size = 8;
  EXPECT_THROW(adopt_handler("probe", &api), HandlerLoadError);
}

// A table's versions are read before its size is judged: one of another
// major is refused for its major, however short its layout; one whose size
// is beyond any record's (V3) is refused for that.
TEST(HandlerLoader, ATableIsJudgedByItsMajorFirstAndItsSizeNext) {
  auto api = probe_api(0);
  api.abi_major = DOWSER_ABI_VERSION_MAJOR + 1;
  api.struct_size = 8;
  const auto other_major = refusal([&] { adopt_handler("probe", &api); }, "another major");
  EXPECT_EQ(other_major.stage(), "negotiate") << other_major.what();
  EXPECT_NE(other_major.reason().find("(major differs)"), std::string::npos) << other_major.what();

  api = probe_api(0);
  api.struct_size = DOWSER_MAX_RECORD_SIZE + 1;
  const auto too_large = refusal([&] { adopt_handler("probe", &api); }, "a table too large");
  EXPECT_EQ(too_large.stage(), "check table") << too_large.what();
  EXPECT_NE(too_large.reason().find("is above DOWSER_MAX_RECORD_SIZE"), std::string::npos)
      << too_large.what();
}

// The refusal shows the name it refused, escaped, and reads no further than
// a valid name could go (a name without its NUL must not be read past).
TEST(HandlerLoader, ABadNameIsRefusedQuoted) {
  auto api = probe_api(0);
  api.name = "bad name!\x01";
  try {
    adopt_handler("probe", &api);
    ADD_FAILURE() << "accepted";
  } catch (const HandlerLoadError& e) {
    EXPECT_EQ(e.reason(), "name 'bad name!\\x01' is not 1 to 63 characters of [A-Za-z0-9._-]");
  }
  const std::array<char, 80> unterminated = [] {
    std::array<char, 80> name;
    name.fill('a');
    return name;
  }();
  api.name = unterminated.data();
  try {
    adopt_handler("probe", &api);
    ADD_FAILURE() << "accepted";
  } catch (const HandlerLoadError& e) {
    EXPECT_EQ(e.reason(), "name '" + std::string(64, 'a') +
                              "'... is not 1 to 63 characters of "
                              "[A-Za-z0-9._-]");
  }
}

TEST(HandlerLoader, RefusesAMissingDependencyWhenOpeningNotWhenCalling) {
  // The fixture calls a function nobody defines, only from start_discovery:
  // lazy binding would load it and crash later. RTLD_NOW refuses it here.
  auto error = load_error(FIXTURE_UNRESOLVED_SYMBOL);
  EXPECT_EQ(error.stage(), "open");
  EXPECT_NE(error.reason().find("fixture_function_nobody_defines"), std::string::npos)
      << error.what();
}

TEST(HandlerLoader, KeepsTheLibraryLoadedWithItsSymbolsLocal) {
  // A C fixture (no STB_GNU_UNIQUE symbols, which would pin it anyway), copied
  // so that this test's load is the only one of that file.
  TempDir dir;
  fs::path copy = dir.path() / "libkept.so";
  fs::copy_file(FIXTURE_INIT_FAILS, copy);
  load_handler(copy).reset();  // nothing refers to the handler any more

  void* still_loaded = ::dlopen(copy.c_str(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(still_loaded, nullptr) << "the library was unloaded";
  if (still_loaded != nullptr) ::dlclose(still_loaded);  // only the reference NOLOAD took
  EXPECT_EQ(::dlsym(RTLD_DEFAULT, DOWSER_ENTRY_SYMBOL), nullptr)
      << "a handler's symbols must not become global (RTLD_LOCAL)";
}

TEST(HandlerLoader, CopiesTheTableByItsStructSize) {
  // A table from an older minor ends before validate_request: what lies
  // beyond its struct_size is not the handler's and must read as NULL.
  auto api = probe_api(0);
  api.validate_request = probe_validate;
  EXPECT_TRUE(adopt_handler("probe", &api)->has_validate());
  api.struct_size = offsetof(dowser_handler_api, validate_request);
  auto older = adopt_handler("probe", &api);
  EXPECT_FALSE(older->has_validate());
  EXPECT_EQ(older->api().stop_discovery, probe_stop) << "members within struct_size are kept";
}

TEST(HandlerRegistry, RefusesASecondHandlerWithTheSameName) {
  TempDir dir;
  fs::copy_file(DEBUG_ECHO_SO, dir.path() / "liba.so");
  fs::copy_file(DEBUG_ECHO_SO, dir.path() / "libb.so");
  { std::ofstream(dir.path() / "README") << "not a handler"; }
  HandlerRegistry registry;
  auto result = registry.scan(dir.path());
  ASSERT_EQ(result.loaded.size(), 1u);
  EXPECT_EQ(result.loaded[0]->path(), dir.path() / "liba.so");
  ASSERT_EQ(result.failures.size(), 1u);
  EXPECT_EQ(result.failures[0].stage(), "register");
  EXPECT_NE(
      result.failures[0].reason().find("already taken by " + (dir.path() / "liba.so").string()),
      std::string::npos)
      << result.failures[0].what();
  EXPECT_EQ(registry.find("debugEcho"), result.loaded[0]);
  auto again = registry.scan(dir.path());
  ASSERT_EQ(again.failures.size(), 1u) << "still refused while unchanged";
  EXPECT_EQ(again.failures[0].stage(), "register");
}

// The refused library is not kept: the same file rebuilt under a name of its
// own and put in place by rename loads at the next scan, instead of the
// loader handing back the image kept for that path.
TEST(HandlerRegistry, AFileRefusedForItsNameLoadsOnceRenamedInPlace) {
  TempDir dir;
  const fs::path second = dir.path() / "libb.so";
  fs::copy_file(DEBUG_ECHO_SO, dir.path() / "liba.so");
  fs::copy_file(DEBUG_ECHO_SO, second);
  HandlerRegistry registry;
  ASSERT_EQ(registry.scan(dir.path()).failures.size(), 1u);
  void* kept = ::dlopen(second.c_str(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_EQ(kept, nullptr) << "the refused library is still loaded";
  if (kept != nullptr) ::dlclose(kept);

  fs::copy_file(FIXTURE_INIT_FAILS, dir.path() / "fixed.tmp");  // loads; named otherwise
  fs::rename(dir.path() / "fixed.tmp", second);
  auto fixed = registry.scan(dir.path());
  EXPECT_TRUE(fixed.failures.empty()) << fixed.failures[0].what();
  ASSERT_EQ(fixed.loaded.size(), 1u);
  EXPECT_NE(fixed.loaded[0]->name(), "debugEcho");
}

// A file refused once it was open (here, built for another ABI major) and
// then fixed, put in place by rename as the docs say, loads at the next scan:
// the refused library was not kept, so the loader does not hand it back for
// the same path.
TEST(HandlerRegistry, ARefusedFileFixedInPlaceLoadsAtTheNextScan) {
  TempDir dir;
  const fs::path file = dir.path() / "libfoo.so";
  fs::copy_file(FIXTURE_WRONG_MAJOR, file);
  HandlerRegistry registry;
  auto refused = registry.scan(dir.path());
  ASSERT_EQ(refused.failures.size(), 1u);
  EXPECT_EQ(refused.failures[0].stage(), "negotiate");
  void* kept = ::dlopen(file.c_str(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_EQ(kept, nullptr) << "the refused library is still loaded";
  if (kept != nullptr) ::dlclose(kept);

  fs::copy_file(DEBUG_ECHO_SO, dir.path() / "fixed.tmp");
  fs::rename(dir.path() / "fixed.tmp", file);
  auto fixed = registry.scan(dir.path());
  EXPECT_TRUE(fixed.failures.empty()) << fixed.failures[0].what();
  ASSERT_EQ(fixed.loaded.size(), 1u);
  EXPECT_EQ(fixed.loaded[0]->name(), "debugEcho");
}

// A refused library is not kept loaded, nor loaded again (its constructors
// run again) at every rescan while the file is unchanged: the refusal is
// told from memory until the file changes.
TEST(HandlerRegistry, AnUnchangedRefusedFileIsNotLoadedAgain) {
  TempDir dir;
  const fs::path file = dir.path() / "libcounts.so";
  fs::copy_file(FIXTURE_COUNTS_LOADS, file);
  const fs::path loads = dir.path() / "loads";
  ::setenv("FIXTURE_LOAD_LOG", loads.c_str(), 1);
  auto count_loads = [&] {
    std::ifstream log(loads);
    size_t count = 0;
    for (std::string line; std::getline(log, line);) ++count;
    return count;
  };
  HandlerRegistry registry;
  for (int scan = 0; scan < 3; ++scan) {
    auto result = registry.scan(dir.path());
    ASSERT_EQ(result.failures.size(), 1u) << "scan " << scan;
    EXPECT_EQ(result.failures[0].stage(), "negotiate") << result.failures[0].what();
  }
  EXPECT_EQ(count_loads(), 1u) << "loaded again while unchanged";

  fs::last_write_time(file, fs::last_write_time(file) + std::chrono::seconds(1));
  EXPECT_EQ(registry.scan(dir.path()).failures.size(), 1u);
  EXPECT_EQ(count_loads(), 2u) << "a changed file is tried again";
  ::unsetenv("FIXTURE_LOAD_LOG");
}

TEST(HandlerRegistry, ReportsAMissingDirectory) {
  HandlerRegistry registry;
  auto result = registry.scan("/nonexistent/dowser/handlers");
  ASSERT_EQ(result.failures.size(), 1u);
  EXPECT_EQ(result.failures[0].stage(), "scan");
}

// ---- driving handlers ----------------------------------------------------------

TEST(HandlerInstance, InitFailureCarriesTheHandlersMessage) {
  try {
    HandlerInstance instance(load_handler(FIXTURE_INIT_FAILS), ignore_log);
    FAIL() << "init should have failed";
  } catch (const HandlerCallError& e) {
    EXPECT_EQ(e.call(), "init");
    EXPECT_EQ(e.message(), "fixture: init always fails");
  }
}

TEST(HandlerInstance, AnExceptionInStartBecomesAnError) {
  HandlerInstance instance(load_handler(FIXTURE_THROWS_IN_START), ignore_log);
  try {
    instance.start({}, std::make_shared<RecordingSink>());
    FAIL() << "start should have failed";
  } catch (const HandlerCallError& e) {
    EXPECT_EQ(e.call(), "start_discovery");
    EXPECT_EQ(e.status(), DOWSER_ERR_GENERIC);
    EXPECT_EQ(e.message(), "fixture: start throws");
  }
}

// What dowserd logs of a refusal is the message: never nothing.
TEST(HandlerCallError, AnEmptyMessageSaysThereWasNone) {
  const HandlerCallError silent("validate_request", DOWSER_ERR_INVALID_ARGUMENT, "");
  EXPECT_EQ(silent.message(), "");
  EXPECT_EQ(silent.reason(), "(no message)");
  EXPECT_EQ(std::string(silent.what()), "validate_request failed (status 2): (no message)");
  EXPECT_EQ(HandlerCallError("init", DOWSER_ERR_GENERIC, "why").reason(), "why");
}

TEST(HandlerInstance, AnErrorWithoutItsNulIsReadNoFurtherThanTheBuffer) {
  HandlerInstance instance(load_handler(FIXTURE_ERROR_WITHOUT_NUL), ignore_log);
  try {
    instance.start({}, std::make_shared<RecordingSink>());
    FAIL() << "start should have failed";
  } catch (const HandlerCallError& e) {
    EXPECT_EQ(e.status(), DOWSER_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(e.message(), std::string(DOWSER_MAX_ERRLEN, 'A'));
    EXPECT_EQ(e.reason(), std::string(200, 'A') + "... (no NUL within the " +
                              std::to_string(DOWSER_MAX_ERRLEN) +
                              " bytes of the error buffer, against rule O5)");
  }
}

// One byte past err_cap (strncpy, then the NUL at err[err_cap]) lands in the
// guard after the buffer: the call's error says so, whatever its status.
TEST(HandlerInstance, AWriteOnePastTheErrorBufferIsNamed) {
  HandlerInstance instance(load_handler(FIXTURE_ERROR_PAST_CAP), ignore_log);
  for (const auto& call : {std::string("validate_request"), std::string("start_discovery")}) {
    try {
      if (call == "validate_request") instance.validate({});
      if (call == "start_discovery") instance.start({}, std::make_shared<RecordingSink>());
      ADD_FAILURE() << call << " should have failed";
    } catch (const HandlerCallError& e) {
      EXPECT_TRUE(e.wrote_past_buffer()) << call;
      EXPECT_EQ(e.reason(), "wrote past the end of the " + std::to_string(DOWSER_MAX_ERRLEN) +
                                "-byte error buffer it was given (err_cap), against rule O5; "
                                "its message: fixture: refused")
          << call;
    }
  }
}

// A start that succeeded keeps its session although it wrote past the
// buffer (dropping it would leave it running, never stopped): a warning in
// the handler's log says what it did.
TEST(HandlerInstance, ASuccessfulStartThatWrotePastTheBufferKeepsItsSession) {
  std::vector<std::string> warnings;
  HandlerInstance instance(load_handler(FIXTURE_ERROR_PAST_CAP),
                           [&](int32_t level, std::string_view message) {
                             if (level == DOWSER_LOG_WARN) warnings.emplace_back(message);
                           });
  auto session =
      instance.start({"", {{"FIXTURE_START_ANYWAY", "yes"}}}, std::make_shared<RecordingSink>());
  ASSERT_TRUE(session);
  EXPECT_EQ(warnings, std::vector<std::string>{"start_discovery succeeded, but wrote past the end "
                                               "of the " +
                                               std::to_string(DOWSER_MAX_ERRLEN) +
                                               "-byte error buffer it was given (err_cap), "
                                               "against rule O5; its message: fixture: refused"});
  session->stop();
}

// A hand-written table has no trampolines: what it throws must stop at the
// host, as an error naming the call, not end the process.
TEST(HandlerInstance, AnExceptionThrownAcrossTheAbiBecomesAnErrorOfThatCall) {
  std::vector<std::string> logged;
  HandlerInstance instance(load_handler(FIXTURE_RAW_TABLE_THROWS),
                           [&](int32_t level, std::string_view message) {
                             if (level == DOWSER_LOG_ERROR) logged.emplace_back(message);
                           });
  try {
    instance.start({"throw", {}}, std::make_shared<RecordingSink>());
    FAIL() << "start should have failed";
  } catch (const HandlerCallError& e) {
    EXPECT_EQ(e.call(), "start_discovery");
    EXPECT_EQ(e.status(), DOWSER_ERR_GENERIC);
    EXPECT_EQ(e.message(),
              "threw a C++ exception across the C ABI (rule T6): fixture: start throws past the "
              "ABI");
  }
  try {
    instance.validate({"", {}});
    FAIL() << "validate should have failed";
  } catch (const HandlerCallError& e) {
    EXPECT_EQ(e.call(), "validate_request");
    EXPECT_EQ(e.message(), "threw a C++ exception across the C ABI (rule T6)");
  }
  auto sink = std::make_shared<RecordingSink>();
  auto session = instance.start({"", {}}, sink);
  session->stop();
  const std::string stop_threw =
      "stop_discovery threw a C++ exception across the C ABI (rule T6): fixture: stop throws "
      "past the ABI";
  EXPECT_EQ(logged, std::vector<std::string>{stop_threw});
  // Told to the session's sink too, so that a test kit can fail the handler.
  EXPECT_EQ(sink->stop_failures, std::vector<std::string>{stop_threw});
}

TEST(HandlerInstance, DebugEchoReportsItsDescriptionsAndRefusesBadDetails) {
  HandlerInstance instance(load_handler(DEBUG_ECHO_SO), ignore_log);
  auto sink = std::make_shared<RecordingSink>();
  dowser::DiscoverRequest request{"descriptions: [foo0, foo1]",
                                  {{"DEBUG_ECHO_AVAILABILITY_FILE", "/nonexistent/avail"}}};
  auto session = instance.start(request, sink);
  ASSERT_TRUE(sink->wait_until([&] { return !sink->snapshots.empty(); }));
  session->stop();
  const auto& devices = sink->snapshots.front();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].id, "foo0");
  EXPECT_EQ(devices[0].properties.at("DEBUG_ECHO_DESCRIPTION"), "foo0");
  EXPECT_EQ(devices[0].sharing, dowser::Sharing::local) << "resolved from the handler's flags";
  EXPECT_THROW(instance.validate({"{{{ not yaml", {}}), HandlerCallError);
  EXPECT_THROW(instance.start({"", {}}, sink), HandlerCallError);
}

// A handler whose threads report back to back holds its session's lock
// shared nearly all the time: a stop (or an error report), which takes it
// exclusively, must get in ahead of the readers that come after it. Once a
// writer waits, a new reader is held off, which glibc's default rwlock (and
// so std::shared_mutex) does not do.
TEST(SessionLock, AWaitingWriterHoldsOffNewReaders) {
  WriterPreferringMutex mutex;
  std::shared_lock reader(mutex);
  std::atomic<bool> written{false};
  std::thread writer([&] {
    std::unique_lock lock(mutex);
    written = true;
  });
  // Until the writer waits, a second reader gets in.
  const bool held_off = dowser::test::eventually([&] {
    if (!mutex.try_lock_shared()) return true;
    mutex.unlock_shared();
    return false;
  });
  EXPECT_TRUE(held_off) << "new readers still got in while a writer waited";
  EXPECT_FALSE(written);
  reader.unlock();
  writer.join();
  EXPECT_TRUE(written);
}

TEST(DiscoverySession, ReportsAfterStopAreDroppedAndNoticed) {
  HandlerInstance instance(load_handler(FIXTURE_REPORTS_AFTER_STOP), ignore_log);
  auto sink = std::make_shared<RecordingSink>();
  auto session = instance.start({}, sink);
  session->stop();
  size_t delivered = sink->snapshots.size();
  ASSERT_TRUE(sink->wait_until([&] { return sink->late_calls > 0; }))
      << "the fixture reports after stop; the host must notice";
  EXPECT_EQ(sink->snapshots.size(), delivered) << "no snapshot may be delivered after stop";
}

// A real handler library that reports, with a valid device, devices that
// break the device rules, the same snapshot over and over, into the sink
// dowserd uses. Devices are followed by their changes; what the sink tells
// is kept in order.
class BadDevicesSession {
 public:
  BadDevicesSession()
      : sink_(std::make_shared<CoalescingSink>(
            [this] { changed(); },
            [this](const std::string& problem) { changed([&] { told_.push_back(problem); }); })),
        instance_(load_handler(FIXTURE_REPORTS_BAD_DEVICES), ignore_log),
        session_(instance_.start({"", {{"FIXTURE_STATE_FILE", state_file().string()}}}, sink_)) {}

  // Makes the fixture report its device "cam-utf8" valid, or not.
  void fix_cam_utf8(bool fixed) {
    std::ofstream(dir_.path() / "state.new") << (fixed ? "fixed" : "bad");
    fs::rename(dir_.path() / "state.new", state_file());
  }

  bool devices_become(const std::set<std::string>& expected) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 5s, [&] {
      while (auto changes = sink_->take_changes()) {
        if (changes->complete) devices_.clear();
        for (const auto& device : changes->gone) devices_.erase(device.id);
        for (const auto& device : changes->reported) devices_.insert(device.id);
      }
      return devices_ == expected;
    });
  }

  std::vector<std::string> told() {
    std::lock_guard lock(mutex_);
    return told_;
  }

  void stop() { session_->stop(); }

 private:
  fs::path state_file() const { return dir_.path() / "state"; }

  template <typename Change>
  void changed(Change change) {
    {
      std::lock_guard lock(mutex_);
      change();
    }
    changed_.notify_all();
  }
  void changed() {
    changed([] {});
  }

  TempDir dir_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> told_;
  std::set<std::string> devices_;
  std::shared_ptr<CoalescingSink> sink_;
  HandlerInstance instance_;
  std::unique_ptr<DiscoverySession> session_;
};

TEST(DiscoverySession, DevicesThatBreakTheRulesAreLeftOutAndToldOncePerProblemSet) {
  BadDevicesSession session;
  ASSERT_TRUE(session.devices_become({"good"}));
  const std::string left_out = "device left out of the snapshot: ";
  const std::string bad_utf8 =
      left_out + "device \"cam-utf8\": property \"NAME\": value is not valid UTF-8 (byte 4)";
  // The fixture reported twice before its start returned, and goes on.
  EXPECT_EQ(
      session.told(),
      (std::vector<std::string>{
          bad_utf8,
          left_out + "device 3: struct_size 4 is smaller than the 1.0 device record (76 "
                     "bytes): rule V3",
          left_out + "device \"cam-env\": property \"A=B\": not a valid environment variable "
                     "name; device \"cam-env\": property \"NUL\": value contains a NUL byte "
                     "(byte 1); device \"cam-env\": mount 1: container path \"data\" is not "
                     "absolute; device \"cam-env\": mount 1: host path \"../etc\" is not "
                     "absolute; device \"cam-env\": device node 1: permissions \"xyz\" must be "
                     "a non-empty subset of \"rwm\"",
          left_out + "device 5: id is empty; device 5: property 1: key is empty",
      }));

  session.fix_cam_utf8(true);
  ASSERT_TRUE(session.devices_become({"cam-utf8", "good"})) << "valid again: accepted";
  EXPECT_EQ(session.told().size(), 4u) << "the others are still told only once";

  session.fix_cam_utf8(false);
  ASSERT_TRUE(session.devices_become({"good"}));
  auto told = session.told();
  ASSERT_EQ(told.size(), 5u);
  EXPECT_EQ(told.back(), bad_utf8) << "bad again: news again";
  session.stop();
}

TEST(DiscoverySession, ACrashInStartTakesDownOnlyTheProcessThatRanIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto handler = load_handler(FIXTURE_CRASHES_IN_START);  // loading is harmless
  EXPECT_DEATH(
      {
        HandlerInstance instance(handler, ignore_log);
        instance.start({}, std::make_shared<RecordingSink>());
      },
      "");
}

// A level none of DOWSER_LOG_* names says only that the handler got the call
// wrong: the line is a warning that says so, not an error.
TEST(HostTable, ALineWithAnInvalidLogLevelIsAWarningThatNamesTheLevel) {
  std::vector<std::pair<int32_t, std::string>> logged;
  const dowser_handler_api api = probe_api(0);
  HandlerInstance instance(adopt_handler("probe", &api), [&](int32_t level, std::string_view text) {
    logged.emplace_back(level, text);
  });
  for (int32_t level : {99, -1, DOWSER_LOG_ERROR, DOWSER_LOG_TRACE})
    host_api().log(probe_context, level, dowser::abi::view("line"));
  const auto invalid = [](int32_t level) {
    return std::pair<int32_t, std::string>(
        DOWSER_LOG_WARN, "line (logged with invalid level " + std::to_string(level) +
                             ", not one of DOWSER_LOG_TRACE..DOWSER_LOG_ERROR)");
  };
  EXPECT_EQ(logged,
            (std::vector<std::pair<int32_t, std::string>>{
                invalid(99), invalid(-1), {DOWSER_LOG_ERROR, "line"}, {DOWSER_LOG_TRACE, "line"}}));
}

// A megabyte per log line, or per retried error, would fill the node's disk
// and the status API: both are cut, at a UTF-8 character, saying how long.
TEST(HostTable, HugeLogLinesAndErrorMessagesAreCutSayingHowLong) {
  std::vector<std::string> logged;
  const dowser_handler_api api = probe_api(0);
  HandlerInstance instance(adopt_handler("probe", &api),
                           [&](int32_t, std::string_view text) { logged.emplace_back(text); });
  const std::string huge = "\xc3\xa9" + std::string(1'000'000, 'x');  // starts with an é
  host_api().log(probe_context, DOWSER_LOG_INFO, dowser::abi::view(huge));
  host_api().log(probe_context, DOWSER_LOG_INFO,
                 dowser::abi::view(std::string_view(huge).substr(0, 2)));
  ASSERT_EQ(logged.size(), 2u);
  EXPECT_EQ(logged[0], huge.substr(0, DOWSER_MAX_LOG_LEN) + "... (1000002 bytes)");
  EXPECT_EQ(logged[1], "\xc3\xa9") << "a short line is left whole";

  ProbeSession probe;
  ASSERT_EQ(host_api().report_error(probe_session, DOWSER_ERR_GENERIC, dowser::abi::view(huge)),
            DOWSER_OK);
  ASSERT_EQ(probe.sink->errors.size(), 1u);
  EXPECT_EQ(probe.sink->errors[0].second,
            huge.substr(0, DOWSER_MAX_ERRLEN) + "... (1000002 bytes)");
}

// A length far beyond the message (a handler's mistake) must neither be
// copied whole (it cannot be) nor leave the session failed with nobody told:
// the host reads no more than it shows.
TEST(HostTable, AnErrorMessageWithAnAbsurdLengthIsCutBeforeItIsRead) {
  const std::string buffer(size_t{2} * DOWSER_MAX_ERRLEN, 'x');  // all the host may read
  ProbeSession probe;
  ASSERT_EQ(host_api().report_error(probe_session, DOWSER_ERR_GENERIC,
                                    dowser_str{buffer.data(), SIZE_MAX}),
            DOWSER_OK);
  ASSERT_EQ(probe.sink->errors.size(), 1u);
  EXPECT_EQ(probe.sink->errors[0].second,
            buffer.substr(0, DOWSER_MAX_ERRLEN) + "... (" + std::to_string(SIZE_MAX) + " bytes)");
}

// An error the host could not take (its sink failed) does not end the
// session behind the handler's back: it may report, and fail, again.
TEST(HostTable, AnErrorTheHostCouldNotTakeLeavesTheSessionRunning) {
  ProbeSession probe;
  probe.sink->refuse_next_error = true;
  EXPECT_EQ(host_api().report_error(probe_session, DOWSER_ERR_GENERIC, dowser::abi::view("lost")),
            DOWSER_ERR_GENERIC);
  EXPECT_EQ(host_api().report_devices(probe_session, nullptr, 0), DOWSER_OK);
  EXPECT_EQ(host_api().report_error(probe_session, DOWSER_ERR_GENERIC, dowser::abi::view("again")),
            DOWSER_OK);
  ASSERT_EQ(probe.sink->errors.size(), 1u);
  EXPECT_EQ(probe.sink->errors[0].second, "again");
}

// A NULL with a length (rule O4) or no session at all is the handler's
// mistake, said as such: not an empty line, not "stopped" (which tells a
// handler to give up), not an empty error.
TEST(HostTable, UnreadableArgumentsAreNamedNotPassedOn) {
  std::vector<std::pair<int32_t, std::string>> logged;
  const dowser_handler_api api = probe_api(0);
  HandlerInstance instance(adopt_handler("probe", &api), [&](int32_t level, std::string_view text) {
    logged.emplace_back(level, text);
  });
  host_api().log(probe_context, DOWSER_LOG_INFO, dowser_str{nullptr, 5});
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_EQ(logged[0], (std::pair<int32_t, std::string>{
                           DOWSER_LOG_WARN, "log message: data is NULL but len is 5: rule O4"}));

  EXPECT_EQ(host_api().report_devices(nullptr, nullptr, 0), DOWSER_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(host_api().report_error(nullptr, DOWSER_ERR_GENERIC, dowser::abi::view("x")),
            DOWSER_ERR_INVALID_ARGUMENT);
  ProbeSession probe;
  EXPECT_EQ(host_api().report_error(probe_session, DOWSER_ERR_GENERIC, dowser_str{nullptr, 3}),
            DOWSER_OK);
  ASSERT_EQ(probe.sink->errors.size(), 1u);
  EXPECT_EQ(probe.sink->errors[0].second,
            "report_error message: data is NULL but len is 3: rule O4");
}

// A line about one session reaches that session's sink, not the handler's
// log, by the same rules as a line of the handler's (levels, cutting,
// unreadable text).
TEST(HostTable, ASessionsLogLineReachesItsSinkByTheRulesOfLog) {
  std::vector<std::string> handler_lines;
  const dowser_handler_api api = probe_api(0);
  HandlerInstance instance(adopt_handler("probe", &api), [&](int32_t, std::string_view text) {
    handler_lines.emplace_back(text);
  });
  auto sink = std::make_shared<RecordingSink>();
  auto session = instance.start({}, sink);
  const std::string huge(DOWSER_MAX_LOG_LEN + 1, 'x');
  host_api().log_session(probe_session, DOWSER_LOG_WARN, dowser::abi::view("camera 3 is slow"));
  host_api().log_session(probe_session, 99, dowser::abi::view("odd"));
  host_api().log_session(probe_session, DOWSER_LOG_INFO, dowser::abi::view(huge));
  host_api().log_session(probe_session, DOWSER_LOG_INFO, dowser_str{nullptr, 2});
  using Line = std::pair<int32_t, std::string>;
  EXPECT_EQ(
      sink->logs,
      (std::vector<Line>{
          {DOWSER_LOG_WARN, "camera 3 is slow"},
          {DOWSER_LOG_WARN,
           "odd (logged with invalid level 99, not one of DOWSER_LOG_TRACE..DOWSER_LOG_ERROR)"},
          {DOWSER_LOG_INFO, dowser::host::shortened(huge, DOWSER_MAX_LOG_LEN)},
          {DOWSER_LOG_WARN, "log message: data is NULL but len is 2: rule O4"}}));
  EXPECT_TRUE(handler_lines.empty()) << handler_lines.front();
}

// Rule T4: a line about a session that has stopped is a late call, dropped
// like a report; a handle no session ever had (NULL, say) names nothing.
TEST(HostTable, ASessionsLogLineAfterStopIsALateCall) {
  ProbeSession probe;
  dowser_session_host* handle = probe_session;
  probe.session->stop();
  host_api().log_session(handle, DOWSER_LOG_INFO, dowser::abi::view("still here"));
  host_api().log_session(nullptr, DOWSER_LOG_INFO, dowser::abi::view("nobody's"));
  EXPECT_TRUE(probe.sink->logs.empty());
  EXPECT_EQ(probe.sink->late_calls, 1);
}

TEST(HandlerText, IsCutAtACharacterBoundary) {
  EXPECT_EQ(dowser::host::shortened("ab\xc3\xa9z", 3), "ab... (5 bytes)") << "not half an é";
  EXPECT_EQ(dowser::host::shortened("abc", 3), "abc");
}

TEST(HostTable, ResolvesSharingFromTheHandlerFlagUnlessTheDeviceSaysOtherwise) {
  ProbeSession probe(DOWSER_HANDLER_FLAG_SHARED_DEVICES);
  ASSERT_EQ(report({device("a"), device("b", dowser::Sharing::local)}), DOWSER_OK);
  ASSERT_EQ(probe.sink->snapshots.size(), 1u);
  EXPECT_EQ(probe.sink->snapshots[0][0].sharing, dowser::Sharing::shared);
  EXPECT_EQ(probe.sink->snapshots[0][1].sharing, dowser::Sharing::local);
}

TEST(HostTable, RefusesASnapshotWithADuplicateId) {
  ProbeSession probe;
  EXPECT_EQ(report({device("a"), device("a")}), DOWSER_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(probe.sink->snapshots.empty());
  ASSERT_EQ(probe.sink->bad_reports.size(), 1u);
  EXPECT_NE(probe.sink->bad_reports[0].find("'a' appears twice"), std::string::npos);
}

// What dowserd logs of a misbehaving handler: each refused report (once per
// reason in a row) and each kind of call after stop once, also once the
// session is gone (a thread left reporting every 100 ms writes one line).
TEST(HostTable, RefusedReportsAndReportsAfterTheSessionEndedAreTold) {
  std::vector<std::string> problems;  // told on this thread: report() runs here
  auto sink = std::make_shared<CoalescingSink>(
      [] {}, [&](const std::string& problem) { problems.push_back(problem); });
  auto api = probe_api(0);
  HandlerInstance instance(adopt_handler("probe", &api), ignore_log);
  auto session = instance.start({}, sink);
  dowser_session_host* handle = probe_session;
  EXPECT_EQ(report({device("a"), device("a")}), DOWSER_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(report({device("a"), device("a")}), DOWSER_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(report({device("a")}), DOWSER_OK);
  EXPECT_EQ(report({device("a"), device("a")}), DOWSER_ERR_INVALID_ARGUMENT);
  session.reset();  // stopped, and the session object is gone
  for (int late = 0; late < 3; ++late)
    EXPECT_EQ(host_api().report_devices(handle, nullptr, 0), DOWSER_ERR_STOPPED);
  EXPECT_EQ(host_api().report_error(handle, DOWSER_ERR_GENERIC, dowser::abi::view("gone")),
            DOWSER_ERR_STOPPED);
  host_api().log_session(handle, DOWSER_LOG_INFO, dowser::abi::view("gone too"));
  const std::string twice = "report refused: device id 'a' appears twice in one snapshot";
  const std::string later =
      " after stop_discovery returned (rule T4): dropped, and so are later ones";
  EXPECT_EQ(problems, (std::vector<std::string>{twice, twice, "report_devices" + later,
                                                "report_error" + later, "log_session" + later}));
}

// A start that failed may leave a thread running (against T4): its calls are
// told as coming after the failed start, not after a stop that never came.
TEST(HostTable, CallsAfterAFailedStartAreToldAsSuch) {
  std::vector<std::string> problems;  // told on this thread: report() runs here
  auto sink = std::make_shared<CoalescingSink>(
      [] {}, [&](const std::string& problem) { problems.push_back(problem); });
  auto api = probe_api(0);
  api.start_discovery = [](dowser_handler*, const dowser_discover_request*,
                           dowser_session_host* session, dowser_session**, char*, size_t) {
    probe_session = session;  // as a thread it started would keep it
    return DOWSER_ERR_GENERIC;
  };
  HandlerInstance instance(adopt_handler("probe", &api), ignore_log);
  EXPECT_THROW(instance.start({}, sink), HandlerCallError);
  EXPECT_EQ(report({device("a")}), DOWSER_ERR_STOPPED);
  EXPECT_EQ(problems, std::vector<std::string>{"report_devices after start_discovery failed "
                                               "(rule T4): dropped, and so are later ones"});
}

// The device rules (device_rules.hpp): a device that breaks them is left
// out, the rest of the report is taken.
TEST(HostTable, LeavesOutADeviceThatBreaksTheDeviceRulesAndTakesTheRest) {
  ProbeSession probe;
  dowser::Device bad = device("b");
  bad.properties = {{"A=B", "x"}};
  EXPECT_EQ(report({device("a"), bad, device("c")}), DOWSER_OK);
  ASSERT_EQ(probe.sink->snapshots.size(), 1u);
  ASSERT_EQ(probe.sink->snapshots[0].size(), 2u);
  EXPECT_EQ(probe.sink->snapshots[0][0].id, "a");
  EXPECT_EQ(probe.sink->snapshots[0][1].id, "c");
  ASSERT_EQ(probe.sink->invalid_devices.size(), 1u);
  EXPECT_EQ(probe.sink->invalid_devices[0],
            (std::vector<InvalidDevice>{
                {"device \"b\"",
                 {"device \"b\": property \"A=B\": not a valid environment variable name"}}}));

  EXPECT_EQ(report({device("a")}), DOWSER_OK);
  ASSERT_EQ(probe.sink->invalid_devices.size(), 2u) << "told with every snapshot";
  EXPECT_TRUE(probe.sink->invalid_devices[1].empty());
}

// Its first struct_size is the array's stride: too small, no device in the
// array can be found, and none may be read as an empty one.
TEST(HostTable, RefusesAReportWhoseFirstRecordIsTooSmallToBeTheStride) {
  ProbeSession probe;
  dowser_device raw[2] = {};
  raw[0].struct_size = raw[1].struct_size = 4;
  EXPECT_EQ(host_api().report_devices(probe_session, raw, 2), DOWSER_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(probe.sink->snapshots.empty());
  ASSERT_EQ(probe.sink->bad_reports.size(), 1u);
  EXPECT_EQ(
      probe.sink->bad_reports[0].rfind(
          "device 1: struct_size 4 is smaller than the 1.0 device record (76 bytes): rule V3", 0),
      0u)
      << probe.sink->bad_reports[0];
}

TEST(HostTable, StopsAcceptingAfterAnErrorAndAfterStop) {
  ProbeSession probe;
  EXPECT_EQ(
      host_api().report_error(probe_session, DOWSER_ERR_GENERIC, dowser::abi::view("bus gone")),
      DOWSER_OK);
  ASSERT_EQ(probe.sink->errors.size(), 1u);
  EXPECT_EQ(probe.sink->errors[0].second, "bus gone");
  EXPECT_EQ(report({device("a")}), DOWSER_ERR_STOPPED);
  probe.session->stop();
  EXPECT_TRUE(report_during_stop_refused);
  EXPECT_EQ(probe.sink->late_calls, 0) << "calls during stop are not late";
  EXPECT_EQ(report({device("a")}), DOWSER_ERR_STOPPED);
  EXPECT_EQ(probe.sink->late_calls, 1);
  probe.session.reset();
  EXPECT_EQ(report({device("a")}), DOWSER_ERR_STOPPED) << "a stale handle is harmless";
}

TEST(HostTable, ConcurrentReportsAreCopiedWhole) {
  ProbeSession probe;
  constexpr int threads = 8, reports = 200;
  std::vector<std::thread> reporters;
  reporters.reserve(threads);
  for (int t = 0; t < threads; ++t) {
    reporters.emplace_back([t] {
      for (int i = 0; i < reports; ++i) {
        std::vector<dowser::Device> devices(t + 1, device(""));
        for (int d = 0; d <= t; ++d) devices[d].id = std::to_string(t) + "-" + std::to_string(d);
        EXPECT_EQ(report(devices), DOWSER_OK);
      }
    });
  }
  for (auto& thread : reporters) thread.join();
  ASSERT_EQ(probe.sink->snapshots.size(), size_t{threads} * reports);
  for (const auto& snapshot : probe.sink->snapshots) {
    // Every snapshot is one thread's list, never a mix.
    std::string owner = snapshot.at(0).id.substr(0, snapshot.at(0).id.find('-'));
    EXPECT_EQ(snapshot.size(), std::stoul(owner) + 1);
    for (const auto& d : snapshot) EXPECT_EQ(d.id.substr(0, d.id.find('-')), owner);
  }
}

TEST(HostTable, CopiesAReportBeforeReturning) {
  ProbeSession probe;
  {
    // The handler's buffers, freed as soon as report_devices returns.
    auto id = std::make_unique<std::string>("camera-1");
    auto value = std::make_unique<std::string>("/dev/video0");
    dowser_property property{sizeof(dowser_property), dowser::abi::view("DEVNODE"),
                             dowser::abi::view(*value), 1};
    dowser_device raw{};
    raw.struct_size = sizeof raw;
    raw.id = dowser::abi::view(*id);
    raw.properties = &property;
    raw.properties_len = 1;
    ASSERT_EQ(host_api().report_devices(probe_session, &raw, 1), DOWSER_OK);
    id->assign(id->size(), 'X');
    value->assign(value->size(), 'Y');
  }
  ASSERT_EQ(probe.sink->snapshots.size(), 1u);
  const auto& device = probe.sink->snapshots[0].at(0);
  EXPECT_EQ(device.id, "camera-1");
  EXPECT_EQ(device.properties.at("DEVNODE"), "/dev/video0");
}

// ---- changes between snapshots, and their coalescing -------------------------

std::vector<std::string> ids(const std::vector<dowser::Device>& devices) {
  std::vector<std::string> result;
  result.reserve(devices.size());
  for (const auto& device : devices) result.push_back(device.id);
  return result;
}

dowser::Device with_property(dowser::Device device, const std::string& value) {
  device.properties["K"] = value;
  return device;
}

TEST(ChangesBetween, NamesWhatWasAddedChangedAndRemoved) {
  Snapshot before{device("a"), device("b"), device("c"), device("d")};
  Snapshot after{device("a"), with_property(device("b"), "changed"), device("d"), device("e")};

  auto changes = changes_between(before, after);

  EXPECT_FALSE(changes.complete);
  EXPECT_EQ(changes.devices, 4u);
  ASSERT_EQ(ids(changes.reported), (std::vector<std::string>{"b", "e"}));
  EXPECT_EQ(changes.reported[0].properties.at("K"), "changed");
  EXPECT_EQ(ids(changes.gone), std::vector<std::string>{"c"});
  EXPECT_TRUE(changes_between(after, after).reported.empty());
  EXPECT_TRUE(changes_between(after, after).gone.empty());
}

TEST(ChangesBetween, ADeviceWhoseSharingChangedIsGoneAsItWasAndReportedAsItIs) {
  auto changes = changes_between({device("a", dowser::Sharing::local)},
                                 {device("a", dowser::Sharing::shared)});
  ASSERT_EQ(changes.gone.size(), 1u);
  EXPECT_EQ(changes.gone[0].sharing, dowser::Sharing::local) << "its Instance is the local one";
  ASSERT_EQ(changes.reported.size(), 1u);
  EXPECT_EQ(changes.reported[0].sharing, dowser::Sharing::shared);
}

TEST(CoalescingSink, TheFirstSnapshotIsCompleteAndLaterOnesCarryOnlyChanges) {
  int notified = 0;
  CoalescingSink sink([&] { ++notified; });
  EXPECT_FALSE(sink.take_changes());
  sink.on_snapshot({device("b"), device("a")});
  EXPECT_EQ(notified, 1);
  auto first = sink.take_changes();
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->complete);
  EXPECT_EQ(ids(first->reported), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(first->devices, 2u);
  EXPECT_FALSE(sink.take_changes());

  sink.on_snapshot({device("b"), device("c"), with_property(device("a"), "new")});
  auto second = sink.take_changes();
  ASSERT_TRUE(second);
  EXPECT_FALSE(second->complete);
  EXPECT_EQ(ids(second->reported), (std::vector<std::string>{"a", "c"}));
  EXPECT_TRUE(second->gone.empty());
  EXPECT_EQ(second->devices, 3u);

  sink.on_snapshot({device("c")});
  auto third = sink.take_changes();
  ASSERT_TRUE(third);
  EXPECT_TRUE(third->reported.empty());
  EXPECT_EQ(ids(third->gone), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(notified, 3);

  sink.on_snapshot({device("c")});
  auto unchanged = sink.take_changes();
  ASSERT_TRUE(unchanged) << "a snapshot that changed nothing still counts";
  EXPECT_TRUE(unchanged->reported.empty());
  EXPECT_TRUE(unchanged->gone.empty());
  EXPECT_EQ(unchanged->devices, 1u);
}

TEST(CoalescingSink, ChangesNotTakenYetFoldIntoOneAndNotifyOnce) {
  int notified = 0;
  CoalescingSink sink([&] { ++notified; });
  sink.on_snapshot({device("a"), device("b"), device("c")});
  ASSERT_TRUE(sink.take_changes());

  sink.on_snapshot({device("a"), device("b"), device("d")});  // c gone, d new
  sink.on_snapshot({device("b"), device("c"), device("d")});  // a gone, c back
  sink.on_snapshot({with_property(device("b"), "x"), device("c"), device("d"), device("e")});
  EXPECT_EQ(notified, 2);

  auto changes = sink.take_changes();
  ASSERT_TRUE(changes);
  EXPECT_FALSE(changes->complete);
  // Everything that takes {a, b, c} to the newest snapshot; c, gone and back
  // as it was, may come as reported (the taker finds it unchanged).
  EXPECT_EQ(ids(changes->gone), std::vector<std::string>{"a"});
  auto reported = ids(changes->reported);
  std::erase(reported, "c");
  EXPECT_EQ(reported, (std::vector<std::string>{"b", "d", "e"}));
  EXPECT_EQ(changes->devices, 4u);
}

TEST(CoalescingSink, ChangesFoldedIntoAnUntakenFirstSnapshotStayComplete) {
  CoalescingSink sink([] {});
  sink.on_snapshot({device("a"), device("b")});
  sink.on_snapshot({device("b"), device("c")});
  auto changes = sink.take_changes();
  ASSERT_TRUE(changes);
  EXPECT_TRUE(changes->complete) << "the taker never saw the first one";
  EXPECT_EQ(ids(changes->reported), (std::vector<std::string>{"b", "c"}));
  EXPECT_TRUE(changes->gone.empty());
}

// How long a report waited for its taker counts from the oldest snapshot
// folded in: what the taker gets was due since then.
TEST(CoalescingSink, ChangesCarryWhenTheOldestSnapshotFoldedInArrived) {
  CoalescingSink sink([] {});
  const auto before_first = std::chrono::steady_clock::now();
  sink.on_snapshot({device("a")});
  const auto first_taken = std::chrono::steady_clock::now();
  auto first = sink.take_changes();
  ASSERT_TRUE(first);
  EXPECT_GE(first->reported_at, before_first);
  EXPECT_LE(first->reported_at, first_taken);

  const auto before_second = std::chrono::steady_clock::now();
  sink.on_snapshot({device("a"), device("b")});
  const auto between = std::chrono::steady_clock::now();
  sink.on_snapshot({device("b")});
  sink.on_snapshot({device("c")});
  auto folded = sink.take_changes();
  ASSERT_TRUE(folded);
  EXPECT_GE(folded->reported_at, before_second);
  EXPECT_LE(folded->reported_at, between) << "not the time of a later snapshot";
}

TEST(CoalescingSink, ASharingChangeFoldsAsTwoDevices) {
  CoalescingSink sink([] {});
  sink.on_snapshot({device("a", dowser::Sharing::local)});
  ASSERT_TRUE(sink.take_changes());
  sink.on_snapshot({device("a", dowser::Sharing::shared)});
  sink.on_snapshot({});
  auto changes = sink.take_changes();
  ASSERT_TRUE(changes);
  EXPECT_TRUE(changes->reported.empty());
  ASSERT_EQ(changes->gone.size(), 2u) << "the taker may know either";
  EXPECT_EQ(changes->gone[0].sharing, dowser::Sharing::local);
  EXPECT_EQ(changes->gone[1].sharing, dowser::Sharing::shared);
}

// The same report repeats (handlers poll): a device left out is told once,
// until its problems change, or it is valid (or gone) and then bad again.
TEST(CoalescingSink, TellsOfADeviceLeftOutOnceUntilItsProblemsChange) {
  std::vector<std::string> told;
  CoalescingSink sink([] {}, [&](const std::string& problem) { told.push_back(problem); });
  const InvalidDevice utf8{"device \"a\"",
                           {"device \"a\": property \"K\": value is not valid UTF-8 (byte 4)"}};
  InvalidDevice worse = utf8;
  worse.problems.push_back("device \"a\": mount 1: host path \"x\" is not absolute");
  const InvalidDevice other{"device 2", {"device 2: id is empty"}};

  sink.on_invalid_devices({utf8});
  sink.on_invalid_devices({utf8});
  sink.on_invalid_devices({other, utf8});
  sink.on_invalid_devices({worse, other});
  sink.on_invalid_devices({});  // both valid again
  sink.on_invalid_devices({worse});
  sink.on_invalid_devices({worse});

  const std::string left_out = "device left out of the snapshot: ";
  EXPECT_EQ(told, (std::vector<std::string>{
                      left_out + utf8.problems[0],
                      left_out + other.problems[0],
                      left_out + utf8.problems[0] + "; " + worse.problems[1],
                      left_out + utf8.problems[0] + "; " + worse.problems[1],
                  }));
}

TEST(CoalescingSink, ErrorsAreKeptAndNotified) {
  int notified = 0;
  CoalescingSink sink([&] { ++notified; });
  sink.on_error(DOWSER_ERR_GENERIC, "gone");
  EXPECT_EQ(notified, 1);
  EXPECT_EQ(sink.error()->second, "gone");
}

}  // namespace
