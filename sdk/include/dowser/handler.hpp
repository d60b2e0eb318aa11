// dowser C++ handler SDK: header-only, C++17, on top of the C ABI in handler.h.
//
// A handler is a class derived from dowser::Handler; a discovery session is an
// object derived from dowser::Session whose destructor stops it; a
// dowser::Reporter is a cheap, copyable, thread-safe handle for reporting.
// One macro, DOWSER_HANDLER, defines the only exported symbol:
//
//   class EchoHandler final : public dowser::Handler {
//    public:
//     std::unique_ptr<dowser::Session> start(const dowser::DiscoverRequest& request,
//                                            dowser::Reporter reporter) override;
//   };
//   DOWSER_HANDLER(EchoHandler, "echo", "1.0.0", 0)
//
// Exceptions thrown by handler code never cross the boundary: the trampolines
// turn dowser::Error into its status and anything else into
// DOWSER_ERR_GENERIC, with what() as the message.
//
// The dowser::abi namespace converts between these owning types and the C
// views; the host and the test kit use the same conversions.
#ifndef DOWSER_HANDLER_HPP
#define DOWSER_HANDLER_HPP

#include <dowser/handler.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__GNUC__)
#define DOWSER_EXPORT __attribute__((visibility("default")))
#else
#define DOWSER_EXPORT
#endif

namespace dowser {

// Keys with optional values, ordered so that equal maps compare equal.
using Properties = std::map<std::string, std::optional<std::string>>;

struct Mount {
  std::string container_path;
  std::string host_path;
  bool read_only = false;
  friend bool operator==(const Mount& a, const Mount& b) {
    return a.container_path == b.container_path && a.host_path == b.host_path &&
           a.read_only == b.read_only;
  }
};

struct DeviceNode {
  std::string container_path;
  std::string host_path;
  std::string permissions = "rwm";
  friend bool operator==(const DeviceNode& a, const DeviceNode& b) {
    return a.container_path == b.container_path && a.host_path == b.host_path &&
           a.permissions == b.permissions;
  }
};

enum class Sharing : int32_t {
  handler_default = DOWSER_SHARING_HANDLER_DEFAULT,
  local = DOWSER_SHARING_LOCAL,
  shared = DOWSER_SHARING_SHARED,
};

struct Device {
  std::string id;
  Properties properties;
  std::vector<Mount> mounts;
  std::vector<DeviceNode> device_nodes;
  Sharing sharing = Sharing::handler_default;
  friend bool operator==(const Device& a, const Device& b) {
    return a.id == b.id && a.properties == b.properties && a.mounts == b.mounts &&
           a.device_nodes == b.device_nodes && a.sharing == b.sharing;
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
};

// A discovery request, copied out of the C views: safe to keep.
struct DiscoverRequest {
  std::string discovery_details;
  Properties properties;

