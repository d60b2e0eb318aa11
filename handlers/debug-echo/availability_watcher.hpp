// Calls back within milliseconds when one file changes, using inotify on the
// file's directory (so creating, replacing and deleting the file are seen).
#ifndef DOWSER_HANDLERS_DEBUG_ECHO_AVAILABILITY_WATCHER_HPP
#define DOWSER_HANDLERS_DEBUG_ECHO_AVAILABILITY_WATCHER_HPP

#include <dowser/handler.hpp>

#include <functional>
#include <string>
#include <thread>

namespace debug_echo {

class AvailabilityWatcher {
 public:
  // Watches `file` and calls on_change from the watcher's own thread. When
  // inotify cannot be set up, logs a warning through `log` (the session's
  // Reporter) and never calls back.
  AvailabilityWatcher(const std::string& file, dowser::Reporter log,
                      std::function<void()> on_change);
  // Stops and joins the thread promptly; on_change is not called afterwards.
  ~AvailabilityWatcher();

  AvailabilityWatcher(const AvailabilityWatcher&) = delete;
  AvailabilityWatcher& operator=(const AvailabilityWatcher&) = delete;

  // True while the directory is being watched.
  bool watching() const noexcept { return thread_.joinable(); }

 private:
  bool open_watch(const std::string& file);
  void run();
  // Returns false when the watch has ended (directory gone) or failed.
  bool handle_events();
  void close_fds() noexcept;

  dowser::Reporter log_;  // lines about the session
  std::function<void()> on_change_;
  std::string directory_;
  std::string file_name_;
  int inotify_fd_ = -1;
  int stop_fd_ = -1;  // an eventfd the destructor signals
  std::thread thread_;
};

}  // namespace debug_echo

#endif  // DOWSER_HANDLERS_DEBUG_ECHO_AVAILABILITY_WATCHER_HPP
