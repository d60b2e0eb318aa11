#include "udev_match.hpp"

#include "udev_glob.hpp"

#include <cctype>
#include <string>
#include <string_view>

namespace udev_handler {
namespace {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// The field a plural field applies to each device of the chain.
Field singular(Field field) {
  switch (field) {
    case Field::attrs:
      return Field::attr;
    case Field::drivers:
      return Field::driver;
    case Field::kernels:
      return Field::kernel;
    case Field::subsystems:
      return Field::subsystem;
    case Field::tags:
      return Field::tag;
    default:
      return field;
  }
}

// udev drops trailing whitespace (sysfs values end in '\n') unless the
// pattern itself ends in whitespace.
std::string attribute(udev_device* device, const Filter& filter) {
  std::string value = text_or_empty(udev_device_get_sysattr_value(device, filter.key.c_str()));
  if (!filter.value.empty() && is_space(filter.value.back())) return value;
  while (!value.empty() && is_space(value.back())) value.pop_back();
  return value;
}

// Tags from the udev database, and from the TAGS property (":a:b:"), which
// is where device descriptions without a database keep them.
bool any_tag_matches(udev_device* device, const std::string& pattern) {
  udev_list_entry* entry = nullptr;
  udev_list_entry_foreach(entry, udev_device_get_tags_list_entry(device)) {
    if (glob_match(pattern, text_or_empty(udev_list_entry_get_name(entry)))) return true;
  }
  std::string all_tags = text_or_empty(udev_device_get_property_value(device, "TAGS"));
  std::string_view tags = all_tags;
  while (!tags.empty()) {
    size_t colon = tags.find(':');
    std::string_view tag = tags.substr(0, colon);
    if (!tag.empty() && glob_match(pattern, tag)) return true;
    if (colon == std::string_view::npos) break;
    tags.remove_prefix(colon + 1);
  }
  return false;
}

// Whether one device (not its ancestors) matches a singular field's value.
bool device_matches(Field field, const Filter& filter, udev_device* device) {
  switch (field) {
    case Field::attr:
      return glob_match(filter.value, attribute(device, filter));
    case Field::devpath:
      return glob_match(filter.value, text_or_empty(udev_device_get_devpath(device)));
    case Field::driver:
      return glob_match(filter.value, text_or_empty(udev_device_get_driver(device)));
    case Field::env:
      return glob_match(filter.value,
                        text_or_empty(udev_device_get_property_value(device, filter.key.c_str())));
    case Field::kernel:
      return glob_match(filter.value, text_or_empty(udev_device_get_sysname(device)));
    case Field::subsystem:
      return glob_match(filter.value, text_or_empty(udev_device_get_subsystem(device)));
    case Field::tag:
      return any_tag_matches(device, filter.value);
    default:
      return false;  // plural fields are turned into singular ones before
  }
}

bool filter_holds(const Filter& filter, udev_device* device) {
  bool found = false;
  if (walks_parents(filter.field)) {
    Field field = singular(filter.field);
    for (udev_device* d = device; d != nullptr && !found; d = udev_device_get_parent(d))
      found = device_matches(field, filter, d);
  } else {
    found = device_matches(filter.field, filter, device);
  }
  return found == (filter.op == Operator::equal);
}

}  // namespace

bool rule_matches(const std::vector<Filter>& filters, udev_device* device) {
  for (const auto& filter : filters) {
    if (!filter_holds(filter, device)) return false;
  }
  return true;
}

Member member_for(udev_device* device) {
  // Parents are owned by the device they were asked from: no unref here.
  for (udev_device* d = device; d != nullptr; d = udev_device_get_parent(d)) {
    if (const char* devnode = udev_device_get_devnode(d))
      return {text_or_empty(udev_device_get_devpath(d)), std::string(devnode)};
  }
  return {text_or_empty(udev_device_get_devpath(device)), std::nullopt};
}

std::optional<Member> match_device(const std::vector<Rule>& rules, udev_device* device) {
  for (const auto& rule : rules) {
    if (rule_matches(rule.filters, device)) return member_for(device);
  }
  return std::nullopt;
}

}  // namespace udev_handler
