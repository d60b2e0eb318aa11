#include "udev_session.hpp"

#include "udev_libudev.hpp"
#include "udev_report.hpp"
#include "udev_scan.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>

namespace udev_handler {
namespace {

using Clock = std::chrono::steady_clock;

// Large enough that a burst (a hub with many devices) does not overflow;
// raising it past net.core.rmem_max may fail without privileges, which is fine.
constexpr int kMonitorBufferBytes = 4 * 1024 * 1024;

std::optional<std::string> iommu_group_of(const std::string& devpath) {
  std::error_code error;
  auto target = std::filesystem::read_symlink("/sys" + devpath + "/iommu_group", error);
  if (error) return std::nullopt;
  return target.filename().string();
}

// The thread of one session: owns every libudev object it uses.
class EventLoop {
 public:
  EventLoop(const Settings& settings, const dowser::Reporter& reporter,
            const std::atomic<bool>& stopping, int stop_fd)
      : settings_(settings),
        reporter_(reporter),
        stopping_(stopping),
        stop_fd_(stop_fd),
        matched_(settings.rules) {}

  void run() {
    context_.reset(udev_new());
    if (!context_) {
      reporter_.fail(DOWSER_ERR_GENERIC,
                     std::string("cannot create a libudev context: ") + std::strerror(errno));
      return;
    }
    open_monitor();  // before the first scan, so nothing between them is lost
    rescan();
    do {
      report_if_changed();
    } while (wait_and_handle());
  }

 private:
  void open_monitor() {
    monitor_.reset(udev_monitor_new_from_netlink(context_.get(), "udev"));
    if (monitor_ && udev_monitor_enable_receiving(monitor_.get()) >= 0) {
      udev_monitor_set_receive_buffer_size(monitor_.get(), kMonitorBufferBytes);
      return;
    }
    give_up_monitor(std::string("cannot follow udev events: ") + std::strerror(errno));
  }

  void give_up_monitor(const std::string& why) {
    monitor_.reset();
    reporter_.warn(why + "; rescanning every " + std::to_string(settings_.rescan_interval.count()) +
                   " s only");
  }

  // Waits for events, the next rescan or the stop signal. False when stopping.
  bool wait_and_handle() {
    pollfd fds[2] = {{stop_fd_, POLLIN, 0}, {-1, POLLIN, 0}};
    if (monitor_) fds[1].fd = udev_monitor_get_fd(monitor_.get());
    int ready = ::poll(fds, monitor_ ? 2 : 1, milliseconds_until(next_rescan_));
    if (ready < 0 && errno != EINTR)
      throw std::system_error(errno, std::generic_category(), "poll");
    if (stopping_ || fds[0].revents != 0) return false;
    handle_monitor(fds[1].revents);
    if (Clock::now() >= next_rescan_) rescan();
    return !stopping_;
  }

  static int milliseconds_until(Clock::time_point when) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(when - Clock::now()).count();
    return static_cast<int>(std::max<decltype(left)>(left, 0));
  }

  void handle_monitor(short revents) {
    if ((revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
      give_up_monitor("the udev monitor socket failed");
    } else if ((revents & POLLIN) != 0 && !apply_events()) {
      rescan();  // events were lost: only a full scan is right again
    }
  }

  // Applies every queued event. False when the kernel dropped some.
  bool apply_events() {
    for (;;) {
      errno = 0;
      DevicePtr event(udev_monitor_receive_device(monitor_.get()));
      if (!event) return errno != ENOBUFS;
      try {
        apply_event(event.get());
      } catch (const std::system_error& e) {
        warn_once(e.what());
        return false;
      }
    }
  }

  void apply_event(udev_device* event) {
    std::string action = text_or_empty(udev_device_get_action(event));
    std::string devpath = text_or_empty(udev_device_get_devpath(event));
    if (action == "move")
      matched_.forget_below(text_or_empty(udev_device_get_property_value(event, "DEVPATH_OLD")));
    if (action == "remove") {
      matched_.forget_below(devpath);
    } else {
      matched_.refresh_below(context_.get(), devpath,
                             text_or_empty(udev_device_get_syspath(event)));
    }
  }

  void rescan() {
    next_rescan_ = Clock::now() + settings_.rescan_interval;
    try {
      matched_.rescan(context_.get(), [this] { return stopping_.load(); });
      last_warning_.reset();
    } catch (const std::system_error& e) {
      warn_once(e.what());
    }
  }

  void report_if_changed() {
    auto devices = make_devices(matched_.members(), settings_.report, iommu_group_of);
    if (last_report_ && *last_report_ == devices) return;
    if (reporter_.report(devices)) last_report_ = std::move(devices);
  }

  // Logs a failure once until things work again, not once per event or scan.
  void warn_once(const std::string& what) {
    if (last_warning_ != what) reporter_.warn(what);
    last_warning_ = what;
  }

  const Settings& settings_;
  const dowser::Reporter& reporter_;
  const std::atomic<bool>& stopping_;
  int stop_fd_;
  MatchedDevices matched_;
  UdevPtr context_;
  MonitorPtr monitor_;
  Clock::time_point next_rescan_;
  std::optional<std::vector<dowser::Device>> last_report_;
  std::optional<std::string> last_warning_;
};

}  // namespace

UdevSession::UdevSession(Settings settings, dowser::Reporter reporter)
    : settings_(std::move(settings)), reporter_(std::move(reporter)) {
  stop_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd_ < 0)
    throw std::system_error(errno, std::generic_category(),
                            "cannot create an eventfd for the discovery thread");
  thread_ = std::thread([this] { run(); });
}

UdevSession::~UdevSession() {
  stopping_ = true;
  uint64_t one = 1;
  // An eventfd write of 1 cannot fail short of a counter overflow.
  [[maybe_unused]] ssize_t written = ::write(stop_fd_, &one, sizeof one);
  thread_.join();
  ::close(stop_fd_);
}

void UdevSession::run() {
  try {
    EventLoop(settings_, reporter_, stopping_, stop_fd_).run();
  } catch (const std::exception& e) {
    reporter_.fail(DOWSER_ERR_GENERIC, std::string("discovery failed: ") + e.what());
  }
}

}  // namespace udev_handler