  // The value of a property, or fallback when it is absent or has no value.
  std::string property_or(const std::string& key, const std::string& fallback) const {
    auto it = properties.find(key);
    return it != properties.end() && it->second ? *it->second : fallback;
  }
};

// An error with a status code; throw it from handler code.
class Error : public std::runtime_error {
 public:
  Error(dowser_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  dowser_status status() const noexcept { return status_; }

 private:
  dowser_status status_;
};

// Thrown for bad discovery details or properties.
class InvalidArgument : public Error {
 public:
  explicit InvalidArgument(const std::string& message)
      : Error(DOWSER_ERR_INVALID_ARGUMENT, message) {}
};

enum class LogLevel : int32_t {
  trace = DOWSER_LOG_TRACE,
  debug = DOWSER_LOG_DEBUG,
  info = DOWSER_LOG_INFO,
  warn = DOWSER_LOG_WARN,
  error = DOWSER_LOG_ERROR,
};

// Text helpers handlers need for discovery properties ("True ", " rwm").
inline std::string trimmed(std::string_view text) {
  auto is_space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return std::string(text);
}

inline std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// The length of the well-formed UTF-8 character at text[at] (Unicode table
// 3-7: no overlong forms, no surrogates, nothing past U+10FFFF); 0 if none
// starts there. What the host checks strings with (rules D1-D3).
inline size_t utf8_length_at(std::string_view text, size_t at) noexcept {
  auto byte = [&](size_t i) -> unsigned {
    return i < text.size() ? static_cast<unsigned char>(text[i]) : 0U;
  };
  const unsigned lead = byte(at);
  if (lead < 0x80) return at < text.size() ? 1 : 0;
  size_t length = 0;
  unsigned low = 0x80;
  unsigned high = 0xBF;  // of the second byte; later ones are 0x80..0xBF
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    low = lead == 0xE0 ? 0xA0 : low;
    high = lead == 0xED ? 0x9F : high;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    low = lead == 0xF0 ? 0x90 : low;
    high = lead == 0xF4 ? 0x8F : high;
  } else {
    return 0;
  }
  if (at + length > text.size() || byte(at + 1) < low || byte(at + 1) > high) return 0;
  for (size_t i = 2; i < length; ++i)
    if (byte(at + i) < 0x80 || byte(at + i) > 0xBF) return 0;
  return length;
}

// Text a device gave (a name, a model, a serial number) as a property value
// the host takes (rule D2): bytes that are not UTF-8 become U+FFFD, NUL bytes
// go, and it is cut, before a character, to DOWSER_MAX_PROPERTY_VALUE_LEN
// bytes. The host leaves out a whole device for one bad value.
inline std::string property_value(std::string_view text) {
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string value;
  for (size_t at = 0; at < text.size();) {
    const size_t length = utf8_length_at(text, at);
    std::string_view piece = length == 0 ? kReplacement : text.substr(at, length);
    if (piece == std::string_view("\0", 1)) piece = {};
    if (value.size() + piece.size() > DOWSER_MAX_PROPERTY_VALUE_LEN) break;
    value.append(piece);
    at += length == 0 ? 1 : length;
  }
  return value;
}

namespace abi {

inline dowser_str view(std::string_view s) noexcept { return dowser_str{s.data(), s.size()}; }

inline std::string to_string(dowser_str s) {
  return s.len == 0 || s.data == nullptr ? std::string() : std::string(s.data, s.len);
}

// Reads a record by its struct_size into a zeroed copy (rule V3).
template <typename Record>
Record read_record(const void* record) noexcept {
  static_assert(std::is_trivially_copyable_v<Record>);
  Record copy;
  std::memset(&copy, 0, sizeof copy);
  uint32_t size = 0;
  std::memcpy(&size, record, sizeof size);
  std::memcpy(&copy, record, std::min<size_t>(size, sizeof copy));
  copy.struct_size = sizeof copy;
  return copy;
}

// Calls visit(record) for each element of an array read with the stride of
// its first element's struct_size (rule V3). Throws on an impossible stride.
template <typename Record, typename Visit>
void for_each_record(const Record* records, size_t count, Visit&& visit) {
  if (count == 0) return;
  if (records == nullptr)
    throw std::invalid_argument("array pointer is NULL but its length is not 0");
  uint32_t stride = 0;
  std::memcpy(&stride, records, sizeof stride);
  if (stride < sizeof(uint32_t))
    throw std::invalid_argument("array element has struct_size " + std::to_string(stride));
  const auto* bytes = reinterpret_cast<const unsigned char*>(records);
  for (size_t i = 0; i < count; ++i) visit(read_record<Record>(bytes + i * stride));
}

inline Properties read_properties(const dowser_property* properties, size_t count) {
  Properties result;
  for_each_record(properties, count, [&](const dowser_property& p) {
    result[to_string(p.key)] =
        p.has_value ? std::optional<std::string>(to_string(p.value)) : std::nullopt;
  });
  return result;
}

inline Device read_device(const dowser_device& raw) {
  Device device;
  device.id = to_string(raw.id);
  device.properties = read_properties(raw.properties, raw.properties_len);
  for_each_record(raw.mounts, raw.mounts_len, [&](const dowser_mount& m) {
    device.mounts.push_back(
        {to_string(m.container_path), to_string(m.host_path), m.read_only != 0});
  });
  for_each_record(raw.device_nodes, raw.device_nodes_len, [&](const dowser_device_node& n) {
    device.device_nodes.push_back(
        {to_string(n.container_path), to_string(n.host_path), to_string(n.permissions)});
  });
  switch (raw.sharing) {
    case DOWSER_SHARING_HANDLER_DEFAULT:
    case DOWSER_SHARING_LOCAL:
    case DOWSER_SHARING_SHARED:
      device.sharing = static_cast<Sharing>(raw.sharing);
      break;
    default:
      throw std::invalid_argument("device '" + device.id + "' has unknown sharing value " +
                                  std::to_string(raw.sharing));
  }
  return device;
}

// Deep-copies a reported snapshot (rule O2). Throws std::invalid_argument on
// malformed input.
inline std::vector<Device> read_devices(const dowser_device* devices, size_t count) {
  std::vector<Device> result;
  result.reserve(count);
  for_each_record(devices, count,
                  [&](const dowser_device& d) { result.push_back(read_device(d)); });
  return result;
}

inline DiscoverRequest read_request(const dowser_discover_request* request) {
  if (request == nullptr) throw std::invalid_argument("discover request is NULL");
  auto raw = read_record<dowser_discover_request>(request);
  return {to_string(raw.discovery_details), read_properties(raw.properties, raw.properties_len)};
}

// C views of a property map; valid while this object and the map live.
class PropertyViews {
 public:
  // Views borrow the strings of their source, so a temporary source would dangle.
  explicit PropertyViews(Properties&&) = delete;
  explicit PropertyViews(const Properties& properties) {
    views_.reserve(properties.size());
    for (const auto& [key, value] : properties) {
      dowser_property p{};
      p.struct_size = sizeof p;
      p.key = view(key);
      p.value = value ? view(*value) : dowser_str{nullptr, 0};
      p.has_value = value ? 1 : 0;
      views_.push_back(p);
    }
  }
  const dowser_property* data() const noexcept { return views_.empty() ? nullptr : views_.data(); }
  size_t size() const noexcept { return views_.size(); }

