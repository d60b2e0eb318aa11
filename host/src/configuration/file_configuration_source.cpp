// FileConfigurationSource: a directory of manifests, followed with inotify.
#include "configuration.hpp"
#include "state_files.hpp"
#include "thread_names.hpp"
#include "unique_fd.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

namespace dowser::configuration {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Identity = std::pair<std::string, std::string>;  // (namespace, name)

// Editors and `kubectl cp` touch a file several times in a row (write a
// temporary, rename the old one away, rename the new one in): wait for the
// burst to settle, so a save is one change rather than a removal and a re-add.
constexpr auto kQuietPeriod = std::chrono::milliseconds(100);
constexpr auto kMaxDelay = std::chrono::milliseconds(400);
// A new file is read once its writer closes it, not half written; one that
// stays open this long (or was made without a write: a hard link) is read
// as it is.
constexpr auto kLongestWrite = std::chrono::seconds(5);
// Kubernetes objects are limited to about 1.5 MiB; anything far larger is a mistake.
constexpr std::uintmax_t kMaxManifestBytes = std::uintmax_t{4} << 20;  // 4 MiB
// Kubernetes ConfigMap volumes publish an update by renaming this symlink.
constexpr std::string_view kConfigMapDataLink = "..data";
// How often a lost directory is looked for.
constexpr auto kRewatchPeriod = std::chrono::milliseconds(1000);
// IN_ATTRIB: a chmod or chown that makes a manifest readable changes no content.
constexpr uint32_t kWatchMask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE |
                                IN_CREATE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
// On the directory's parent: its name made to mean another directory (a
// symlink switched with `ln -sfn new tmp && mv -T tmp dir`, or a directory
// renamed over an empty one), which no event on the old directory tells.
constexpr uint32_t kParentWatchMask =
    IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR;

Identity identity_of(const Configuration& configuration) {
  return {configuration.namespace_name, configuration.name};
}

std::string identity_text(const Identity& identity) {
  return identity.first + "/" + identity.second;
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::string system_error_text(int error) { return std::strerror(error); }

// Which directory a path leads to (through symlinks); nullopt if none.
std::optional<std::pair<dev_t, ino_t>> directory_identity(const fs::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) return std::nullopt;
  return std::pair{info.st_dev, info.st_ino};
}

// The name in its parent directory under which the directory is found, if
// it has one that can be replaced ("conf.d" of "/etc/dowser/conf.d/").
std::optional<std::pair<fs::path, std::string>> parent_and_name(fs::path directory) {
  if (!directory.has_filename()) directory = directory.parent_path();  // a trailing slash
  const std::string name = directory.filename().string();
  if (name.empty() || name == "." || name == "..") return std::nullopt;
  fs::path parent = directory.parent_path();
  return std::pair{parent.empty() ? fs::path(".") : parent, name};
}

// A FIFO would block its reader until a writer comes; a device or socket
// is no manifest either.
ConfigurationError not_a_regular_file(const fs::path& file) {
  return ConfigurationError(file.string(), "(file)", "not a regular file; ignored");
}

// A file stat() does not find may be a symbolic link whose target is
// missing: there all the same (ls shows it), so said, with where it leads.
std::optional<ConfigurationError> dangling_link(const fs::path& file) {
  std::error_code error;
  if (!fs::is_symlink(fs::symlink_status(file, error))) return std::nullopt;
  return ConfigurationError(file.string(), "(file)",
                            "a symbolic link to " + fs::read_symlink(file, error).string() +
                                ", which does not exist; read again when the link changes");
}

// Where a Configuration is defined: a file name and its definition there.
struct Definition {
  const std::string* file = nullptr;
  const Configuration* configuration = nullptr;
};

std::set<std::string> list_manifest_names(const fs::path& directory, std::error_code& error) {
  std::set<std::string> names;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    std::string name = it->path().filename().string();
    if (is_manifest_name(name)) names.insert(std::move(name));
  }
  return names;
}

}  // namespace

