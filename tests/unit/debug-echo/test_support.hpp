// Helpers for debugEcho tests: a host that records what it is told, and a
// temporary directory for availability files.
#ifndef DOWSER_TESTS_UNIT_DEBUG_ECHO_TEST_SUPPORT_HPP
#define DOWSER_TESTS_UNIT_DEBUG_ECHO_TEST_SUPPORT_HPP

#include <dowser/handler.hpp>
#include "temp_dir.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace debug_echo::testing {

class RecordingHost {
 public:
  using Snapshot = std::vector<dowser::Device>;

  RecordingHost() {
    api_.struct_size = sizeof api_;
    api_.abi_major = DOWSER_ABI_VERSION_MAJOR;
    api_.abi_minor = DOWSER_ABI_VERSION_MINOR;
    api_.log = &log;
    api_.report_devices = &report_devices;
    api_.report_error = &report_error;
    api_.log_session = &log_session;
  }
  RecordingHost(const RecordingHost&) = delete;
  RecordingHost& operator=(const RecordingHost&) = delete;

  const dowser_host_api* api() const { return &api_; }
  // This object is both the instance context and the one session handle.
  dowser_host_ctx* ctx() { return reinterpret_cast<dowser_host_ctx*>(this); }
  dowser_session_host* session() { return reinterpret_cast<dowser_session_host*>(this); }
  dowser::Reporter reporter() { return {&api_, dowser::Host(&api_, ctx()), session()}; }

  // Waits until the newest snapshot satisfies `accept`; false at the deadline.
  bool wait_for(const std::function<bool(const Snapshot&)>& accept,
                std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout,
                             [&] { return !snapshots_.empty() && accept(snapshots_.back()); });
  }

  // Waits until a log line contains `part`; false at the deadline.
  bool wait_for_log(const std::string& part,
                    std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] {
      for (const auto& line : logs_)
        if (line.find(part) != std::string::npos) return true;
      return false;
    });
  }

  size_t report_count() {
    std::lock_guard lock(mutex_);
    return snapshots_.size();
  }

 private:
  static RecordingHost& self(void* handle) { return *static_cast<RecordingHost*>(handle); }

  static void log(dowser_host_ctx* ctx, int32_t /*level*/, dowser_str message) {
    auto& host = self(ctx);
    std::lock_guard lock(host.mutex_);
    host.logs_.push_back(dowser::abi::to_string(message));
    host.changed_.notify_all();
  }

  // Recorded as "session: <line>", to tell it from a line of the handler's.
  static void log_session(dowser_session_host* session, int32_t /*level*/, dowser_str message) {
    auto& host = self(session);
    std::lock_guard lock(host.mutex_);
    host.logs_.push_back("session: " + dowser::abi::to_string(message));
    host.changed_.notify_all();
  }

  static dowser_status report_devices(dowser_session_host* session, const dowser_device* devices,
                                      size_t devices_len) {
    auto& host = self(session);
    auto snapshot = dowser::abi::read_devices(devices, devices_len);
    std::lock_guard lock(host.mutex_);
    host.snapshots_.push_back(std::move(snapshot));
    host.changed_.notify_all();
    return DOWSER_OK;
  }

  static dowser_status report_error(dowser_session_host* session, dowser_status /*code*/,
                                    dowser_str message) {
    auto& host = self(session);
    std::lock_guard lock(host.mutex_);
    host.logs_.push_back("error: " + dowser::abi::to_string(message));
    host.changed_.notify_all();
    return DOWSER_OK;
  }

  dowser_host_api api_{};
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Snapshot> snapshots_;
  std::vector<std::string> logs_;
};

using dowser::test::TempDir;

inline void write_file(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

// The ids of a snapshot, in order.
inline std::vector<std::string> ids(const RecordingHost::Snapshot& snapshot) {
  std::vector<std::string> result;
  for (const auto& device : snapshot) result.push_back(device.id);
  return result;
}

}  // namespace debug_echo::testing

#endif  // DOWSER_TESTS_UNIT_DEBUG_ECHO_TEST_SUPPORT_HPP
