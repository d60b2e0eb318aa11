// watch() for the file store: one inotify thread per store, shared by all of
// its subscriptions, started by the first watch() and stopped when the last
// subscription goes or the store is destroyed.
#pragma once

#include <memory>
#include <mutex>

#include "instance_files.hpp"
#include "instance_store.hpp"
#include "watch_fanout.hpp"

namespace dowser::store::detail {

class FileWatchService : public std::enable_shared_from_this<FileWatchService> {
 public:
  explicit FileWatchService(InstanceFiles files) : files_(std::move(files)) {}
  std::unique_ptr<WatchSubscription> watch(WatchFanout::Callback callback);
  // The store is going: stop the thread. Subscriptions may outlive this.
  void shutdown();

 private:
  class Session;
  class Subscription;
  void release(const std::shared_ptr<Session>& session, uint64_t id);

  InstanceFiles files_;
  std::mutex mutex_;
  std::shared_ptr<Session> session_;  // the running thread, if any
};

}  // namespace dowser::store::detail
