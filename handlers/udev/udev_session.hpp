// One udev discovery session: enumerate once, then follow a udev monitor so
// that a device that appears, changes or goes is reported within
// milliseconds; a slow periodic rescan is the safety net for lost events.
#ifndef DOWSER_HANDLERS_UDEV_SESSION_HPP
#define DOWSER_HANDLERS_UDEV_SESSION_HPP

#include <dowser/handler.hpp>

#include "udev_details.hpp"

#include <atomic>
#include <thread>

namespace udev_handler {

class UdevSession final : public dowser::Session {
 public:
  // Returns at once (ABI rule T3): all libudev work runs on the session's thread.
  UdevSession(Settings settings, dowser::Reporter reporter);
  // Stops and joins the thread promptly, even in the middle of a scan.
  ~UdevSession() override;

 private:
  void run();

  Settings settings_;
  dowser::Reporter reporter_;
  std::atomic<bool> stopping_{false};
  int stop_fd_ = -1;    // an eventfd the destructor signals
  std::thread thread_;  // last: started once everything above is ready
};

}  // namespace udev_handler

#endif  // DOWSER_HANDLERS_UDEV_SESSION_HPP