// Hidden files and editor temporaries (`*~`, `*.swp`, `*.tmp`) are never
// manifests, whatever else their names contain.
bool is_manifest_name(std::string_view file_name) {
  if (file_name.empty() || file_name.front() == '.') return false;
  if (ends_with(file_name, "~") || ends_with(file_name, ".swp") || ends_with(file_name, ".tmp"))
    return false;
  return ends_with(file_name, ".yaml") || ends_with(file_name, ".yml") ||
         ends_with(file_name, ".json");
}

std::vector<fs::path> manifest_files(const fs::path& directory) {
  std::error_code error;
  std::set<std::string> names = list_manifest_names(directory, error);
  if (error) throw ConfigurationError(directory.string(), "(directory)", error.message());
  std::vector<fs::path> files;
  files.reserve(names.size());
  for (const auto& name : names) files.push_back(directory / name);
  return files;
}

std::string read_manifest(const fs::path& file, NonRegular non_regular) {
  auto problem = [&](std::string why) {
    return ConfigurationError(file.string(), "(file)", std::move(why));
  };
  const auto too_large = [&] {
    return problem("larger than " + std::to_string(kMaxManifestBytes) + " bytes");
  };
  struct stat info {};
  if (::stat(file.c_str(), &info) != 0) {
    const int error = errno;
    if (auto link = dangling_link(file)) throw *link;
    throw problem(system_error_text(error));
  }
  if (S_ISDIR(info.st_mode)) throw problem("is a directory, not a manifest file");
  const bool stream = !S_ISREG(info.st_mode);
  if (stream && non_regular == NonRegular::refused) throw not_a_regular_file(file);
  // A stream's open waits for its writer. A file is opened O_NONBLOCK and
  // checked again once open: a FIFO swapped in since the stat would block.
  UniqueFd fd;
  fd.reset(::open(file.c_str(), O_RDONLY | O_CLOEXEC | (stream ? 0 : O_NONBLOCK)));
  if (fd.get() < 0) throw problem(system_error_text(errno));
  if (!stream) {
    if (::fstat(fd.get(), &info) != 0) throw problem(system_error_text(errno));
    if (!S_ISREG(info.st_mode)) throw not_a_regular_file(file);
    if (static_cast<std::uintmax_t>(info.st_size) > kMaxManifestBytes) throw too_large();
  }
  std::string text;
  char buffer[64 * 1024];
  for (;;) {
    const ssize_t count = ::read(fd.get(), buffer, sizeof buffer);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) throw problem(system_error_text(errno));
    if (count == 0) return text;
    text.append(buffer, static_cast<size_t>(count));
    if (text.size() > kMaxManifestBytes) throw too_large();  // it grew, or is a stream
  }
}

struct FileConfigurationSource::Watcher {
  Watcher(fs::path directory_in, Events events_in, fs::path owners_file_in)
      : directory(std::move(directory_in)),
        events(with_defaults(std::move(events_in))),
        owners_file(std::move(owners_file_in)) {}

  // Callers may leave events they do not care about empty.
  static Events with_defaults(Events events) {
    if (!events.upserted) events.upserted = [](const Configuration&) {};
    if (!events.removed) events.removed = [](const std::string&, const std::string&) {};
    if (!events.invalid) events.invalid = [](const ConfigurationError&) {};
    if (!events.synced) events.synced = [] {};
    if (!events.valid) events.valid = [](const std::string&) {};
    return events;
  }

  void start();
  void stop();

