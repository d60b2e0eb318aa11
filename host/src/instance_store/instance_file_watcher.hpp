// One inotify thread over a file store directory: reports which Instance
// files may have changed. Namespace directories created (or moved in) later
// are watched as they appear, and forgotten when moved out.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "instance_files.hpp"
#include "posix_io.hpp"

struct inotify_event;

namespace dowser::store::detail {

class InstanceFileWatcher {
 public:
  struct Handlers {
    // The file of this Instance was written or removed: re-read it.
    std::function<void(const std::string& namespace_name, const std::string& name)> changed;
    // Check the Instances known before for removal: those of one namespace
    // (its directory was moved out of the store), or all (nullopt: events
    // were lost, and every file present has been reported through changed).
    std::function<void(const std::optional<std::string>& namespace_name)> rescan;
  };

  // The watches are in place when the constructor returns, so no change
  // after it is missed; handlers run on the thread that start() launches.
  InstanceFileWatcher(InstanceFiles files, Handlers handlers);
  ~InstanceFileWatcher();
  InstanceFileWatcher(const InstanceFileWatcher&) = delete;
  InstanceFileWatcher& operator=(const InstanceFileWatcher&) = delete;

  void start();
  // Stops and joins the thread; must not be called from it. Idempotent.
  void stop();

 private:
  void run();
  void read_events();
  void handle(const ::inotify_event& event);
  void watch_namespace(const std::string& namespace_name, bool report_existing);
  void forget_namespace(const std::string& namespace_name);
  void unwatch_namespaces(const std::function<bool(const std::string& namespace_name)>& which);
  void recover_from_overflow();

  InstanceFiles files_;
  Handlers handlers_;
  UniqueFd inotify_;
  UniqueFd wakeup_;  // an eventfd that stop() writes
  int root_watch_ = -1;
  std::map<int, std::string> namespace_by_watch_;  // the thread's, once started
  std::thread thread_;
};

}  // namespace dowser::store::detail
