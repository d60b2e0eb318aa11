#include "handler_registry.hpp"
#include "writer_preferring_mutex.hpp"

#define BOOST_DLL_USE_STD_FS
#include <boost/dll/shared_library.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <deque>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <system_error>
#include <unordered_map>
#include <vector>

namespace dowser::host {

std::string shortened(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  auto continues_a_character = [](char c) {
    return (static_cast<unsigned char>(c) & 0xc0) == 0x80;
  };
  while (cut > 0 && continues_a_character(text[cut])) --cut;
  return std::string(text.substr(0, cut)) + "... (" + std::to_string(text.size()) + " bytes)";
}

// A C++ exception crossed the C ABI, against rule T6 (a hand-written table
// without the SDK's trampolines). It is stopped here, so that one broken
// handler cannot end the daemon.
std::string thrown_across_abi() {
  std::string why(kThrownAcrossAbi);
  try {
    throw;
  } catch (const std::exception& e) {
    why += std::string(": ") + e.what();
  } catch (...) {
  }
  return why;
}

namespace {

// A borrowed (readable) string, cut to max_bytes before anything is copied:
// a length far beyond the text (a handler's mistake) costs no more than that.
std::string bounded_text(dowser_str text, size_t max_bytes) {
  return shortened(std::string_view(text.len == 0 ? "" : text.data, text.len), max_bytes);
}

// Of a message with no NUL, this much is shown (the rest is the same junk).
constexpr size_t kShownWithoutNul = 200;

// A handler's error message as logs show it: never nothing, never a buffer
// of junk.
std::string shown_message(const std::string& message) {
  if (message.empty()) return "(no message)";
  if (message.size() < DOWSER_MAX_ERRLEN) return message;
  return message.substr(0, kShownWithoutNul) + "... (no NUL within the " +
         std::to_string(DOWSER_MAX_ERRLEN) + " bytes of the error buffer, against rule O5)";
}

std::string abi_text(uint16_t major, uint16_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string octal_mode(mode_t mode) {
  std::ostringstream out;
  out << '0' << std::oct << (mode & 07777);
  return out.str();
}

// ---- loading --------------------------------------------------------------

// Who may change what is loaded: only a trusted owner, and no group or
// others. whose: "" for the file itself, else "its directory <path>: ".
void check_owner_and_mode(const std::filesystem::path& file, const struct stat& info,
                          const std::string& whose, const LoadPolicy& policy) {
  std::vector<uid_t> trusted = policy.trusted_owners;
  if (trusted.empty()) trusted = {0, ::geteuid()};
  if (std::find(trusted.begin(), trusted.end(), info.st_uid) == trusted.end()) {
    throw HandlerLoadError(file, "permissions",
                           whose + "owned by uid " + std::to_string(info.st_uid) +
                               ", but only root or the daemon's user may own handlers");
  }
  // In a sticky directory (/tmp) others may add files but not replace ours.
  const bool sticky_directory = S_ISDIR(info.st_mode) && (info.st_mode & S_ISVTX) != 0;
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !sticky_directory) {
    throw HandlerLoadError(file, "permissions",
                           whose + "mode " + octal_mode(info.st_mode) +
                               " is group- or other-writable; make it 0755 or stricter");
  }
}

void check_directory_of(const std::filesystem::path& file, const std::filesystem::path& path,
                        const LoadPolicy& policy) {
  const auto directory = path.parent_path();
  struct stat info {};
  if (::stat(directory.c_str(), &info) != 0)
    throw HandlerLoadError(file, "permissions", directory.string() + ": " + std::strerror(errno));
  check_owner_and_mode(file, info, "its directory " + directory.string() + ": ", policy);
}

// Where the symbolic link link points, as written and, when that is
// relative, as resolved from the link's directory.
std::string link_target_text(const std::filesystem::path& link, std::error_code& error) {
  const auto target = std::filesystem::read_symlink(link, error);
  if (target.is_absolute()) return target.string();
  return target.string() + " (" + (link.parent_path() / target).lexically_normal().string() + ")";
}

// Follows a chain of links to the first one whose target is missing.
std::optional<std::filesystem::path> dangling_link(std::filesystem::path path) {
  constexpr int kMaxLinks = 40;  // as the kernel's ELOOP limit
  std::error_code error;
  for (int hop = 0; hop < kMaxLinks && std::filesystem::is_symlink(path, error); ++hop) {
    const auto target = std::filesystem::read_symlink(path, error);
    if (error) return std::nullopt;
    const auto next = target.is_absolute() ? target : path.parent_path() / target;
    if (!std::filesystem::exists(std::filesystem::symlink_status(next, error))) return path;
    path = next;
  }
  return std::nullopt;
}

}  // namespace

std::string missing_file_reason(const std::filesystem::path& file) {
  const auto link = dangling_link(file);
  std::error_code error;
  const std::string target = link ? link_target_text(*link, error) : "";
  if (!link || error) return std::strerror(ENOENT);
  const std::string through = *link == file ? "" : " (through " + link->string() + ")";
  return "a symbolic link" + through + " to " + target + ", which does not exist";
}

void check_handler_file(const std::filesystem::path& file, const LoadPolicy& policy) {
  struct stat info {};
  if (::stat(file.c_str(), &info) != 0) {
    throw HandlerLoadError(file, "permissions",
                           errno == ENOENT ? missing_file_reason(file) : std::strerror(errno));
  }
  if (!S_ISREG(info.st_mode)) throw HandlerLoadError(file, "permissions", "not a regular file");
  check_owner_and_mode(file, info, "", policy);
  // Whoever may write the directory may swap the file between this check
  // and dlopen: the link's directory, and the real file's if it is a link.
  const auto named = std::filesystem::absolute(file);
  check_directory_of(file, named, policy);
  std::error_code error;
  const auto real = std::filesystem::canonical(named, error);
  if (!error && real.parent_path() != named.parent_path()) check_directory_of(file, real, policy);
  if (auto unfinished = unfinished_file_reason(file))
    throw HandlerLoadError(file, "open", *unfinished);
}

namespace {

// Libraries of handlers stay loaded for the life of the process (a
// handler's threads or static data may outlive its last session); leaked on
// purpose. A refused library is not kept: the dynamic loader would hand the
// same one back for its path, and a fixed file put there would never load.
void keep_loaded(boost::dll::shared_library library) {
  static std::mutex mutex;
  static auto* libraries = new std::vector<boost::dll::shared_library>();
  std::lock_guard lock(mutex);
  libraries->push_back(std::move(library));
}

// Boost.DLL wraps dlerror()'s text in its own and appends a stale errno
// text; the dynamic loader's words alone say what is wrong.
std::string dlopen_reason(std::string_view boost_message) {
  constexpr std::string_view kPrefix = "dlerror system message: ";
  const size_t start = boost_message.find(kPrefix);
  const size_t end = boost_message.rfind("): ");
  if (start == std::string_view::npos || end == std::string_view::npos || end < start)
    return std::string(boost_message);
  return std::string(boost_message.substr(start + kPrefix.size(), end - start - kPrefix.size()));
}

// What to look at next, for the loader's usual complaints.
std::string with_hint(const std::string& reason) {
  auto says = [&](std::string_view words) { return reason.find(words) != std::string::npos; };
  if (says("invalid ELF header") || says("file too short"))
    return reason + " (not a shared library: is this the built .so?)";
  if (says("cannot open shared object file") || says("undefined symbol") || says("version `"))
    return reason + " (check its dependencies with ldd)";
  return reason;
}

struct OpenedLibrary {
  boost::dll::shared_library library;
  dowser_get_handler_api_fn entry = nullptr;
};

OpenedLibrary open_entry(const std::filesystem::path& file) {
  boost::dll::shared_library library;
  try {
    library.load(file, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::system_error& e) {
    throw HandlerLoadError(file, "open", with_hint(dlopen_reason(e.what())));
  }
  if (!library.has(DOWSER_ENTRY_SYMBOL)) {
    throw HandlerLoadError(file, "resolve entry", missing_entry_reason(file));
  }
  auto entry = library.get<const dowser_handler_api*(uint16_t, uint16_t, char*, size_t)>(
      DOWSER_ENTRY_SYMBOL);
  return {std::move(library), entry};
}

const dowser_handler_api* call_entry(const std::filesystem::path& file,
                                     dowser_get_handler_api_fn entry, const LoadPolicy& policy) {
  ErrorBuffer err;
  const dowser_handler_api* api = nullptr;
  try {
    api = entry(policy.host_abi_major, policy.host_abi_minor, err.text(), err.capacity());
  } catch (...) {
    throw HandlerLoadError(file, "negotiate", "the entry " + thrown_across_abi());
  }
  if (err.overran())
    throw HandlerLoadError(file, "negotiate",
                           "the entry " + err.failure("entry", DOWSER_OK).reason());
  if (api == nullptr) {
    const std::string reason = err.message();
    throw HandlerLoadError(file, "negotiate",
                           "handler refused host ABI " +
                               abi_text(policy.host_abi_major, policy.host_abi_minor) + ": " +
                               (reason.empty() ? "(no reason given)" : reason));
  }
  return api;
}

// Read from the table's first bytes, which every major keeps (struct_size,
// then the versions), before its size is judged: a table of another major
// is refused for its major, whatever its layout.
void check_version(const std::filesystem::path& file, const dowser_handler_api* raw, uint32_t size,
                   const LoadPolicy& policy) {
  uint16_t major = 0;
  uint16_t minor = 0;
  if (size < offsetof(dowser_handler_api, abi_minor) + sizeof minor) return;  // judged by size
  const auto* bytes = reinterpret_cast<const unsigned char*>(raw);
  std::memcpy(&major, bytes + offsetof(dowser_handler_api, abi_major), sizeof major);
  std::memcpy(&minor, bytes + offsetof(dowser_handler_api, abi_minor), sizeof minor);
  std::string versions = "handler ABI " + abi_text(major, minor) + ", host ABI " +
                         abi_text(policy.host_abi_major, policy.host_abi_minor);
  if (major != policy.host_abi_major)
    throw HandlerLoadError(file, "negotiate", versions + " (major differs)");
  if (minor > policy.host_abi_minor)
    throw HandlerLoadError(file, "negotiate", versions + " (handler is newer than this host)");
}

constexpr size_t kMaxHandlerName = 63;

bool valid_handler_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxHandlerName) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
  });
}