  // ---- the state: which file defines what ----
  // One file as read now: what it defines (nothing once gone), or unread
  // (what was read of it before keeps running), and what is wrong with it.
  struct Reading {
    enum class State { defines, gone, unread };
    std::string name;
    State state = State::unread;
    std::vector<Configuration> defined;
    std::optional<ConfigurationError> problem;
  };
  void refresh_all(const std::set<std::string>& present_names);
  void refresh(const std::vector<std::string>& names);
  Reading read(const std::string& name);
  void release_dropped(const Reading& reading, std::set<Identity>& released);
  void adopt_defined(const Reading& reading);
  void release(const Identity& identity, const std::string& releasing_name);
  void report_other_definers(const std::set<Identity>& released,
                             const std::set<std::string>& reported);
  void adopt(const std::string& name, const Configuration& configuration);
  void report_clashes(const std::string& name);
  Definition defined_elsewhere(const Identity& identity, const std::string& except_name) const;
  // ---- which file holds a name several define, kept across restarts ----
  std::vector<std::string> in_reading_order(const std::set<std::string>& names) const;
  void load_owners();
  void save_owners();
  std::string path_of(const std::string& name) const { return (directory / name).string(); }

  // ---- the thread ----
  void run();
  bool follow();              // false once stopped, true once the directory is lost
  bool wait_for_directory();  // false once stopped, true once it is watched again
  bool read_inotify();        // false once the directory's watch is gone
  bool watch_directory();     // adds the watch on the directory now at its path
  void unwatch_directory();
  bool path_still_leads_here();  // false once it leads elsewhere or nowhere
  void watch_parent();
  void process_pending();
  bool is_other_than_a_file(const std::string& name) const;
  void note_change(std::string name, const inotify_event& event, Clock::time_point now);
  void add_pending(std::string name, Clock::time_point now);
  void mark_pending(Clock::time_point now);
  void start_write(std::string name, Clock::time_point since);
  void take_overdue_writes();
  std::optional<Clock::time_point> next_due() const;
  int poll_timeout() const;  // milliseconds until next_due(); -1 for none

  const fs::path directory;
  const Events events;
  const fs::path owners_file;  // empty: not kept
  // Read at start: the file that held each contested name before.
  std::map<Identity, std::string> owners_before;
  std::map<Identity, std::string> owners_saved;  // as last written

  // Last successfully parsed contents of each file, valid or refused; a file
  // that turns invalid keeps its entry, so its Configurations keep running.
  std::map<std::string, std::vector<Configuration>> defined_by_file;
  std::map<Identity, std::string> owner;  // which file's definition is in effect
  std::set<std::string> unreadable;       // files whose last read failed (reported so)
  std::map<Identity, Configuration> active;

  UniqueFd inotify;
  int watch = -1;  // the directory's watch descriptor; -1 while it is lost
  std::optional<std::pair<dev_t, ino_t>> watched;  // the directory watch follows
  int parent_watch = -1;                           // on the parent, for the name
  std::string name_in_parent;
  bool name_changed = false;  // the parent said something about the name
  UniqueFd wakeup;            // eventfd signalled by stop()
  std::thread thread;

  std::set<std::string> pending;
  bool rescan_pending = false;
  Clock::time_point first_pending{};
  Clock::time_point last_pending{};
  // Names created (or renamed from such a name) whose writer has not closed
  // them yet, with when the write began. A name gone meanwhile stays until
  // an event on it comes, which takes it out.
  std::map<std::string, Clock::time_point> being_written;
  // Of the files being written that were renamed in this batch of events:
  // by the rename's cookie, when their write began.
  std::map<uint32_t, Clock::time_point> moved_while_written;
};

// ---- state -------------------------------------------------------------------

// What is there, and every file said something of before: one gone since
// (a broken one deleted in the same batch as a ConfigMap's data swap) is
// read as gone, so that what was said of it no longer holds.
void FileConfigurationSource::Watcher::refresh_all(const std::set<std::string>& present_names) {
  std::set<std::string> names = present_names;
  for (const auto& [name, configurations] : defined_by_file) names.insert(name);
  names.insert(unreadable.begin(), unreadable.end());
  for (const auto& [name, since] : being_written) names.erase(name);  // read once closed
  refresh(in_reading_order(names));
}

