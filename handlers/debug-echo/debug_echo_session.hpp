// One debugEcho discovery session: a periodic scan of the availability file,
// sped up by inotify.
#ifndef DOWSER_HANDLERS_DEBUG_ECHO_SESSION_HPP
#define DOWSER_HANDLERS_DEBUG_ECHO_SESSION_HPP

#include <dowser/handler.hpp>

#include "availability_watcher.hpp"
#include "debug_echo_details.hpp"

namespace debug_echo {

class DebugEchoSession final : public dowser::Session {
 public:
  DebugEchoSession(const Settings& settings, const dowser::Reporter& reporter)
      : polling_(
            reporter, settings.poll_interval,
            [settings] { return make_devices(settings, is_online(settings.availability_file)); }),
        watcher_(settings.availability_file, reporter, [this] { polling_.wake(); }) {
    // A change between the first scan and the watch being set up is seen now.
    polling_.wake();
  }

  // Members go in reverse order: the watcher's thread, which calls wake(), is
  // joined before the polling thread.
  ~DebugEchoSession() override = default;

  bool watching() const noexcept { return watcher_.watching(); }

 private:
  dowser::PollingSession polling_;
  AvailabilityWatcher watcher_;
};

}  // namespace debug_echo

#endif  // DOWSER_HANDLERS_DEBUG_ECHO_SESSION_HPP
