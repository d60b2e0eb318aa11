// The devices the rules match now, kept up to date by full scans and by
// re-scanning only the part of the device tree an event touched.
#ifndef DOWSER_HANDLERS_UDEV_SCAN_HPP
#define DOWSER_HANDLERS_UDEV_SCAN_HPP

#include "udev_details.hpp"
#include "udev_libudev.hpp"
#include "udev_report.hpp"

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace udev_handler {

class MatchedDevices {
 public:
  explicit MatchedDevices(std::vector<Rule> rules) : rules_(std::move(rules)) {}

  // Re-reads every device. Returns false, keeping the previous state, when
  // stopping() turned true part way. Throws std::system_error when devices
  // cannot be listed at all, keeping the previous state too.
  bool rescan(udev* context, const std::function<bool()>& stopping);

  // Re-evaluates the device at syspath and every device below it: only they
  // can change when that device does (plural fields look upwards only).
  // Throws std::system_error as rescan does.
  void refresh_below(udev* context, const std::string& devpath, const std::string& syspath);

  // Drops the device at devpath and every device below it.
  void forget_below(std::string_view devpath);

  std::vector<Member> members() const;

 private:
  void insert_matches(udev* context, udev_enumerate* enumerate, std::map<std::string, Member>& into,
                      const std::function<bool()>& stopping) const;

  std::vector<Rule> rules_;
  std::map<std::string, Member> matched_;  // by the devpath of the matched device
};

}  // namespace udev_handler

#endif  // DOWSER_HANDLERS_UDEV_SCAN_HPP