// Name order, except that files which held a contested name before go
// first, so that they take it again (the first definition read keeps it).
std::vector<std::string> FileConfigurationSource::Watcher::in_reading_order(
    const std::set<std::string>& names) const {
  std::set<std::string> held_before;
  for (const auto& [identity, name] : owners_before) held_before.insert(name);
  std::vector<std::string> ordered(names.begin(), names.end());
  std::stable_partition(ordered.begin(), ordered.end(),
                        [&](const std::string& name) { return held_before.count(name) > 0; });
  return ordered;
}

// One line per contested name: "<namespace>/<name>" TAB file name.
// A file that cannot be read is no reason not to start: only which file
// holds a name several define may change.
void FileConfigurationSource::Watcher::load_owners() {
  if (owners_file.empty()) return;
  std::optional<std::string> text;
  try {
    text = state_files::read_whole(owners_file, state_files::Access::everyone);
  } catch (const state_files::ReadError& error) {
    spdlog::warn(
        "{}; which file holds a name several define may change, and the file is "
        "replaced at the next change of one",
        error.what());
  }
  std::istringstream in(text.value_or(""));
  for (std::string line; std::getline(in, line);) {
    const size_t slash = line.find('/');
    const size_t tab = line.find('\t');
    if (slash == std::string::npos || tab == std::string::npos || slash > tab) continue;
    owners_before[{line.substr(0, slash), line.substr(slash + 1, tab - slash - 1)}] =
        line.substr(tab + 1);
  }
  owners_saved = owners_before;
}

// Written (whole, by rename) when the holder of a contested name changes;
// a name only one file defines is left out.
void FileConfigurationSource::Watcher::save_owners() {
  if (owners_file.empty()) return;
  std::map<Identity, size_t> definitions;  // one pass over the files, not one per name
  for (const auto& [name, configurations] : defined_by_file)
    for (const auto& configuration : configurations) ++definitions[identity_of(configuration)];
  std::map<Identity, std::string> contested;
  for (const auto& [identity, name] : owner)
    if (definitions[identity] > 1) contested.emplace(identity, name);
  if (contested == owners_saved) return;
  std::string text;
  for (const auto& [identity, name] : contested)
    if (name.find('\n') == std::string::npos)
      text += identity.first + '/' + identity.second + '\t' + name + '\n';
  if (auto failed =
          state_files::replace_durably(owners_file, text, state_files::Access::everyone)) {
    spdlog::warn(
        "cannot save which file holds a name several define ({}): it may change at the "
        "next start",
        *failed);
    return;
  }
  owners_saved = std::move(contested);
}

// Every file is read, and what each defines now is known, before any
// definition changes hands: a definition that moved between files in one
// batch (a manifest renamed, a ConfigMap key renamed) passes to its new
// file, not removed and added again, which would withdraw its Instances and
// the claims of running pods. Then, file by file, what each defines comes
// into effect and is reported; a file outside the batch that took a
// definition over is reported last. Owners are saved once every file is
// read: halfway, a name may not look contested yet.
void FileConfigurationSource::Watcher::refresh(const std::vector<std::string>& names) {
  using State = Reading::State;
  std::vector<Reading> readings;
  readings.reserve(names.size());
  for (const auto& name : names) readings.push_back(read(name));
  for (const auto& reading : readings) {
    if (reading.state == State::gone) defined_by_file.erase(reading.name);
    if (reading.state == State::defines) defined_by_file[reading.name] = reading.defined;
    if (reading.state == State::unread)
      unreadable.insert(reading.name);
    else
      unreadable.erase(reading.name);
  }
  std::set<Identity> released;  // their holder changed, or they went
  for (const auto& reading : readings)
    if (reading.state != State::unread) release_dropped(reading, released);
  std::set<std::string> reported;
  for (const auto& reading : readings) {
    if (reading.state != State::unread) {
      adopt_defined(reading);  // then every definition of the file has a holder
      report_clashes(reading.name);
    }
    if (reading.problem) events.invalid(*reading.problem);  // after report_clashes' valid
    reported.insert(reading.name);
  }
  report_other_definers(released, reported);
  save_owners();
}