 private:
  std::vector<dowser_property> views_;
};

// C views of a snapshot; valid while this object and the devices live.
class DeviceViews {
 public:
  // Views borrow the strings of their source, so a temporary source would dangle.
  explicit DeviceViews(std::vector<Device>&&) = delete;
  explicit DeviceViews(const std::vector<Device>& devices) {
    parts_.reserve(devices.size());
    views_.reserve(devices.size());
    for (const auto& device : devices) views_.push_back(make_view(device));
  }
  const dowser_device* data() const noexcept { return views_.empty() ? nullptr : views_.data(); }
  size_t size() const noexcept { return views_.size(); }

 private:
  struct Parts {
    explicit Parts(const Device& d) : properties(d.properties) {}
    PropertyViews properties;
    std::vector<dowser_mount> mounts;
    std::vector<dowser_device_node> nodes;
  };

  dowser_device make_view(const Device& device) {
    Parts& parts = parts_.emplace_back(device);
    for (const auto& m : device.mounts) {
      parts.mounts.push_back(
          {sizeof(dowser_mount), view(m.container_path), view(m.host_path), m.read_only ? 1u : 0u});
    }
    for (const auto& n : device.device_nodes) {
      parts.nodes.push_back({sizeof(dowser_device_node), view(n.container_path), view(n.host_path),
                             view(n.permissions)});
    }
    dowser_device d{};
    d.struct_size = sizeof d;
    d.id = view(device.id);
    d.properties = parts.properties.data();
    d.properties_len = parts.properties.size();
    d.mounts = parts.mounts.empty() ? nullptr : parts.mounts.data();
    d.mounts_len = parts.mounts.size();
    d.device_nodes = parts.nodes.empty() ? nullptr : parts.nodes.data();
    d.device_nodes_len = parts.nodes.size();
    d.sharing = static_cast<int32_t>(device.sharing);
    return d;
  }

  std::vector<Parts> parts_;  // reserved up front: views point into it
  std::vector<dowser_device> views_;
};

// C view of a request; valid while this object and the request live.
class RequestView {
 public:
  explicit RequestView(DiscoverRequest&&) = delete;  // would dangle, as for DeviceViews
  explicit RequestView(const DiscoverRequest& request) : properties_(request.properties) {
    raw_.struct_size = sizeof raw_;
    raw_.discovery_details = view(request.discovery_details);
    raw_.properties = properties_.data();
    raw_.properties_len = properties_.size();
  }
  RequestView(const RequestView&) = delete;
  RequestView& operator=(const RequestView&) = delete;
  const dowser_discover_request* get() const noexcept { return &raw_; }

