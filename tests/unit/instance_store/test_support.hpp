// Helpers shared by the instance store tests: sample Instances, a counter
// change for contention tests, a recorder that waits for watch events with a
// deadline, a temporary directory, and whole-file reads and writes.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "instance_store.hpp"
#include "temp_dir.hpp"

namespace dowser::store::testing {

constexpr std::chrono::seconds kEventDeadline{10};

// An Instance with every field set to something that is not its default.
inline Instance sample_instance(const std::string& name,
                                const std::string& namespace_name = "default") {
  Instance instance;
  instance.namespace_name = namespace_name;
  instance.name = name;
  instance.configuration_name = "akri-onvif";
  instance.cdi_name = "akri.sh/akri-onvif=" + name;
  instance.capacity = 3;
  instance.broker_properties = {{"ONVIF_DEVICE_IP_ADDRESS", "10.0.0.7"},
                                {"QUOTED", "a \"quoted\" \\ value"},
                                {"UNICODE", "caméra ✓"},
                                {"EMPTY", ""}};
  instance.shared = true;
  instance.nodes = {"node-b", "node-a"};
  instance.device_usage = {{name + "-0", "node-a"}, {name + "-1", "C:0:node-b"}, {name + "-2", ""}};
  return instance;
}

constexpr const char* kCountProperty = "COUNT";

// For update_with_retry in contention tests: they are about lost updates, not
// about how many races one call may lose, so the bound is generous.
constexpr int kContendedAttempts = 1000;

inline uint64_t count_of(const Instance& instance) {
  return std::stoull(instance.broker_properties.at(kCountProperty));
}

// A decide function for update_with_retry that adds one to the COUNT broker
// property and reports, through written, the value it asked to write.
inline auto increment_count(uint64_t& written) {
  return [&written](const Instance& current) -> std::optional<Instance> {
    Instance next = current;
    written = count_of(current) + 1;
    next.broker_properties[kCountProperty] = std::to_string(written);
    return next;
  };
}

// Collects watch events and lets a test wait for a condition on them.
class EventRecorder {
 public:
  using Predicate = std::function<bool(const std::vector<WatchEvent>&)>;

  std::function<void(const WatchEvent&)> callback() {
    return [this](const WatchEvent& event) { record(event); };
  }

  void record(const WatchEvent& event) {
    {
      const std::lock_guard lock(mutex_);
      events_.push_back(event);
    }
    changed_.notify_all();
  }

  // False if the predicate still does not hold at the deadline.
  bool wait_until(const Predicate& holds, std::chrono::milliseconds timeout = kEventDeadline) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return holds(events_); });
  }

  // Waits for an event about this Instance at this revision.
  bool wait_for(WatchEvent::Type type, const std::string& name, uint64_t revision) {
    return wait_until([&](const std::vector<WatchEvent>& events) {
      for (const WatchEvent& event : events) {
        if (event.type == type && event.object.instance.name == name &&
            event.object.revision == revision) {
          return true;
        }
      }
      return false;
    });
  }

  std::vector<WatchEvent> events() const {
    const std::lock_guard lock(mutex_);
    return events_;
  }

  std::vector<WatchEvent> events_for(const std::string& name) const {
    std::vector<WatchEvent> selected;
    for (const WatchEvent& event : events()) {
      if (event.object.instance.name == name) selected.push_back(event);
    }
    return selected;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<WatchEvent> events_;
};

// A fresh directory, removed at the end. On disk it is under the test
// temporary directory. In memory it is under /dev/shm (tmpfs) when there is
// one: fsync is free there, for tests about compare-and-swap rather than
// about the disk, which would otherwise spend most of their time in fsync.
class TemporaryDirectory : public dowser::test::TempDir {
 public:
  enum class Medium { disk, memory };

  explicit TemporaryDirectory(Medium medium = Medium::disk)
      : TempDir("instance_store", parent_for(medium)) {}

 private:
  static std::filesystem::path parent_for(Medium medium) {
    constexpr const char* kShared = "/dev/shm";
    if (medium == Medium::memory && ::access(kShared, W_OK | X_OK) == 0) return kShared;
    return ::testing::TempDir();
  }
};

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// Whether fd is open on a store's journal: for the tests that wrap a C library
// call in their executable to see what the store asks of the journal.
inline bool is_journal_fd(int fd) {
  std::error_code error;
  auto target = std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd), error);
  return !error && target.filename() == ".journal";
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ostringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

}  // namespace dowser::store::testing
