// Owning handles for libudev objects, and null-safe readers. libudev objects
// are not thread-safe: each session uses its own, on its own thread.
#ifndef DOWSER_HANDLERS_UDEV_LIBUDEV_HPP
#define DOWSER_HANDLERS_UDEV_LIBUDEV_HPP

#include <libudev.h>

#include <memory>
#include <string>

namespace udev_handler {

struct UdevUnref {
  void operator()(udev* p) const noexcept { udev_unref(p); }
  void operator()(udev_device* p) const noexcept { udev_device_unref(p); }
  void operator()(udev_enumerate* p) const noexcept { udev_enumerate_unref(p); }
  void operator()(udev_monitor* p) const noexcept { udev_monitor_unref(p); }
};

using UdevPtr = std::unique_ptr<udev, UdevUnref>;
using DevicePtr = std::unique_ptr<udev_device, UdevUnref>;
using EnumeratePtr = std::unique_ptr<udev_enumerate, UdevUnref>;
using MonitorPtr = std::unique_ptr<udev_monitor, UdevUnref>;

// libudev returns NULL for "absent"; udev rules treat absent as empty.
inline std::string text_or_empty(const char* text) { return text != nullptr ? text : ""; }

}  // namespace udev_handler

#endif  // DOWSER_HANDLERS_UDEV_LIBUDEV_HPP