 private:
  PropertyViews properties_;
  dowser_discover_request raw_{};
};

// Writes a NUL-terminated, truncated message into a caller's buffer (rule O5),
// cut before a UTF-8 character it would split.
inline void write_error(char* err, size_t err_cap, std::string_view message) noexcept {
  if (err == nullptr || err_cap == 0) return;
  size_t n = std::min(message.size(), err_cap - 1);
  auto continues = [&](size_t at) {
    return (static_cast<unsigned char>(message[at]) & 0xC0) == 0x80;
  };
  if (n < message.size())
    while (n > 0 && continues(n)) --n;  // message[n] would be a character's later byte
  std::memcpy(err, message.data(), n);
  err[n] = '\0';
}

}  // namespace abi

// trace() ... error() for a class with log(LogLevel, std::string_view).
template <typename Logger>
class LogLevels {
 public:
  void trace(std::string_view message) const noexcept { logger().log(LogLevel::trace, message); }
  void debug(std::string_view message) const noexcept { logger().log(LogLevel::debug, message); }
  void info(std::string_view message) const noexcept { logger().log(LogLevel::info, message); }
  void warn(std::string_view message) const noexcept { logger().log(LogLevel::warn, message); }
  void error(std::string_view message) const noexcept { logger().log(LogLevel::error, message); }

 private:
  const Logger& logger() const noexcept { return static_cast<const Logger&>(*this); }
};

// The host's services for one handler instance. Cheap to copy.
class Host : public LogLevels<Host> {
 public:
  Host() = default;
  Host(const dowser_host_api* api, dowser_host_ctx* ctx) : api_(api), ctx_(ctx) {}
  // A line of the handler's: for one session's, see Reporter::log.
  void log(LogLevel level, std::string_view message) const noexcept {
    if (api_ != nullptr) api_->log(ctx_, static_cast<int32_t>(level), abi::view(message));
  }

 private:
  const dowser_host_api* api_ = nullptr;
  dowser_host_ctx* ctx_ = nullptr;
};

// What the SDK logs (once per session, as a warning) when a report comes
// after the session stopped; dowser-handler-check looks for it.
inline constexpr std::string_view kReportAfterStopWarning =
    "a report came after its session stopped (rule T4) and was dropped: the session's destructor "
    "must join every thread that reports";
// The same for a line logged through the session's Reporter (once per
// session); the line itself is logged as the handler's.
inline constexpr std::string_view kLogAfterStopWarning =
    "a line was logged through a session's Reporter after the session stopped (rule T4); it is "
    "logged as the handler's: the session's destructor must join every thread that logs";

// Reports snapshots for one session, and logs lines about it. Copyable and
// thread-safe. After the session has stopped, reports are dropped here and
// never reach the host; the first one is logged (kReportAfterStopWarning),
// and so is the first line logged (kLogAfterStopWarning). A
// default-constructed Reporter drops everything.
class Reporter : public LogLevels<Reporter> {
 public:
  Reporter() = default;
  Reporter(const dowser_host_api* api, Host host, dowser_session_host* session)
      : state_(std::make_shared<State>(api, host, session)) {}

  // Reports the full list of devices seen now. Returns false when the host
  // did not take it: the session is stopping (stop producing), or the
  // snapshot was malformed (duplicate ids; the host logs why).
  bool report(const std::vector<Device>& devices) const {
    if (!state_) return false;
    abi::DeviceViews views(devices);
    std::shared_lock lock(state_->mutex);
    if (state_->session == nullptr)
      return told_late(state_->told_late_report, kReportAfterStopWarning);
    return state_->api->report_devices(state_->session, views.data(), views.size()) == DOWSER_OK;
  }

  // Ends the session with an error; the host will stop it.
  void fail(dowser_status code, std::string_view message) const noexcept {
    if (!state_) return;
    std::shared_lock lock(state_->mutex);
    if (state_->session == nullptr) {
      told_late(state_->told_late_report, kReportAfterStopWarning);
      return;
    }
    state_->api->report_error(state_->session, code, abi::view(message));
  }

