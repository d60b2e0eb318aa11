// watch() for the file store: one inotify thread per store, shared by all of
// its subscriptions, started by the first watch() and stopped when the last
// subscription goes or the store is destroyed. The thread reads a changed
// file under the store's shared lock, except for the store's own writes,
// which it reports from memory when it can (see own_writes.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "instance_files.hpp"
#include "instance_store.hpp"
#include "own_writes.hpp"
#include "posix_io.hpp"
#include "watch_fanout.hpp"

namespace dowser::store::detail {

class FileWatchService : public std::enable_shared_from_this<FileWatchService> {
 public:
  explicit FileWatchService(InstanceFiles files) : files_(std::move(files)) {}
  std::unique_ptr<WatchSubscription> watch(WatchFanout::Callback callback);
  // The store is going: stop the thread. Subscriptions may outlive this.
  void shutdown();

  // The store took a revision, wrote or removed an Instance file; call with
  // the store lock held (see OwnWrites).
  void handed_out(uint64_t revision);
  void wrote(const std::string& namespace_name, const std::string& name, uint64_t revision,
             std::string text, const FileIdentity& identity);
  void removed(const std::string& namespace_name, const std::string& name);
  // Whether a watch thread would use what wrote() records (else the writer
  // need not find out the file's identity).
  bool recording() const { return recording_; }
  // How many Instance files the watch thread has read for events so far.
  uint64_t files_read() const { return files_read_.load(std::memory_order_relaxed); }

 private:
  class Session;
  class Subscription;
  void release(const std::shared_ptr<Session>& session, uint64_t id);

  void stop_recording();

  InstanceFiles files_;
  std::atomic<uint64_t> files_read_{0};
  // Not under mutex_: writers hold the store lock, and starting a session
  // takes it (shared) under mutex_.
  OwnWrites own_writes_;
  std::atomic<bool> recording_{false};  // while a thread would use records up
  std::mutex mutex_;
  std::shared_ptr<Session> session_;  // the running thread, if any
};

}  // namespace dowser::store::detail