FileConfigurationSource::Watcher::Reading FileConfigurationSource::Watcher::read(
    const std::string& name) {
  using State = Reading::State;
  const fs::path file = directory / name;
  struct stat info {};
  const bool exists = ::stat(file.c_str(), &info) == 0;
  if (!exists && errno != ENOENT && errno != ENOTDIR) {
    // It may well still be there (the directory was made unreadable).
    return {name,
            State::unread,
            {},
            ConfigurationError(file.string(), "(file)", system_error_text(errno))};
  }
  if (!exists || !S_ISREG(info.st_mode)) {  // deleted, renamed away, or not a file
    if (exists) return {name, State::gone, {}, not_a_regular_file(file)};
    return {name, State::gone, {}, dangling_link(file)};  // a link that leads nowhere
  }
  try {
    return {name, State::defines, parse_configurations(read_manifest(file), file.string()),
            std::nullopt};
  } catch (const ConfigurationError& invalid) {
    return {name, State::unread, {}, invalid};
  }
}

// Another file's definition of identity: one the same as what runs first
// (a file renamed keeps its Configuration, rather than a refused duplicate
// taking over), else the first by name.
Definition FileConfigurationSource::Watcher::defined_elsewhere(
    const Identity& identity, const std::string& except_name) const {
  const auto running = active.find(identity);
  Definition first;
  for (const auto& [name, configurations] : defined_by_file) {
    if (name == except_name) continue;
    for (const auto& configuration : configurations) {
      if (identity_of(configuration) != identity) continue;
      if (running != active.end() && running->second == configuration)
        return {&name, &configuration};
      if (first.file == nullptr) first = {&name, &configuration};
    }
  }
  return first;
}

void FileConfigurationSource::Watcher::adopt(const std::string& name,
                                             const Configuration& configuration) {
  const Identity identity = identity_of(configuration);
  owner[identity] = name;
  auto current = active.find(identity);
  if (current != active.end() && current->second == configuration) return;
  active.insert_or_assign(identity, configuration);
  events.upserted(configuration);
}

// A file dropped its definition: another file's definition (refused until
// now, or the same one moved) takes over, otherwise the Configuration goes.
// The files that define it are reported by the caller, once every file of
// the batch has what it defines.
void FileConfigurationSource::Watcher::release(const Identity& identity,
                                               const std::string& releasing_name) {
  if (Definition other = defined_elsewhere(identity, releasing_name); other.file != nullptr) {
    adopt(*other.file, *other.configuration);
    return;
  }
  owner.erase(identity);
  active.erase(identity);
  events.removed(identity.first, identity.second);
}

// Files outside the batch that define what changed hands: the one that took
// it over is valid now (for that definition), and the duplicates name the
// new holder. A file whose last read failed keeps its read error.
void FileConfigurationSource::Watcher::report_other_definers(
    const std::set<Identity>& released, const std::set<std::string>& reported) {
  if (released.empty()) return;
  for (const auto& [name, configurations] : defined_by_file) {
    if (reported.count(name) || unreadable.count(name)) continue;
    if (std::any_of(configurations.begin(), configurations.end(),
                    [&](const Configuration& c) { return released.count(identity_of(c)) > 0; }))
      report_clashes(name);
  }
}

// The file no longer defines what it held: another file's definition takes
// over, or the Configuration goes (either way added to `released`).
void FileConfigurationSource::Watcher::release_dropped(const Reading& reading,
                                                       std::set<Identity>& released) {
  std::set<Identity> still_defined;
  for (const auto& configuration : reading.defined)
    still_defined.insert(identity_of(configuration));
  std::vector<Identity> dropped;
  for (const auto& [identity, owner_name] : owner)
    if (owner_name == reading.name && still_defined.count(identity) == 0)
      dropped.push_back(identity);
  for (const auto& identity : dropped) {
    release(identity, reading.name);
    released.insert(identity);
  }
}

