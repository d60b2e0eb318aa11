// HandlerRegistry: loads discovery-handler shared objects through the C ABI
// (sdk/include/dowser/handler.h) and drives them: handler instances, and
// discovery sessions whose reports come back through the host function table.
//
// Used by dowserd and by the test kit (FakeHost, dowser-handler-check), so a
// handler is loaded and driven the same way everywhere.
#pragma once

#include <dowser/handler.h>
#include <dowser/handler.hpp>

#include "device_rules.hpp"

#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dowser::host {

// A handler that could not be loaded: which file, at which stage, and why.
// Stages: "permissions", "open", "resolve entry", "negotiate", "check table",
// "register".
class HandlerLoadError : public std::runtime_error {
 public:
  HandlerLoadError(std::filesystem::path file, std::string stage, std::string reason);
  const std::filesystem::path& file() const noexcept { return file_; }
  const std::string& stage() const noexcept { return stage_; }
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::filesystem::path file_;
  std::string stage_;
  std::string reason_;
};

// A handler call that returned an error status, with the handler's message
// (empty when the handler wrote none).
class HandlerCallError : public std::runtime_error {
 public:
  // wrote_past_buffer: the handler wrote beyond the err_cap it was given
  // (rule O5); the host noticed it in the bytes after the buffer.
  HandlerCallError(std::string call, dowser_status status, std::string message,
                   bool wrote_past_buffer = false);
  // The call threw a C++ exception across the C ABI (rule T6): the host
  // caught it and failed the call with DOWSER_ERR_GENERIC and a message
  // saying so; the handler returned no status at all.
  static HandlerCallError thrown(std::string call);
  bool threw() const noexcept { return threw_; }
  bool wrote_past_buffer() const noexcept { return wrote_past_buffer_; }
  const std::string& call() const noexcept { return call_; }
  dowser_status status() const noexcept { return status_; }
  // What the handler wrote (empty, or a whole buffer with no NUL, if so).
  const std::string& message() const noexcept { return message_; }
  // The message as logs show it: "(no message)" when there is none, the
  // start of one with no NUL and a note of rule O5, a note of a write past
  // the buffer first.
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string call_;
  dowser_status status_;
  std::string message_;
  std::string reason_;
  bool threw_ = false;
  bool wrote_past_buffer_ = false;
};

// Where a handler writes why a call failed (rule O5), for the host and the
// test kit. It starts filled with a byte, not zeros: a message written
// without its NUL then shows as one (not as a clean message on a zeroed
// buffer), and it is never read past its capacity. Bytes past err_cap guard
// the end: a handler that writes there (an off-by-one NUL, a strcpy) is told
// so. A long overrun has damaged more than the guard; no buffer makes that
// safe.
class ErrorBuffer {
 public:
  ErrorBuffer();
  char* text() { return bytes_.data(); }
  static constexpr size_t capacity() { return DOWSER_MAX_ERRLEN; }
  // The handler's message; empty when it wrote none, the whole buffer when
  // it left out the NUL.
  std::string message() const;
  bool overran() const;  // it wrote past capacity()
  HandlerCallError failure(std::string call, dowser_status status) const;

 private:
  static constexpr char kUnwritten = 0x5a;  // 'Z'
  std::array<char, DOWSER_MAX_ERRLEN + 64> bytes_;
};

// Who may own a handler file: root and the daemon's own user by default.
struct LoadPolicy {
  std::vector<uid_t> trusted_owners;  // empty: root and the effective user
  uint16_t host_abi_major = DOWSER_ABI_VERSION_MAJOR;
  uint16_t host_abi_minor = DOWSER_ABI_VERSION_MINOR;
};

// A loaded, checked handler library. Its library is never unloaded.
class LoadedHandler {
 public:
  // host_abi_minor: the minor of the host it was loaded as (LoadPolicy),
  // whose table its instances get.
  LoadedHandler(std::filesystem::path path, const dowser_handler_api& api,
                uint16_t host_abi_minor = DOWSER_ABI_VERSION_MINOR);
  const std::filesystem::path& path() const noexcept { return path_; }
  const dowser_handler_api& api() const noexcept { return api_; }
  const std::string& name() const noexcept { return name_; }
  const std::string& version() const noexcept { return version_; }
  bool shares_devices() const noexcept;
  bool has_validate() const noexcept { return api_.validate_request != nullptr; }
  uint16_t host_abi_minor() const noexcept { return host_abi_minor_; }