  // A line about this session: the host names the session (dowserd, its
  // Configuration). After the session stopped (see kLogAfterStopWarning), or
  // with a host table without log_session, a line of the handler's.
  void log(LogLevel level, std::string_view message) const noexcept {
    if (!state_) return;
    std::shared_lock lock(state_->mutex);
    if (state_->session == nullptr) told_late(state_->told_late_log, kLogAfterStopWarning);
    if (state_->session == nullptr || !state_->has_log_session) {
      state_->host.log(level, message);
      return;
    }
    state_->api->log_session(state_->session, static_cast<int32_t>(level), abi::view(message));
  }

  // The host's log, for lines about the handler rather than this session; a
  // default-constructed Reporter's logs nowhere.
  const Host& host() const noexcept {
    static const Host nowhere;
    return state_ ? state_->host : nowhere;
  }

  // Used by the SDK once the session is stopped: drops all later reports.
  void detach() const noexcept {
    if (!state_) return;
    std::unique_lock lock(state_->mutex);
    state_->session = nullptr;
  }

 private:
  struct State {
    State(const dowser_host_api* a, Host h, dowser_session_host* s)
        : api(a), host(h), session(s), has_log_session(offers_log_session(*a)) {}
    std::shared_mutex mutex;
    const dowser_host_api* api;
    Host host;
    dowser_session_host* session;  // null once detached
    const bool has_log_session;
    std::atomic<bool> told_late_report{false};  // kReportAfterStopWarning was logged
    std::atomic<bool> told_late_log{false};     // kLogAfterStopWarning was logged
  };

  // Rules V3 and V4: a host offers log_session from minor 1, in a table
  // long enough to hold it (one made by hand for a test may lack it).
  static bool offers_log_session(const dowser_host_api& api) noexcept {
    return api.abi_minor >= 1 &&
           api.struct_size >= offsetof(dowser_host_api, log_session) + sizeof api.log_session &&
           api.log_session != nullptr;
  }

  // A call after detach() breaks T4: said once per kind, so the author learns
  // of it. Returns false (the report was not taken).
  bool told_late(std::atomic<bool>& told, std::string_view warning) const noexcept {
    if (!told.exchange(true)) state_->host.warn(warning);
    return false;
  }

  std::shared_ptr<State> state_;
};

// A running discovery session. The destructor must stop it: join every
// thread that could still use its Reporter.
class Session {
 public:
  Session() = default;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  virtual ~Session() = default;
};

// What a handler's constructor may take.
struct InitContext {
  Host host;
  std::string config;
};

// A handler: one instance per host (or per test). Control calls are serial.
class Handler {
 public:
  Handler() = default;
  Handler(const Handler&) = delete;
  Handler& operator=(const Handler&) = delete;
  virtual ~Handler() = default;

  // Checks a request without starting; throw InvalidArgument if it is bad.
  // Override it to offer validate_request; start should then refuse the
  // same requests.
  virtual void validate(const DiscoverRequest& /*request*/) {}

  // Starts discovery; must return promptly (T3). Throw to refuse.
  virtual std::unique_ptr<Session> start(const DiscoverRequest& request, Reporter reporter) = 0;
};

// Re-runs a scan every interval (or at once on wake()) and reports only when
// the result differs from the last report. The destructor stops the thread.
// A scan that throws is logged, and the last report stands.
class PollingSession : public Session {
 public:
  using Scan = std::function<std::vector<Device>()>;

  PollingSession(Reporter reporter, std::chrono::milliseconds interval, Scan scan)
      : reporter_(std::move(reporter)), interval_(interval), scan_(std::move(scan)) {
    thread_ = std::thread([this] { run(); });
  }
  ~PollingSession() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wakeup_.notify_all();
    thread_.join();
  }

  // Asks for a scan now (e.g. after a change notification).
  void wake() {
    {
      std::lock_guard lock(mutex_);
      woken_ = true;
    }
    wakeup_.notify_all();
  }

 private:
  void run() {
    std::optional<std::vector<Device>> last;
    std::optional<std::string> last_error;
    for (;;) {
      scan_once(last, last_error);
      std::unique_lock lock(mutex_);
      wakeup_.wait_for(lock, interval_, [this] { return stopping_ || woken_; });
      if (stopping_) return;
      woken_ = false;
    }
  }