// A name as the refusal shows it: quoted, cut after the longest valid
// length, bytes that are not printable ASCII escaped.
std::string quoted_name(std::string_view name) {
  std::string text = "'";
  for (char c : name.substr(0, kMaxHandlerName + 1)) {
    if (c >= 0x20 && c < 0x7f) {
      text += c;
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(c));
      text += escaped;
    }
  }
  return text + (name.size() > kMaxHandlerName + 1 ? "'..." : "'");
}

void check_table(const std::filesystem::path& file, const dowser_handler_api& api) {
  auto refuse = [&](const std::string& reason) {
    throw HandlerLoadError(file, "check table", reason);
  };
  if (api.name == nullptr) refuse("name is NULL");
  // Read no further than a valid name could go (plus one, to see it is too long).
  const std::string_view name(api.name, strnlen(api.name, kMaxHandlerName + 2));
  if (!valid_handler_name(name))
    refuse("name " + quoted_name(name) + " is not 1 to 63 characters of [A-Za-z0-9._-]");
  if (api.version == nullptr) refuse("version is NULL");
  if ((api.flags & ~DOWSER_HANDLER_FLAG_SHARED_DEVICES) != 0)
    refuse("flags has unknown bits " + std::to_string(api.flags));
  const std::pair<const char*, bool> required[] = {
      {"init", api.init == nullptr},
      {"destroy", api.destroy == nullptr},
      {"start_discovery", api.start_discovery == nullptr},
      {"stop_discovery", api.stop_discovery == nullptr}};
  std::vector<std::string> missing;
  for (const auto& [function, is_null] : required)
    if (is_null) missing.emplace_back(function);
  if (missing.empty()) return;
  std::string names = missing.front();
  for (size_t i = 1; i < missing.size(); ++i) names += ", " + missing[i];
  refuse(missing.size() == 1 ? "required function " + names + " is NULL"
                             : "required functions " + names + " are NULL");
}