 private:
  std::filesystem::path path_;
  dowser_handler_api api_;  // copied by struct_size (rule V3)
  std::string name_;
  std::string version_;
  uint16_t host_abi_minor_;
};

// Why file is not there: "a symbolic link to <target>, which does not exist"
// when it is a link whose target is missing (through any chain of links),
// else "No such file or directory".
std::string missing_file_reason(const std::filesystem::path& file);

// Refuses (HandlerLoadError, stage "permissions") a file the loader will not
// open: not a regular file, or it or its directory owned by someone not
// trusted or writable by group or others; and (stage "open") one not
// written whole yet (unfinished_file_reason).
void check_handler_file(const std::filesystem::path& file, const LoadPolicy& policy = {});

// The dynamic symbols file exports (defined, global or weak, default or
// protected visibility), read from its ELF tables without running any of it.
// Throws std::runtime_error naming the file when it cannot be read as an ELF
// shared object of this machine's class.
std::vector<std::string> exported_symbols(const std::filesystem::path& file);

// Why file cannot be mapped yet, when it is shorter than its ELF headers say
// (a copy still being written): the loader would map pages past its end, and
// touching one kills the process (SIGBUS). nullopt when it is whole, or is no
// ELF file of this machine's class (the loader refuses that in its own words).
std::optional<std::string> unfinished_file_reason(const std::filesystem::path& file);

// Why file has no entry symbol, with a hint when it exports the entry under a
// C++ (mangled) name.
std::string missing_entry_reason(const std::filesystem::path& file);

// A symbol as C++ source spells it ("ns::f(int)"); name itself when it is not
// a C++ name.
std::string demangled_symbol(const std::string& name);

// A warning naming what file exports besides the entry (each such symbol can
// take the place of, or be taken by, one of the same name in the host or
// another library: ELF interposition), with the fix; or why its symbols
// could not be listed. nullopt when it exports the entry only.
std::optional<std::string> extra_exports_warning(const std::filesystem::path& file);

// What the host logs (a warning, as the handler's) for a log call whose
// text cannot be read: "<kUnreadableLogMessage>: data is NULL but len is 5: rule O4".
inline constexpr std::string_view kUnreadableLogMessage = "log message";

// Why a handler call failed when a C++ exception came out of it (rule T6):
// kThrownAcrossAbi, then ": <what()>" if it was a std::exception. Call only
// inside a catch block.
inline constexpr std::string_view kThrownAcrossAbi =
    "threw a C++ exception across the C ABI (rule T6)";
std::string thrown_across_abi();

// Text from a handler as the host shows it: at most max_bytes of it (cut at
// a UTF-8 character), then "... (N bytes)" when it was longer.
std::string shortened(std::string_view text, size_t max_bytes);

// Loads one handler file (check_handler_file first). Throws HandlerLoadError.
// admit, if given, may refuse the checked handler by throwing
// HandlerLoadError; the library is then unloaded, as for any refusal.
using AdmitHandler = std::function<void(const LoadedHandler&)>;
std::shared_ptr<const LoadedHandler> load_handler(const std::filesystem::path& file,
                                                  const LoadPolicy& policy = {},
                                                  const AdmitHandler& admit = {});

// Checks a vtable handed over directly (built-in handlers, tests) the same way
// load_handler checks one from a file. Throws HandlerLoadError.
std::shared_ptr<const LoadedHandler> adopt_handler(const std::filesystem::path& label,
                                                   const dowser_handler_api* api,
                                                   const LoadPolicy& policy = {});

// The set of loaded handlers, by unique name.
class HandlerRegistry {
 public:
  struct ScanResult {
    std::vector<std::shared_ptr<const LoadedHandler>> loaded;
    std::vector<HandlerLoadError> failures;
  };

  explicit HandlerRegistry(LoadPolicy policy = {});

  // Loads every *.so in dir not loaded before. A handler whose name is
  // already taken is refused (stage "register"). A file refused once it was
  // opened (stages "negotiate", "check table", "register") is unloaded, and
  // refused again from memory until it changes: loading it would run its
  // constructors again. Never throws for a bad file.
  ScanResult scan(const std::filesystem::path& dir);
  // Adds one handler; throws HandlerLoadError if its name is taken.
  void add(std::shared_ptr<const LoadedHandler> handler);
  // Throws HandlerLoadError (stage "register") if handler's name is taken.
  void require_name_free(const LoadedHandler& handler) const;
  std::shared_ptr<const LoadedHandler> find(std::string_view name) const;
  std::vector<std::shared_ptr<const LoadedHandler>> handlers() const;