// What the file defines and no other file holds comes into effect.
void FileConfigurationSource::Watcher::adopt_defined(const Reading& reading) {
  for (const auto& configuration : reading.defined) {
    auto holder = owner.find(identity_of(configuration));
    if (holder == owner.end() || holder->second == reading.name) adopt(reading.name, configuration);
  }
}

// Every definition of the file that another file's definition shadows is
// refused; a file with none (or gone) is valid (which clears an earlier
// report on it).
void FileConfigurationSource::Watcher::report_clashes(const std::string& name) {
  static const std::vector<Configuration> kNothing;
  bool clean = true;
  const auto file = defined_by_file.find(name);
  for (const auto& configuration : file == defined_by_file.end() ? kNothing : file->second) {
    const Identity identity = identity_of(configuration);
    const std::string& holder = owner.at(identity);  // every one has one now
    if (holder == name) continue;
    clean = false;
    // Named: the file was read, and what it defines is known.
    events.invalid(ConfigurationError(path_of(name), "metadata.name",
                                      identity_text(identity) + " is already defined in " +
                                          path_of(holder) +
                                          "; this definition is ignored while that one exists")
                       .about(identity.first, identity.second));
  }
  if (clean) events.valid(path_of(name));
}

// ---- lifecycle -----------------------------------------------------------------

void FileConfigurationSource::Watcher::start() {
  std::error_code error;
  if (!fs::is_directory(directory, error)) {
    throw std::runtime_error("configuration directory " + directory.string() +
                             " does not exist or is not a directory");
  }
  // Watch before reading, so that no change made during the first scan is lost.
  inotify.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (inotify.get() < 0 || !watch_directory()) {
    throw std::runtime_error("cannot watch configuration directory " + directory.string() + ": " +
                             system_error_text(errno));
  }
  watch_parent();
  wakeup.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (wakeup.get() < 0)
    throw std::runtime_error(std::string("eventfd: ") + system_error_text(errno));
  std::set<std::string> names = list_manifest_names(directory, error);
  if (error) {
    throw std::runtime_error("cannot read configuration directory " + directory.string() + ": " +
                             error.message());
  }
  load_owners();
  refresh_all(names);
  events.synced();
  thread = std::thread([this] {
    name_this_thread("config-watch");
    run();
  });
}

void FileConfigurationSource::Watcher::stop() {
  if (!thread.joinable()) return;
  const uint64_t one = 1;
  // An eventfd write only fails when the counter would overflow; it is then readable anyway.
  [[maybe_unused]] ssize_t written = ::write(wakeup.get(), &one, sizeof one);
  thread.join();
}

// ---- the thread --------------------------------------------------------------------

// When the pending changes are due, or a file being written is overdue.
std::optional<Clock::time_point> FileConfigurationSource::Watcher::next_due() const {
  std::optional<Clock::time_point> due;
  if (!pending.empty() || rescan_pending)
    due = std::min(last_pending + kQuietPeriod, first_pending + kMaxDelay);
  for (const auto& [name, created] : being_written)
    due = std::min(due.value_or(Clock::time_point::max()), created + kLongestWrite);
  return due;
}

int FileConfigurationSource::Watcher::poll_timeout() const {
  const std::optional<Clock::time_point> due = next_due();
  if (!due) return -1;
  const auto remaining = std::chrono::ceil<std::chrono::milliseconds>(*due - Clock::now());
  return static_cast<int>(std::max(remaining, std::chrono::milliseconds(0)).count());
}

void FileConfigurationSource::Watcher::add_pending(std::string name, Clock::time_point now) {
  being_written.erase(name);
  pending.insert(std::move(name));
  mark_pending(now);
}

void FileConfigurationSource::Watcher::mark_pending(Clock::time_point now) {
  last_pending = now;
  if (first_pending == Clock::time_point{}) first_pending = now;
}