// The minimal table a 1.0 handler provides: everything up to stop_discovery.
constexpr size_t kMinimalTableSize = offsetof(dowser_handler_api, validate_request);

std::shared_ptr<const LoadedHandler> check_and_copy(const std::filesystem::path& file,
                                                    const dowser_handler_api* raw,
                                                    const LoadPolicy& policy) {
  if (raw == nullptr) throw HandlerLoadError(file, "check table", "function table is NULL");
  uint32_t size = 0;
  std::memcpy(&size, raw, sizeof size);
  check_version(file, raw, size, policy);
  if (size < kMinimalTableSize) {
    throw HandlerLoadError(file, "check table",
                           "struct_size " + std::to_string(size) + " is smaller than the " +
                               std::to_string(kMinimalTableSize) + " bytes of ABI 1.0");
  }
  if (size > DOWSER_MAX_RECORD_SIZE) {
    throw HandlerLoadError(
        file, "check table",
        "struct_size " + std::to_string(size) + " is above DOWSER_MAX_RECORD_SIZE (" +
            std::to_string(DOWSER_MAX_RECORD_SIZE) + "), so no record (rule V3)");
  }
  auto api = abi::read_record<dowser_handler_api>(raw);
  check_table(file, api);
  return std::make_shared<const LoadedHandler>(file, api, policy.host_abi_minor);
}

// ---- host side of the function table ----------------------------------------

// Maps the opaque handles given to handlers to host objects. Handles are
// never reused, so a handler that calls with a stale handle finds nothing
// instead of someone else's session.
template <typename Entry>
class HandleTable {
 public:
  uint64_t add(std::shared_ptr<Entry> entry) {
    std::lock_guard lock(mutex_);
    uint64_t id = ++last_id_;
    entries_.emplace(id, std::move(entry));
    return id;
  }
  std::shared_ptr<Entry> find(uint64_t id) const {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(id);
    return it == entries_.end() ? nullptr : it->second;
  }
  void remove(uint64_t id) {
    std::lock_guard lock(mutex_);
    entries_.erase(id);
  }
  // Keeps id's entry as it now is, for the last kRetiredKept retired ids:
  // a late call on a handle just retired still finds it.
  void retire(uint64_t id, std::shared_ptr<Entry> tombstone) {
    std::lock_guard lock(mutex_);
    entries_[id] = std::move(tombstone);
    retired_.push_back(id);
    if (retired_.size() > kRetiredKept) {
      entries_.erase(retired_.front());
      retired_.pop_front();
    }
  }

 private:
  static constexpr size_t kRetiredKept = 64;
  mutable std::mutex mutex_;
  uint64_t last_id_ = 0;
  std::unordered_map<uint64_t, std::shared_ptr<Entry>> entries_;
  std::deque<uint64_t> retired_;
};

enum class SessionState { running, stopping, stopped };

struct SessionEntry {
  SessionEntry(std::shared_ptr<SessionSink> s, bool shares) : sink(std::move(s)), shared(shares) {}
  std::shared_ptr<SessionSink> sink;
  bool shared;                  // the handler's default sharing
  WriterPreferringMutex mutex;  // reports hold it shared; state changes exclusively
  SessionState state = SessionState::running;
  bool failed = false;        // report_error was called
  bool start_failed = false;  // stopped because start_discovery failed
};

// A call on a stopped session (rule T4), for the sink to tell.
void tell_late_call(const SessionEntry& entry, const char* what) {
  if (entry.start_failed)
    entry.sink->on_call_after_failed_start(what);
  else
    entry.sink->on_late_call(what);
}

HandleTable<HandlerLogSink>& log_table() {
  static auto* table = new HandleTable<HandlerLogSink>();  // outlives late handler threads
  return *table;
}

HandleTable<SessionEntry>& session_table() {
  static auto* table = new HandleTable<SessionEntry>();
  return *table;
}