 private:
  // What tells that a file changed: device, inode, size, mtime, ctime, mode.
  using FileStamp = std::array<int64_t, 6>;
  struct Refusal {
    FileStamp stamp;
    HandlerLoadError error;
  };
  static std::optional<FileStamp> file_stamp(const std::filesystem::path& file);
  std::optional<HandlerLoadError> refused_before(const std::filesystem::path& file);
  void remember_refusal(const std::filesystem::path& file, const HandlerLoadError& error);

  LoadPolicy policy_;
  std::map<std::string, std::shared_ptr<const LoadedHandler>, std::less<>> by_name_;
  std::map<std::filesystem::path, std::string> names_by_path_;
  std::map<std::filesystem::path, Refusal> refused_;
};

using Snapshot = std::vector<Device>;

// Log lines a handler writes through the host table. level is always one of
// DOWSER_LOG_*: a line the handler logged with any other level comes as
// DOWSER_LOG_WARN, its text followed by a note of the invalid level.
using HandlerLogSink = std::function<void(int32_t level, std::string_view message)>;

// Receives what a session's handler reports. Called on handler threads,
// concurrently: implementations must be thread-safe and return quickly.
class SessionSink {
 public:
  virtual ~SessionSink() = default;
  // A deep copy of a reported snapshot, with each device's sharing resolved
  // to local or shared. Devices that break the device rules are not in it.
  virtual void on_snapshot(Snapshot snapshot) = 0;
  // The devices left out of a snapshot because they break the device rules
  // (device_rules.hpp), with why: called for every snapshot, just before its
  // on_snapshot, and with none when none was left out.
  virtual void on_invalid_devices(const std::vector<InvalidDevice>& devices) { (void)devices; }
  virtual void on_error(dowser_status code, std::string message) = 0;
  // A line the handler logged about this session (log_session), as for
  // HandlerLogSink: level is one of DOWSER_LOG_*.
  virtual void on_log(int32_t level, std::string_view message) = 0;
  // A report, error or log line that arrived after stop_discovery returned
  // (rule T4), named by its host function ("report_devices", ...).
  virtual void on_late_call(std::string_view what) { (void)what; }
  // The same from a thread a start_discovery that failed left running (the
  // session was never stopped); told as on_late_call unless overridden.
  virtual void on_call_after_failed_start(std::string_view what) { on_late_call(what); }
  // A report the host refused (malformed arrays, unknown sharing value).
  virtual void on_bad_report(const std::string& reason) { (void)reason; }
  // stop_discovery failed (it let a C++ exception out, against rule T6),
  // e.g. "stop_discovery threw a C++ exception across the C ABI (rule T6):
  // why". It is logged through the instance's log sink as well; called once
  // stop_discovery has returned, on the thread that called stop().
  virtual void on_stop_failed(const std::string& reason) { (void)reason; }
  // What hears of late calls once the session is gone: the host keeps it for
  // a while after the session (not the sink itself, which may hold a big
  // snapshot). Null: late calls are dropped without a word.
  virtual std::shared_ptr<SessionSink> late_call_sink() const { return nullptr; }
};

// How a session's devices changed since the taker last looked. A device is
// identified by its id and its sharing (the two name its Instance), so a
// device whose sharing changed is gone as it was and reported as it is.
struct DeviceChanges {
  // True when `reported` holds every device and whatever the taker knew of
  // the session before is gone: a session's first snapshot, and anything
  // folded into it before it was taken. False: only what changed.
  bool complete = false;
  std::vector<Device> reported;  // new or changed devices (every one when complete)
  std::vector<Device> gone;      // devices no longer reported: id and sharing only
  size_t devices = 0;            // how many devices the newest snapshot holds
  // When the oldest snapshot folded into these reached the host.
  std::chrono::steady_clock::time_point reported_at{};
};

// The changes that take `before` to `after`; both sorted by id, ids unique.
DeviceChanges changes_between(const Snapshot& before, const Snapshot& after);