void FileConfigurationSource::Watcher::start_write(std::string name, Clock::time_point since) {
  pending.erase(name);
  if (pending.empty() && !rescan_pending) first_pending = Clock::time_point{};
  being_written.try_emplace(std::move(name), since);
}

// Whether the name is something other than a regular file now (a symbolic
// link, a FIFO); not when it is gone already (a file renamed or deleted
// before its creation was seen: what came next tells).
bool FileConfigurationSource::Watcher::is_other_than_a_file(const std::string& name) const {
  std::error_code error;
  const fs::file_status status = fs::symlink_status(directory / name, error);
  return fs::exists(status) && !fs::is_regular_file(status);
}

// A new file waits for its writer to close it (a chmod on the way does not
// end the write, a rename carries it to the new name); a symbolic link (a
// ConfigMap's key) is whole when it is made, and a FIFO is refused as read.
void FileConfigurationSource::Watcher::note_change(std::string name, const inotify_event& event,
                                                   Clock::time_point now) {
  const auto written = being_written.find(name);
  if ((event.mask & IN_CREATE) != 0 && (event.mask & IN_ISDIR) == 0 &&
      !is_other_than_a_file(name)) {
    start_write(std::move(name), now);
  } else if ((event.mask & IN_MOVED_FROM) != 0 && written != being_written.end()) {
    moved_while_written[event.cookie] = written->second;  // renamed before its writer closed it
    add_pending(std::move(name), now);
  } else if (const auto moved = moved_while_written.find(event.cookie);
             (event.mask & IN_MOVED_TO) != 0 && moved != moved_while_written.end()) {
    start_write(std::move(name), moved->second);
    moved_while_written.erase(moved);
  } else if ((event.mask & IN_ATTRIB) == 0 || written == being_written.end()) {
    add_pending(std::move(name), now);
  }
}

void FileConfigurationSource::Watcher::take_overdue_writes() {
  const Clock::time_point now = Clock::now();
  for (auto file = being_written.begin(); file != being_written.end();) {
    const auto next = std::next(file);
    if (now >= file->second + kLongestWrite) add_pending(file->first, now);  // erases it
    file = next;
  }
}

bool FileConfigurationSource::Watcher::read_inotify() {
  alignas(inotify_event) char buffer[16 * 1024];
  bool watching = true;
  const Clock::time_point now = Clock::now();
  ssize_t length = 0;
  while ((length = ::read(inotify.get(), buffer, sizeof buffer)) > 0) {
    for (const char* at = buffer; at < buffer + length;) {
      const auto* event = reinterpret_cast<const inotify_event*>(at);
      at += sizeof(inotify_event) + event->len;
      std::string name = event->len > 0 ? std::string(event->name) : "";  // NUL-padded
      if (event->wd == parent_watch) {
        name_changed = name_changed || name == name_in_parent;
        continue;
      }
      // A directory renamed away keeps its old watch until it is removed.
      if (event->wd != watch && (event->mask & IN_Q_OVERFLOW) == 0) continue;
      if ((event->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) != 0) watching = false;
      if ((event->mask & IN_Q_OVERFLOW) != 0 || name == kConfigMapDataLink) {
        rescan_pending = true;
        mark_pending(now);
      } else if (is_manifest_name(name)) {
        note_change(std::move(name), *event, now);
      }
    }
  }
  moved_while_written.clear();  // moved out of the directory, or the rest comes later
  return watching;
}

void FileConfigurationSource::Watcher::process_pending() {
  if (rescan_pending) {
    std::error_code error;
    std::set<std::string> names = list_manifest_names(directory, error);
    if (error) {
      events.invalid(ConfigurationError(directory.string(), "(directory)", error.message()));
    } else {
      refresh_all(names);
      events.valid(directory.string());
    }
  } else {
    refresh({pending.begin(), pending.end()});
  }
  pending.clear();
  rescan_pending = false;
  first_pending = Clock::time_point{};
}