template <typename Handle>
uint64_t id_of(Handle* handle) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
}

template <typename Handle>
Handle* handle_of(uint64_t id) {
  return reinterpret_cast<Handle*>(static_cast<uintptr_t>(id));
}

// A level that is none of DOWSER_LOG_* says nothing of how bad the news is,
// only that the handler got the call wrong: shown as a warning, like the
// host's other complaints about a handler, with the level it gave.
constexpr int32_t kInvalidLogLevelShownAs = DOWSER_LOG_WARN;

std::string invalid_level_line(int32_t level, std::string_view text) {
  return std::string(text) + " (logged with invalid level " + std::to_string(level) +
         ", not one of DOWSER_LOG_TRACE..DOWSER_LOG_ERROR)";
}

void log_to(uint64_t log_id, int32_t level, std::string_view message) noexcept {
  if (auto sink = log_table().find(log_id)) {
    try {
      (*sink)(level, message);
    } catch (...) {  // a failing log sink must not reach the handler
    }
  }
}

// A line a handler logged, as the host shows it: a line that cannot be read
// is a warning saying why (an empty line would hide the mistake); a long one
// is cut (a megabyte per line would fill the node's disk), saying how long;
// one with an invalid level is a warning that says so.
struct ShownLogLine {
  int32_t level;
  std::string text;
};

ShownLogLine shown_log_line(int32_t level, dowser_str message) {
  if (auto problem = unreadable_problem(kUnreadableLogMessage, message))
    return {DOWSER_LOG_WARN, *problem};
  std::string text = bounded_text(message, DOWSER_MAX_LOG_LEN);
  if (level >= DOWSER_LOG_TRACE && level <= DOWSER_LOG_ERROR) return {level, std::move(text)};
  return {kInvalidLogLevelShownAs, invalid_level_line(level, text)};
}

void host_log(dowser_host_ctx* ctx, int32_t level, dowser_str message) {
  try {
    const ShownLogLine line = shown_log_line(level, message);
    log_to(id_of(ctx), line.level, line.text);
  } catch (...) {  // out of memory: the line is lost, the handler goes on
  }
}

std::optional<std::string> duplicate_id(const Snapshot& snapshot) {
  std::set<std::string_view> seen;
  for (const auto& device : snapshot)
    if (!seen.insert(device.id).second) return device.id;
  return std::nullopt;
}

void resolve_sharing(Snapshot& snapshot, bool handler_shares) {
  for (auto& device : snapshot) {
    if (device.sharing == Sharing::handler_default)
      device.sharing = handler_shares ? Sharing::shared : Sharing::local;
  }
}

// Runs deliver(entry), under the entry's shared lock, unless no session has
// the handle or stop_discovery has returned: then the sink hears of the
// late call (rule T4).
template <typename Deliver>
void with_unstopped_session(dowser_session_host* session, const char* what, Deliver&& deliver) {
  auto entry = session_table().find(id_of(session));
  if (!entry) return;
  std::shared_lock lock(entry->mutex);
  if (entry->state == SessionState::stopped) {
    tell_late_call(*entry, what);
    return;
  }
  deliver(*entry);
}

// Runs deliver(entry) while the session is running; otherwise tells the sink
// (after stop) or just refuses (while stopping or after an error).
template <typename Deliver>
dowser_status with_running_session(dowser_session_host* session, const char* what,
                                   Deliver&& deliver) {
  dowser_status status = DOWSER_ERR_STOPPED;
  with_unstopped_session(session, what, [&](SessionEntry& entry) {
    if (entry.state == SessionState::running && !entry.failed) status = deliver(entry);
  });
  return status;
}

dowser_status host_report_devices(dowser_session_host* session, const dowser_device* devices,
                                  size_t devices_len) {
  // No session can be this: not STOPPED, which would tell the handler to give up.
  if (session == nullptr) return DOWSER_ERR_INVALID_ARGUMENT;
  return with_running_session(session, "report_devices", [&](SessionEntry& entry) {
    try {
      CheckedReport report = check_report(devices, devices_len);
      if (auto id = duplicate_id(report.devices)) {
        entry.sink->on_bad_report("device id '" + *id + "' appears twice in one snapshot");
        return DOWSER_ERR_INVALID_ARGUMENT;
      }
      resolve_sharing(report.devices, entry.shared);
      entry.sink->on_invalid_devices(report.invalid);
      entry.sink->on_snapshot(std::move(report.devices));
      return DOWSER_OK;
    } catch (const std::bad_alloc&) {
      return DOWSER_ERR_NO_MEMORY;
    } catch (const std::exception& e) {
      entry.sink->on_bad_report(e.what());
      return DOWSER_ERR_INVALID_ARGUMENT;
    }
  });
}

// Also while the session stops (its threads may say why they end). A handle
// no session of this host ever had names nothing to log under: the line is
// dropped.
void host_log_session(dowser_session_host* session, int32_t level, dowser_str message) {
  try {
    with_unstopped_session(session, "log_session", [&](SessionEntry& entry) {
      const ShownLogLine line = shown_log_line(level, message);
      entry.sink->on_log(line.level, line.text);
    });
  } catch (...) {  // out of memory, or a failing sink: the line is lost, the handler goes on
  }
}

