// Rule matching against libudev devices, with udev's semantics: every value
// is a udev glob; an absent attribute, property or driver reads as "". The
// plural fields are true when the device or any ancestor matches (== ) and
// when none does (!=), each filter on its own, as Akri evaluates them.
#ifndef DOWSER_HANDLERS_UDEV_MATCH_HPP
#define DOWSER_HANDLERS_UDEV_MATCH_HPP

#include "udev_details.hpp"
#include "udev_libudev.hpp"
#include "udev_report.hpp"

#include <optional>
#include <vector>

namespace udev_handler {

// Whether every filter of one rule holds for device.
bool rule_matches(const std::vector<Filter>& filters, udev_device* device);

// The device itself when it has a device node, else its nearest ancestor
// with one, else the device without a node.
Member member_for(udev_device* device);

// The member to report when any rule matches device (rules are OR-ed).
std::optional<Member> match_device(const std::vector<Rule>& rules, udev_device* device);

}  // namespace udev_handler

#endif  // DOWSER_HANDLERS_UDEV_MATCH_HPP