// A directory removed, renamed or replaced (a config-management tool
// swapping it, a symlink switched, a ConfigMap volume remounted) is read again
// once one is at the path, and whatever it then holds is what runs; while
// none is, the error says it is not followed.
void FileConfigurationSource::Watcher::run() {
  while (follow()) {
    if (watch_directory()) {
      spdlog::info("configuration directory {} now leads to another directory: reading it",
                   directory.string());
    } else {
      events.invalid(ConfigurationError(directory.string(), "(directory)",
                                        "the directory was removed or renamed; not following it "
                                        "until it is back"));
      if (!wait_for_directory()) return;
      spdlog::info("configuration directory {} is back: reading it", directory.string());
    }
    rescan_pending = true;  // read it as it now is (and say so, or why not)
    process_pending();
  }
}

bool FileConfigurationSource::Watcher::follow() {
  pollfd fds[2] = {{wakeup.get(), POLLIN, 0}, {inotify.get(), POLLIN, 0}};
  while (true) {
    if (::poll(fds, 2, poll_timeout()) < 0) {
      const int error = errno;
      if (error == EINTR) continue;
      events.invalid(ConfigurationError(directory.string(), "(directory)",
                                        "poll failed: " + system_error_text(error)));
      return false;
    }
    if ((fds[0].revents & POLLIN) != 0) return false;
    if ((fds[1].revents & POLLIN) != 0 && (!read_inotify() || !path_still_leads_here())) {
      process_pending();
      unwatch_directory();
      return true;
    }
    take_overdue_writes();
    const std::optional<Clock::time_point> due = next_due();
    if ((!pending.empty() || rescan_pending) && due && *due <= Clock::now()) process_pending();
  }
}

bool FileConfigurationSource::Watcher::wait_for_directory() {
  pollfd stop_requested = {wakeup.get(), POLLIN, 0};
  while (true) {
    const int ready = ::poll(&stop_requested, 1, static_cast<int>(kRewatchPeriod.count()));
    if (ready > 0) return false;
    if (ready < 0 && errno != EINTR) return false;
    if (watch_directory()) return true;
  }
}

bool FileConfigurationSource::Watcher::watch_directory() {
  watch = ::inotify_add_watch(inotify.get(), directory.c_str(), kWatchMask);
  watched = directory_identity(directory);
  name_changed = false;
  return watch >= 0;
}

// After the parent said something about the directory's name: whether the
// path still leads to the directory watched. If it leads to another one,
// that one is followed from now on, as a lost directory is once back (in
// the same second, without the error).
bool FileConfigurationSource::Watcher::path_still_leads_here() {
  return !std::exchange(name_changed, false) || directory_identity(directory) == watched;
}

void FileConfigurationSource::Watcher::watch_parent() {
  auto parent = parent_and_name(directory);
  if (!parent) return;
  name_in_parent = parent->second;
  // Without it only a swapped top-level symlink goes unnoticed: not fatal.
  parent_watch = ::inotify_add_watch(inotify.get(), parent->first.c_str(), kParentWatchMask);
}

// A renamed directory is still watched where it went: not any more. (A
// removed one's watch is gone already; the call then fails, harmlessly.)
void FileConfigurationSource::Watcher::unwatch_directory() {
  ::inotify_rm_watch(inotify.get(), watch);
  watch = -1;
  being_written.clear();  // the directory is read again once back
}

// ---- public face ---------------------------------------------------------------------

FileConfigurationSource::FileConfigurationSource(std::filesystem::path directory, Events events,
                                                 std::filesystem::path owners_file)
    : watcher_(std::make_unique<Watcher>(std::move(directory), std::move(events),
                                         std::move(owners_file))) {}

FileConfigurationSource::~FileConfigurationSource() { stop(); }

void FileConfigurationSource::start() {
  if (watcher_->thread.joinable())
    throw std::logic_error("FileConfigurationSource already started");
  watcher_->start();
}

void FileConfigurationSource::stop() { watcher_->stop(); }

}  // namespace dowser::configuration