dowser_status host_report_error(dowser_session_host* session, dowser_status code,
                                dowser_str message) {
  if (session == nullptr) return DOWSER_ERR_INVALID_ARGUMENT;
  // Read before the session is marked failed: a message that cannot be
  // copied (out of memory) must not leave it failed with nobody told.
  // Retried with backoff, logged each time and shown in the status API. An
  // unreadable message still ends the session (that is what the handler
  // meant); the message says what was wrong with it.
  std::string text;
  try {
    const auto unreadable = unreadable_problem("report_error message", message);
    text = unreadable ? *unreadable : bounded_text(message, DOWSER_MAX_ERRLEN);
  } catch (...) {
    return DOWSER_ERR_NO_MEMORY;
  }
  auto entry = session_table().find(id_of(session));
  if (!entry) return DOWSER_ERR_STOPPED;
  // Exclusive, and held while the sink takes the error (as a snapshot is
  // taken under the lock): a report racing with it waits, and then sees
  // whether the session failed.
  std::unique_lock lock(entry->mutex);
  if (entry->state == SessionState::stopped) {
    tell_late_call(*entry, "report_error");
    return DOWSER_ERR_STOPPED;
  }
  if (entry->state == SessionState::stopping || entry->failed) return DOWSER_ERR_STOPPED;
  try {
    entry->sink->on_error(code, std::move(text));
  } catch (...) {
    return DOWSER_ERR_GENERIC;  // the sink failed: the session goes on, and may fail again
  }
  entry->failed = true;
  return DOWSER_OK;
}

void tell_stop_failed(uint64_t id, const std::string& failure) noexcept {
  if (auto entry = session_table().find(id)) {
    try {
      entry->sink->on_stop_failed(failure);
    } catch (...) {  // the failure is logged already
    }
  }
}

void set_state(uint64_t id, SessionState state) {
  if (auto entry = session_table().find(id)) {
    std::unique_lock lock(entry->mutex);
    entry->state = state;
  }
}

// Calls into the handler for call, turning an exception it lets out into a
// HandlerCallError.
template <typename Call>
auto call_handler(const char* call, Call&& body) {
  try {
    return body();
  } catch (...) {
    throw HandlerCallError::thrown(call);
  }
}

// The same for calls that cannot fail (stop_discovery, destroy): logged as
// the handler's own error. Returns what went wrong, if anything.
template <typename Call>
std::optional<std::string> call_handler_noexcept(const char* call, uint64_t log_id,
                                                 Call&& body) noexcept {
  try {
    body();
    return std::nullopt;
  } catch (...) {
    std::string failure = std::string(call) + " " + thrown_across_abi();
    log_to(log_id, DOWSER_LOG_ERROR, failure);
    return failure;
  }
}

}  // namespace

// ---- errors ----------------------------------------------------------------

HandlerLoadError::HandlerLoadError(std::filesystem::path file, std::string stage,
                                   std::string reason)
    : std::runtime_error(file.string() + ": " + stage + ": " + reason),
      file_(std::move(file)),
      stage_(std::move(stage)),
      reason_(std::move(reason)) {}

namespace {

std::string call_failure_reason(const std::string& message, bool wrote_past_buffer) {
  if (!wrote_past_buffer) return shown_message(message);
  return "wrote past the end of the " + std::to_string(DOWSER_MAX_ERRLEN) +
         "-byte error buffer it was given (err_cap), against rule O5; its message: " +
         shown_message(message);
}

}  // namespace

ErrorBuffer::ErrorBuffer() { bytes_.fill(kUnwritten); }

std::string ErrorBuffer::message() const {
  const auto end = bytes_.begin() + capacity();
  if (std::all_of(bytes_.begin(), end, [](char c) { return c == kUnwritten; })) return "";
  return {bytes_.data(), ::strnlen(bytes_.data(), capacity())};
}

bool ErrorBuffer::overran() const {
  return std::any_of(bytes_.begin() + capacity(), bytes_.end(),
                     [](char c) { return c != kUnwritten; });
}

HandlerCallError ErrorBuffer::failure(std::string call, dowser_status status) const {
  return {std::move(call), status, message(), overran()};
}

HandlerCallError::HandlerCallError(std::string call, dowser_status status, std::string message,
                                   bool wrote_past_buffer)
    : std::runtime_error(call + " failed (status " + std::to_string(status) +
                         "): " + call_failure_reason(message, wrote_past_buffer)),
      call_(std::move(call)),
      status_(status),
      message_(std::move(message)),
      reason_(call_failure_reason(message_, wrote_past_buffer)),
      wrote_past_buffer_(wrote_past_buffer) {}

HandlerCallError HandlerCallError::thrown(std::string call) {
  HandlerCallError error(std::move(call), DOWSER_ERR_GENERIC, thrown_across_abi());
  error.threw_ = true;
  return error;
}

// ---- loading ---------------------------------------------------------------

LoadedHandler::LoadedHandler(std::filesystem::path path, const dowser_handler_api& api,
                             uint16_t host_abi_minor)
    : path_(std::move(path)),
      api_(api),
      name_(api.name),
      version_(api.version),
      host_abi_minor_(host_abi_minor) {}

bool LoadedHandler::shares_devices() const noexcept {
  return (api_.flags & DOWSER_HANDLER_FLAG_SHARED_DEVICES) != 0;
}

std::shared_ptr<const LoadedHandler> load_handler(const std::filesystem::path& file,
                                                  const LoadPolicy& policy,
                                                  const AdmitHandler& admit) {
  check_handler_file(file, policy);
  auto opened = open_entry(file);
  auto handler = check_and_copy(file, call_entry(file, opened.entry, policy), policy);
  if (admit) admit(*handler);
  keep_loaded(std::move(opened.library));
  return handler;
}

