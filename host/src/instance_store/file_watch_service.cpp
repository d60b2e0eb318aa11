#include "file_watch_service.hpp"

#include <spdlog/spdlog.h>

#include <utility>

#include "change_filter.hpp"
#include "instance_file_watcher.hpp"
#include "own_writes.hpp"
#include "revision_counter.hpp"

namespace dowser::store::detail {

// One run of the inotify thread and the subscribers it delivers to.
class FileWatchService::Session {
 public:
  Session(const InstanceFiles& files, std::atomic<uint64_t>& files_read, OwnWrites& own_writes)
      : files_(files),
        files_read_(files_read),
        own_writes_(own_writes),
        watcher_(files_, {[this](const std::string& namespace_name, const std::string& name) {
                            changed(namespace_name, name);
                          },
                          [this](const std::optional<std::string>& namespace_name) {
                            check_known_for_removal(namespace_name);
                          }}) {
    // The watches are in place, so a change from here on is either in this
    // baseline or reported later; the filter drops what is reported twice.
    for (const StoredInstance& stored : files_.read_all_settled()) filter_.remember(stored);
    watcher_.start();
  }

  WatchFanout& fanout() { return fanout_; }
  void stop() { watcher_.stop(); }

 private:
  void changed(const std::string& namespace_name, const std::string& name) {
    std::optional<StoredInstance> current;
    try {
      current = own_write_still_current(namespace_name, name);
      if (!current) {
        files_read_.fetch_add(1, std::memory_order_relaxed);
        current = files_.read_settled(namespace_name, name);
      }
    } catch (const StoreError& error) {
      spdlog::warn("instance store: watch skips an unreadable Instance file: {}", error.what());
      return;
    }
    const std::optional<WatchEvent> event =
        current ? filter_.present(*current) : filter_.absent(namespace_name, name);
    if (event) fanout_.deliver(*event);
  }

  // The file's identity first, then the counter: a write by anyone else
  // takes its revision before it touches the file. Neither is looked at for
  // a file this store did not write (others' writes, hand edits).
  std::optional<StoredInstance> own_write_still_current(const std::string& namespace_name,
                                                        const std::string& name) {
    if (!own_writes_.has({namespace_name, name})) return std::nullopt;
    const std::optional<FileIdentity> on_disk =
        identity_of(files_.instance_file(namespace_name, name));
    const std::optional<std::string> text = own_writes_.take_if_current(
        {namespace_name, name}, on_disk, last_revision_unlocked(files_));
    if (!text) return std::nullopt;
    return files_.parse(namespace_name, name, *text);
  }

  // Those of one namespace, or all (nullopt).
  void check_known_for_removal(const std::optional<std::string>& only) {
    for (const auto& [namespace_name, name] : filter_.present_keys())
      if (!only || namespace_name == *only) changed(namespace_name, name);
  }

  InstanceFiles files_;
  std::atomic<uint64_t>& files_read_;
  OwnWrites& own_writes_;
  ChangeFilter filter_;  // the thread's, once started
  WatchFanout fanout_;
  InstanceFileWatcher watcher_;  // last: its thread uses the members above
};

class FileWatchService::Subscription final : public WatchSubscription {
 public:
  Subscription(std::shared_ptr<FileWatchService> service, std::shared_ptr<Session> session,
               uint64_t id)
      : service_(std::move(service)), session_(std::move(session)), id_(id) {}
  ~Subscription() override { service_->release(session_, id_); }
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

 private:
  std::shared_ptr<FileWatchService> service_;
  std::shared_ptr<Session> session_;
  uint64_t id_;
};

std::unique_ptr<WatchSubscription> FileWatchService::watch(WatchFanout::Callback callback) {
  const std::lock_guard lock(mutex_);
  if (!session_) {
    own_writes_.clear();  // a write may have slipped in as the last session stopped
    session_ = std::make_shared<Session>(files_, files_read_, own_writes_);
    recording_ = true;
  }
  const uint64_t id = session_->fanout().add(std::move(callback));
  return std::make_unique<Subscription>(shared_from_this(), session_, id);
}

void FileWatchService::shutdown() {
  std::shared_ptr<Session> session;
  {
    const std::lock_guard lock(mutex_);
    session = std::exchange(session_, nullptr);
    stop_recording();
  }
  if (session) session->stop();
}

void FileWatchService::handed_out(uint64_t revision) {
  if (recording_) own_writes_.handed_out(revision);
}

void FileWatchService::wrote(const std::string& namespace_name, const std::string& name,
                             uint64_t revision, std::string text, const FileIdentity& identity) {
  // Without a watch thread nobody would use the record up.
  if (recording_) own_writes_.wrote({namespace_name, name}, revision, std::move(text), identity);
}

void FileWatchService::removed(const std::string& namespace_name, const std::string& name) {
  if (recording_) own_writes_.removed({namespace_name, name});
}

void FileWatchService::stop_recording() {
  recording_ = false;
  own_writes_.clear();
}

void FileWatchService::release(const std::shared_ptr<Session>& session, uint64_t id) {
  session->fanout().remove(id);
  // A thread cannot join itself: when the last subscription goes from inside
  // a callback, the thread idles until the next watch() reuses it or the
  // store is destroyed.
  if (session->fanout().delivering_on_this_thread()) return;
  std::shared_ptr<Session> finished;
  {
    const std::lock_guard lock(mutex_);
    if (session_ == session && session->fanout().empty()) {
      finished = std::exchange(session_, nullptr);
      stop_recording();
    }
  }
  if (finished) finished->stop();
}

}  // namespace dowser::store::detail