  void scan_once(std::optional<std::vector<Device>>& last, std::optional<std::string>& last_error) {
    try {
      auto devices = scan_();
      last_error.reset();
      if (last && *last == devices) return;
      if (reporter_.report(devices)) last = std::move(devices);
    } catch (const std::exception& e) {
      note_scan_failure(e.what(), last_error);
    } catch (...) {  // not a std::exception: still only this scan fails
      note_scan_failure("an exception that is not a std::exception", last_error);
    }
  }

  // Logs once per distinct error, not once per interval.
  void note_scan_failure(const std::string& why, std::optional<std::string>& last_error) {
    if (last_error != why) reporter_.warn("scan failed: " + why);
    last_error = why;
  }

  Reporter reporter_;
  std::chrono::milliseconds interval_;
  Scan scan_;
  std::mutex mutex_;
  std::condition_variable wakeup_;
  bool stopping_ = false;
  bool woken_ = false;
  std::thread thread_;  // last: started once everything above is ready
};

namespace detail {

struct HandlerBox {
  std::unique_ptr<Handler> handler;
  const dowser_host_api* host_api = nullptr;
  Host host;
};

struct SessionBox {
  std::unique_ptr<Session> session;
  Reporter reporter;
};

// Runs body; turns any exception into a status and a message (T6).
template <typename Body>
dowser_status guarded(char* err, size_t err_cap, Body&& body) noexcept {
  try {
    body();
    return DOWSER_OK;
  } catch (const Error& e) {
    abi::write_error(err, err_cap, e.what());
    return e.status() == DOWSER_OK ? DOWSER_ERR_GENERIC : e.status();
  } catch (const std::bad_alloc&) {
    abi::write_error(err, err_cap, "out of memory");
    return DOWSER_ERR_NO_MEMORY;
  } catch (const std::exception& e) {
    abi::write_error(err, err_cap, e.what());
    return DOWSER_ERR_GENERIC;
  } catch (...) {
    abi::write_error(err, err_cap, "unknown exception");
    return DOWSER_ERR_GENERIC;
  }
}

template <typename T>
std::unique_ptr<Handler> construct(const InitContext& context) {
  static_assert(std::is_base_of_v<Handler, T>, "a handler class must derive from dowser::Handler");
  if constexpr (std::is_constructible_v<T, const InitContext&>) {
    return std::make_unique<T>(context);
  } else {
    static_assert(std::is_default_constructible_v<T>,
                  "a handler needs a constructor taking () or (const dowser::InitContext&)");
    return std::make_unique<T>();
  }
}

template <typename T>
dowser_status init(const dowser_host_api* host_api, dowser_host_ctx* ctx, dowser_str config,
                   dowser_handler** out, char* err, size_t err_cap) noexcept {
  return guarded(err, err_cap, [&] {
    if (host_api == nullptr || out == nullptr) throw InvalidArgument("init: NULL argument");
    auto box = std::make_unique<HandlerBox>();
    box->host_api = host_api;
    box->host = Host(host_api, ctx);
    box->handler = construct<T>(InitContext{box->host, abi::to_string(config)});
    *out = reinterpret_cast<dowser_handler*>(box.release());
  });
}

// Destructors are noexcept: one that throws ends the process (std::terminate)
// before anything here could catch it, so there is nothing to guard.
inline void destroy(dowser_handler* handler) noexcept {
  delete reinterpret_cast<HandlerBox*>(handler);
}

inline dowser_status start(dowser_handler* handler, const dowser_discover_request* request,
                           dowser_session_host* session, dowser_session** out, char* err,
                           size_t err_cap) noexcept {
  return guarded(err, err_cap, [&] {
    if (handler == nullptr || session == nullptr || out == nullptr)
      throw InvalidArgument("start_discovery: NULL argument");
    auto* box = reinterpret_cast<HandlerBox*>(handler);
    auto session_box = std::make_unique<SessionBox>();
    session_box->reporter = Reporter(box->host_api, box->host, session);
    try {
      session_box->session = box->handler->start(abi::read_request(request), session_box->reporter);
      if (!session_box->session) throw Error(DOWSER_ERR_GENERIC, "start returned no session");
    } catch (...) {
      // No session to stop: a thread start left behind reports into nothing,
      // and the author is told, as after a stop.
      session_box->reporter.detach();
      throw;
    }
    *out = reinterpret_cast<dowser_session*>(session_box.release());
  });
}

inline void stop(dowser_handler* /*handler*/, dowser_session* session) noexcept {
  auto* box = reinterpret_cast<SessionBox*>(session);
  if (box == nullptr) return;
  box->session.reset();  // joins the session's threads (a destructor: cannot throw)
  box->reporter.detach();
  delete box;
}

inline dowser_status validate(dowser_handler* handler, const dowser_discover_request* request,
                              char* err, size_t err_cap) noexcept {
  return guarded(err, err_cap, [&] {
    if (handler == nullptr) throw InvalidArgument("validate_request: NULL handler");
    reinterpret_cast<HandlerBox*>(handler)->handler->validate(abi::read_request(request));
  });
}

// The class that declares the validate(const DiscoverRequest&) that T's name
// finds; deduced from the overload set, so other overloads do not matter.
template <typename C>
C* declaring_class(void (C::*)(const DiscoverRequest&));
template <typename C>
C* declaring_class_of_const(void (C::*)(const DiscoverRequest&) const);

// Whether that validate can be found; not when it is private, or when T's
// validates hide Handler's (overloads only, or a const one).
template <typename T, typename = void>
struct validate_findable : std::false_type {};
template <typename T>
struct validate_findable<T, std::void_t<decltype(declaring_class(&T::validate))>> : std::true_type {
};
// Whether T has a const validate(const DiscoverRequest&): it overrides
// nothing, so the checks in it would never run.
template <typename T, typename = void>
struct const_validate : std::false_type {};
template <typename T>
struct const_validate<T, std::void_t<decltype(declaring_class_of_const(&T::validate))>>
    : std::true_type {};

// Whether T overrides Handler::validate: then it checks requests, and the
// table offers validate_request. (A private override is not seen: the
// table then offers none, and start must refuse bad requests as always.)
template <typename T>
constexpr bool overrides_validate() {
  static_assert(!const_validate<T>::value || validate_findable<T>::value,
                "dowser: declare validate as `void validate(const dowser::DiscoverRequest&) "
                "override`, not const: a const validate overrides nothing and checks nothing");
  if constexpr (validate_findable<T>::value) {
    return !std::is_same_v<std::remove_pointer_t<decltype(declaring_class(&T::validate))>, Handler>;
  } else {
    return false;
  }
}

template <typename T>
dowser_handler_api make_api(const char* name, const char* version, uint32_t flags) {
  dowser_handler_api api{};
  api.struct_size = sizeof api;
  api.abi_major = DOWSER_ABI_VERSION_MAJOR;
  api.abi_minor = DOWSER_ABI_VERSION_MINOR;
  api.name = name;
  api.version = version;
  api.flags = flags;
  api.init = &init<T>;
  api.destroy = &destroy;
  api.start_discovery = &start;
  api.stop_discovery = &stop;
  // Offered only when the class checks requests: a handler that says it
  // validates must refuse bad details.
  if constexpr (overrides_validate<T>()) api.validate_request = &validate;
  return api;
}

inline const dowser_handler_api* negotiate(const dowser_handler_api* api, uint16_t host_major,
                                           uint16_t host_minor, char* err,
                                           size_t err_cap) noexcept {
  if (dowser_host_abi_supported(host_major, host_minor) != 0) {
    return api;
  }
  guarded(err, err_cap, [&] {
    throw Error(DOWSER_ERR_UNSUPPORTED,
                "handler needs ABI " + std::to_string(DOWSER_ABI_VERSION_MAJOR) + "." +
                    std::to_string(DOWSER_ABI_VERSION_MINOR) + ", host offers " +
                    std::to_string(host_major) + "." + std::to_string(host_minor));
  });
  return nullptr;
}

}  // namespace detail
}  // namespace dowser

// Defines the handler's only exported symbol for class Class.
#define DOWSER_HANDLER(Class, name, version, flags)                                                \
  extern "C" DOWSER_EXPORT const dowser_handler_api* dowser_get_handler_api(                       \
      uint16_t host_abi_major, uint16_t host_abi_minor, char* err, size_t err_cap) {               \
    static const dowser_handler_api api = ::dowser::detail::make_api<Class>(name, version, flags); \
    return ::dowser::detail::negotiate(&api, host_abi_major, host_abi_minor, err, err_cap);        \
  }

#endif  // DOWSER_HANDLER_HPP