std::shared_ptr<const LoadedHandler> adopt_handler(const std::filesystem::path& label,
                                                   const dowser_handler_api* api,
                                                   const LoadPolicy& policy) {
  return check_and_copy(label, api, policy);
}

HandlerRegistry::HandlerRegistry(LoadPolicy policy) : policy_(std::move(policy)) {}

HandlerRegistry::ScanResult HandlerRegistry::scan(const std::filesystem::path& dir) {
  ScanResult result;
  std::error_code error;
  std::vector<std::filesystem::path> files;
  for (const auto& item : std::filesystem::directory_iterator(dir, error)) {
    if (item.path().extension() == ".so" && !names_by_path_.count(item.path()))
      files.push_back(item.path());
  }
  if (error) {
    result.failures.emplace_back(dir, "scan", error.message());
    return result;
  }
  std::sort(files.begin(), files.end());  // deterministic winner on a name clash
  for (const auto& file : files) {
    if (auto refusal = refused_before(file)) {
      result.failures.push_back(std::move(*refusal));
      continue;
    }
    try {
      // A name taken is refused before the library is kept: it is unloaded,
      // so the file fixed in place loads anew (not the image kept by path).
      auto handler = load_handler(
          file, policy_, [this](const LoadedHandler& loaded) { require_name_free(loaded); });
      add(handler);
      result.loaded.push_back(std::move(handler));
    } catch (const HandlerLoadError& e) {
      remember_refusal(file, e);
      result.failures.push_back(e);
    }
  }
  return result;
}

std::optional<HandlerRegistry::FileStamp> HandlerRegistry::file_stamp(
    const std::filesystem::path& file) {
  struct stat info {};
  if (::stat(file.c_str(), &info) != 0) return std::nullopt;
  auto nanoseconds = [](const timespec& time) {
    return static_cast<int64_t>(time.tv_sec) * 1'000'000'000 + time.tv_nsec;
  };
  return FileStamp{static_cast<int64_t>(info.st_dev),  static_cast<int64_t>(info.st_ino),
                   static_cast<int64_t>(info.st_size), nanoseconds(info.st_mtim),
                   nanoseconds(info.st_ctim),          static_cast<int64_t>(info.st_mode)};
}

std::optional<HandlerLoadError> HandlerRegistry::refused_before(const std::filesystem::path& file) {
  auto known = refused_.find(file);
  if (known == refused_.end()) return std::nullopt;
  if (file_stamp(file) == known->second.stamp) return known->second.error;
  refused_.erase(known);  // changed (or gone): tried afresh
  return std::nullopt;
}

// Only refusals of what the file holds (a name taken stays taken: handlers
// are never unloaded): one of its permissions (or its directory's, which its
// stamp does not show) or of opening it (a missing dependency installed
// since) is tried again every time.
void HandlerRegistry::remember_refusal(const std::filesystem::path& file,
                                       const HandlerLoadError& error) {
  if (error.stage() != "negotiate" && error.stage() != "check table" && error.stage() != "register")
    return;
  if (auto stamp = file_stamp(file)) refused_.insert_or_assign(file, Refusal{*stamp, error});
}

void HandlerRegistry::require_name_free(const LoadedHandler& handler) const {
  auto taken = by_name_.find(handler.name());
  if (taken == by_name_.end()) return;
  throw HandlerLoadError(handler.path(), "register",
                         "handler name '" + handler.name() + "' is already taken by " +
                             taken->second->path().string());
}

void HandlerRegistry::add(std::shared_ptr<const LoadedHandler> handler) {
  require_name_free(*handler);
  by_name_.emplace(handler->name(), handler);
  names_by_path_[handler->path()] = handler->name();
}

std::shared_ptr<const LoadedHandler> HandlerRegistry::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const LoadedHandler>> HandlerRegistry::handlers() const {
  std::vector<std::shared_ptr<const LoadedHandler>> result;
  for (const auto& [name, handler] : by_name_) result.push_back(handler);
  return result;
}

// ---- sinks -----------------------------------------------------------------

namespace {

// What names a device's Instance: all a gone device needs to carry.
Device identity_of(std::string id, Sharing sharing) {
  Device device;
  device.id = std::move(id);
  device.sharing = sharing;
  return device;
}

}  // namespace

DeviceChanges changes_between(const Snapshot& before, const Snapshot& after) {
  DeviceChanges changes;
  changes.devices = after.size();
  auto old_device = before.begin();
  for (const auto& device : after) {
    for (; old_device != before.end() && old_device->id < device.id; ++old_device)
      changes.gone.push_back(identity_of(old_device->id, old_device->sharing));
    const bool known = old_device != before.end() && old_device->id == device.id;
    if (known && *old_device == device) {
      ++old_device;
      continue;
    }
    if (known && old_device->sharing != device.sharing)
      changes.gone.push_back(identity_of(old_device->id, old_device->sharing));
    if (known) ++old_device;
    changes.reported.push_back(device);
  }
  for (; old_device != before.end(); ++old_device)
    changes.gone.push_back(identity_of(old_device->id, old_device->sharing));
  return changes;
}