// Diffs each snapshot against the one before, on the reporting thread, and
// keeps what changed until it is taken: snapshots reported in between fold
// into one set of changes, so the newest state is what the taker ends up
// with (rule T5) at a cost that follows the changes, not the devices.
// notify is called once per transition from "nothing pending" to "pending".
class LateCallTeller;
class CoalescingSink : public SessionSink {
 public:
  // notify: new changes or an error to take (called on handler threads).
  // problem, if set: why a report was refused, once per distinct reason in a
  // row; why a device was left out of a snapshot, once until it is reported
  // valid, or with other problems, or not at all; and each kind of late call
  // (rule T4) once, also after the session is gone.
  // log, if set: the lines the handler logs about the session.
  explicit CoalescingSink(std::function<void()> notify,
                          std::function<void(const std::string&)> problem = {},
                          HandlerLogSink log = {});
  void on_snapshot(Snapshot snapshot) override;
  void on_invalid_devices(const std::vector<InvalidDevice>& devices) override;
  void on_error(dowser_status code, std::string message) override;
  void on_log(int32_t level, std::string_view message) override;
  void on_late_call(std::string_view what) override;
  void on_bad_report(const std::string& reason) override;
  std::shared_ptr<SessionSink> late_call_sink() const override;
  // Every snapshot counts, even one that changed nothing.
  std::optional<DeviceChanges> take_changes();
  std::optional<std::pair<dowser_status, std::string>> error() const;

 private:
  using DeviceKey = std::pair<std::string, Sharing>;
  // Changes not taken yet; a gone device maps to nullopt (never when complete).
  struct Pending {
    bool complete = false;
    std::map<DeviceKey, std::optional<Device>> devices;
    size_t count = 0;
    std::chrono::steady_clock::time_point reported_at{};  // of the oldest snapshot folded in
  };
  void fold(DeviceChanges changes);  // into pending_, under mutex_

  std::function<void()> notify_;
  std::function<void(const std::string&)> problem_;
  HandlerLogSink log_;
  std::shared_ptr<LateCallTeller> late_calls_;  // null without problem_
  std::string last_bad_report_;                 // guarded by report_mutex_
  std::mutex report_mutex_;   // one report at a time: each is diffed against the one before
  Snapshot last_reported_;    // sorted by id; guarded by report_mutex_
  bool first_report_ = true;  // guarded by report_mutex_
  // The problems of each device the last report left out, as told; guarded
  // by report_mutex_.
  std::set<std::vector<std::string>> told_invalid_;
  mutable std::mutex mutex_;
  std::optional<Pending> pending_;
  std::optional<std::pair<dowser_status, std::string>> error_;
};

class DiscoverySession;

// One initialised instance of a handler (init ... destroy). Control calls
// must come from one thread at a time (rule T1).
class HandlerInstance {
 public:
  // Calls init; throws HandlerCallError.
  HandlerInstance(std::shared_ptr<const LoadedHandler> handler, HandlerLogSink log,
                  const std::string& config = {});
  ~HandlerInstance();  // calls destroy; every session must be stopped first
  HandlerInstance(const HandlerInstance&) = delete;
  HandlerInstance& operator=(const HandlerInstance&) = delete;

  const LoadedHandler& handler() const noexcept { return *handler_; }

  // Calls validate_request when the handler has one; throws HandlerCallError.
  void validate(const DiscoverRequest& request);

  // Calls start_discovery; throws HandlerCallError. The sink must outlive the
  // returned session.
  std::unique_ptr<DiscoverySession> start(const DiscoverRequest& request,
                                          std::shared_ptr<SessionSink> sink);

 private:
  void warn_of_overrun(const ErrorBuffer& err, const std::string& call) const;

  std::shared_ptr<const LoadedHandler> handler_;
  uint64_t log_id_ = 0;  // this instance's dowser_host_ctx handle
  dowser_handler* instance_ = nullptr;
};

// A running discovery session. stop() (or the destructor) calls
// stop_discovery; later reports go to the sink's on_late_call, then nowhere.
class DiscoverySession {
 public:
  ~DiscoverySession();
  DiscoverySession(const DiscoverySession&) = delete;
  DiscoverySession& operator=(const DiscoverySession&) = delete;

  // Blocks until the handler's stop_discovery returns. Idempotent.
  void stop();
  bool stopped() const noexcept { return stopped_; }

 private:
  friend class HandlerInstance;
  DiscoverySession(const dowser_handler_api& api, dowser_handler* instance, uint64_t id,
                   uint64_t log_id);

  const dowser_handler_api& api_;
  dowser_handler* instance_;
  uint64_t id_;      // this session's dowser_session_host handle
  uint64_t log_id_;  // its handler instance's log sink
  dowser_session* session_ = nullptr;
  bool stopped_ = false;
  bool started_ = false;  // start_discovery succeeded
};

// The host function table dowserd and the test kit pass to handlers.
const dowser_host_api& host_api();
// The table a host of that minor passes (a test kit host posing as an older
// one, LoadPolicy::host_abi_minor): members of later minors are not there.
const dowser_host_api& host_api(uint16_t minor);

}  // namespace dowser::host
