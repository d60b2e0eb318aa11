#include "udev_scan.hpp"

#include "udev_match.hpp"

#include <cerrno>
#include <system_error>

namespace udev_handler {

bool MatchedDevices::rescan(udev* context, const std::function<bool()>& stopping) {
  EnumeratePtr enumerate(udev_enumerate_new(context));
  if (!enumerate) throw std::system_error(errno, std::generic_category(), "udev_enumerate_new");
  std::map<std::string, Member> fresh;
  insert_matches(context, enumerate.get(), fresh, stopping);
  if (stopping()) return false;
  matched_ = std::move(fresh);
  return true;
}

void MatchedDevices::refresh_below(udev* context, const std::string& devpath,
                                   const std::string& syspath) {
  forget_below(devpath);
  DevicePtr root(udev_device_new_from_syspath(context, syspath.c_str()));
  EnumeratePtr enumerate(udev_enumerate_new(context));
  if (!root || !enumerate) return;  // gone already: its remove event follows
  udev_enumerate_add_match_parent(enumerate.get(), root.get());
  insert_matches(context, enumerate.get(), matched_, [] { return false; });
}

void MatchedDevices::forget_below(std::string_view devpath) {
  if (devpath.empty()) return;
  // Every key starting with devpath sorts into one contiguous range.
  for (auto it = matched_.lower_bound(std::string(devpath));
       it != matched_.end() && it->first.compare(0, devpath.size(), devpath) == 0;) {
    it = is_same_or_below(it->first, devpath) ? matched_.erase(it) : std::next(it);
  }
}

std::vector<Member> MatchedDevices::members() const {
  std::vector<Member> members;
  members.reserve(matched_.size());
  for (const auto& entry : matched_) members.push_back(entry.second);
  return members;
}

void MatchedDevices::insert_matches(udev* context, udev_enumerate* enumerate,
                                    std::map<std::string, Member>& into,
                                    const std::function<bool()>& stopping) const {
  if (int status = udev_enumerate_scan_devices(enumerate); status < 0)
    throw std::system_error(-status, std::generic_category(), "cannot enumerate udev devices");
  udev_list_entry* entry = nullptr;
  udev_list_entry_foreach(entry, udev_enumerate_get_list_entry(enumerate)) {
    if (stopping()) return;
    DevicePtr device(udev_device_new_from_syspath(context, udev_list_entry_get_name(entry)));
    if (!device) continue;  // removed while we looked
    if (auto member = match_device(rules_, device.get()))
      into[text_or_empty(udev_device_get_devpath(device.get()))] = std::move(*member);
  }
}

}  // namespace udev_handler