// Tells each kind of late call (rule T4) of one session once: a thread left
// reporting every 100 ms must not write ten lines a second.
class LateCallTeller {
 public:
  explicit LateCallTeller(std::function<void(const std::string&)> problem)
      : problem_(std::move(problem)) {}
  // what: the host function; ended: how the session ended.
  void tell(std::string_view what, std::string_view ended = kStopReturned) {
    std::string call = std::string(what) + " after " + std::string(ended);
    {
      const std::lock_guard lock(mutex_);
      if (!told_.insert(call).second) return;
    }
    problem_(call + " (rule T4): dropped, and so are later ones");
  }
  static constexpr std::string_view kStopReturned = "stop_discovery returned";
  static constexpr std::string_view kStartFailed = "start_discovery failed";

 private:
  std::function<void(const std::string&)> problem_;
  std::mutex mutex_;
  std::set<std::string, std::less<>> told_;  // guarded by mutex_
};

CoalescingSink::CoalescingSink(std::function<void()> notify,
                               std::function<void(const std::string&)> problem, HandlerLogSink log)
    : notify_(std::move(notify)),
      problem_(std::move(problem)),
      log_(std::move(log)),
      late_calls_(problem_ ? std::make_shared<LateCallTeller>(problem_) : nullptr) {}

namespace {

// Hears late calls for a session that is gone (see late_call_sink()).
class LateCallSink final : public SessionSink {
 public:
  explicit LateCallSink(std::shared_ptr<LateCallTeller> teller) : teller_(std::move(teller)) {}
  void on_snapshot(Snapshot) override {}
  void on_error(dowser_status, std::string) override {}
  void on_log(int32_t, std::string_view) override {}
  void on_late_call(std::string_view what) override { teller_->tell(what); }
  void on_call_after_failed_start(std::string_view what) override {
    teller_->tell(what, LateCallTeller::kStartFailed);
  }

 private:
  std::shared_ptr<LateCallTeller> teller_;
};

}  // namespace

void CoalescingSink::on_log(int32_t level, std::string_view message) {
  if (log_) log_(level, message);
}

void CoalescingSink::on_late_call(std::string_view what) {
  if (late_calls_) late_calls_->tell(what);
}

void CoalescingSink::on_bad_report(const std::string& reason) {
  if (!problem_) return;
  {
    std::lock_guard lock(report_mutex_);
    if (std::exchange(last_bad_report_, reason) == reason) return;  // once per reason in a row
  }
  problem_("report refused: " + reason);
}

void CoalescingSink::on_invalid_devices(const std::vector<InvalidDevice>& devices) {
  if (!problem_) return;
  std::vector<const InvalidDevice*> untold;
  {
    std::lock_guard lock(report_mutex_);
    std::set<std::vector<std::string>> told;
    for (const auto& device : devices) {
      if (!told_invalid_.count(device.problems)) untold.push_back(&device);
      told.insert(device.problems);
    }
    told_invalid_ = std::move(told);  // a device valid again, or gone, is news when it is back
  }
  for (const auto* device : untold)
    problem_("device left out of the snapshot: " + joined_problems(*device));
}

std::shared_ptr<SessionSink> CoalescingSink::late_call_sink() const {
  return late_calls_ ? std::make_shared<LateCallSink>(late_calls_) : nullptr;
}

void CoalescingSink::on_snapshot(Snapshot snapshot) {
  const auto reported_at = std::chrono::steady_clock::now();
  auto by_id = [](const Device& a, const Device& b) { return a.id < b.id; };
  std::sort(snapshot.begin(), snapshot.end(), by_id);
  bool was_empty = false;
  {
    std::lock_guard report_lock(report_mutex_);
    auto changes = changes_between(last_reported_, snapshot);
    changes.complete = std::exchange(first_report_, false);
    changes.reported_at = reported_at;
    last_reported_ = std::move(snapshot);
    last_bad_report_.clear();  // a refused report after a good one is news again
    std::lock_guard lock(mutex_);
    was_empty = !pending_.has_value();
    fold(std::move(changes));
  }
  if (was_empty && notify_) notify_();
}

// Later changes of a device replace earlier ones: what is pending always
// takes the taker's view to the newest snapshot.
void CoalescingSink::fold(DeviceChanges changes) {
  // Pending changes keep the time of the oldest snapshot in them.
  const auto reported_at = pending_ ? pending_->reported_at : changes.reported_at;
  if (!pending_ || changes.complete) pending_ = Pending{changes.complete, {}, 0, reported_at};
  auto& pending = *pending_;
  pending.count = changes.devices;
  for (auto& device : changes.gone) {
    DeviceKey key{std::move(device.id), device.sharing};
    if (pending.complete)
      pending.devices.erase(key);
    else
      pending.devices.insert_or_assign(std::move(key), std::nullopt);
  }
  for (auto& device : changes.reported) {
    DeviceKey key{device.id, device.sharing};
    pending.devices.insert_or_assign(std::move(key), std::move(device));
  }
}

void CoalescingSink::on_error(dowser_status code, std::string message) {
  {
    std::lock_guard lock(mutex_);
    error_.emplace(code, std::move(message));
  }
  if (notify_) notify_();
}

std::optional<DeviceChanges> CoalescingSink::take_changes() {
  std::optional<Pending> pending;
  {
    std::lock_guard lock(mutex_);
    pending = std::exchange(pending_, std::nullopt);
  }
  if (!pending) return std::nullopt;
  DeviceChanges changes;
  changes.complete = pending->complete;
  changes.devices = pending->count;
  changes.reported_at = pending->reported_at;
  for (auto& [key, device] : pending->devices) {
    if (device)
      changes.reported.push_back(std::move(*device));
    else
      changes.gone.push_back(identity_of(key.first, key.second));
  }
  return changes;
}

std::optional<std::pair<dowser_status, std::string>> CoalescingSink::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

// ---- instances and sessions -------------------------------------------------

const dowser_host_api& host_api() {
  static const dowser_host_api api = [] {
    dowser_host_api table{};
    table.struct_size = sizeof table;
    table.abi_major = DOWSER_ABI_VERSION_MAJOR;
    table.abi_minor = DOWSER_ABI_VERSION_MINOR;
    table.log = &host_log;
    table.report_devices = &host_report_devices;
    table.report_error = &host_report_error;
    table.log_session = &host_log_session;
    return table;
  }();
  return api;
}

const dowser_host_api& host_api(uint16_t minor) {
  // What a 1.0 host passes: no log_session, and a struct_size that says so.
  static const dowser_host_api api_1_0 = [] {
    dowser_host_api table = host_api();
    table.struct_size = offsetof(dowser_host_api, log_session);
    table.abi_minor = 0;
    table.log_session = nullptr;
    return table;
  }();
  return minor == 0 ? api_1_0 : host_api();
}

HandlerInstance::HandlerInstance(std::shared_ptr<const LoadedHandler> handler, HandlerLogSink log,
                                 const std::string& config)
    : handler_(std::move(handler)),
      log_id_(log_table().add(std::make_shared<HandlerLogSink>(std::move(log)))) {
  ErrorBuffer err;
  dowser_status status = DOWSER_OK;
  try {
    status = call_handler("init", [&] {
      return handler_->api().init(&host_api(handler_->host_abi_minor()),
                                  handle_of<dowser_host_ctx>(log_id_), abi::view(config),
                                  &instance_, err.text(), err.capacity());
    });
  } catch (...) {
    log_table().remove(log_id_);
    throw;
  }
  if (status != DOWSER_OK || instance_ == nullptr) {
    log_table().remove(log_id_);
    if (status == DOWSER_OK) throw HandlerCallError("init", status, "returned no instance");
    throw err.failure("init", status);
  }
  warn_of_overrun(err, "init");
}

// A call that succeeded keeps its result even if it wrote past its error
// buffer (a running session must be stopped, not dropped); the handler's
// log says what it did.
void HandlerInstance::warn_of_overrun(const ErrorBuffer& err, const std::string& call) const {
  if (err.overran())
    log_to(log_id_, DOWSER_LOG_WARN,
           call + " succeeded, but " + err.failure(call, DOWSER_OK).reason());
}

HandlerInstance::~HandlerInstance() {
  call_handler_noexcept("destroy", log_id_, [this] { handler_->api().destroy(instance_); });
  log_table().remove(log_id_);
}

void HandlerInstance::validate(const DiscoverRequest& request) {
  if (!handler_->has_validate()) return;
  ErrorBuffer err;
  abi::RequestView view(request);
  dowser_status status = call_handler("validate_request", [&] {
    return handler_->api().validate_request(instance_, view.get(), err.text(), err.capacity());
  });
  if (status != DOWSER_OK) throw err.failure("validate_request", status);
  warn_of_overrun(err, "validate_request");
}

std::unique_ptr<DiscoverySession> HandlerInstance::start(const DiscoverRequest& request,
                                                         std::shared_ptr<SessionSink> sink) {
  uint64_t id = session_table().add(
      std::make_shared<SessionEntry>(std::move(sink), handler_->shares_devices()));
  std::unique_ptr<DiscoverySession> session(
      new DiscoverySession(handler_->api(), instance_, id, log_id_));
  ErrorBuffer err;
  abi::RequestView view(request);
  // A start that failed, or threw, is never stopped (rule: stop once per success).
  session->stopped_ = true;
  dowser_status status = call_handler("start_discovery", [&] {
    return handler_->api().start_discovery(instance_, view.get(),
                                           handle_of<dowser_session_host>(id), &session->session_,
                                           err.text(), err.capacity());
  });
  if (status != DOWSER_OK) throw err.failure("start_discovery", status);
  session->stopped_ = false;
  session->started_ = true;
  warn_of_overrun(err, "start_discovery");
  return session;
}

DiscoverySession::DiscoverySession(const dowser_handler_api& api, dowser_handler* instance,
                                   uint64_t id, uint64_t log_id)
    : api_(api), instance_(instance), id_(id), log_id_(log_id) {}

DiscoverySession::~DiscoverySession() {
  stop();
  // A handler thread T4 forbids may still report: it is told so (and the
  // sink's owner may log it) for a while, through a small stand-in sink.
  auto entry = session_table().find(id_);
  auto late = entry ? entry->sink->late_call_sink() : nullptr;
  if (!late) {
    session_table().remove(id_);
    return;
  }
  auto tombstone = std::make_shared<SessionEntry>(std::move(late), entry->shared);
  tombstone->state = SessionState::stopped;
  tombstone->start_failed = !started_;
  session_table().retire(id_, std::move(tombstone));
}

void DiscoverySession::stop() {
  if (stopped_) return;
  stopped_ = true;
  set_state(id_, SessionState::stopping);
  auto failure = call_handler_noexcept("stop_discovery", log_id_,
                                       [this] { api_.stop_discovery(instance_, session_); });
  set_state(id_, SessionState::stopped);
  if (failure) tell_stop_failed(id_, *failure);
}

}  // namespace dowser::host
