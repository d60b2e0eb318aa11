// What the onvif peer tests ask of the handler's reports: the device ids of
// a snapshot, a predicate on them, one device and one of its properties.
#pragma once

#include <dowser/testkit.hpp>

#include <set>
#include <string>

namespace onvif::peers {

inline std::set<std::string> ids(const dowser::testkit::Snapshot& snapshot) {
  std::set<std::string> result;
  for (const auto& device : snapshot) result.insert(device.id);
  return result;
}

inline auto has_ids(std::set<std::string> expected) {
  return
      [expected](const dowser::testkit::Snapshot& snapshot) { return ids(snapshot) == expected; };
}

inline const dowser::Device* find(const dowser::testkit::Snapshot& snapshot,
                                  const std::string& id) {
  for (const auto& device : snapshot)
    if (device.id == id) return &device;
  return nullptr;
}

// The property's value, or "<absent>".
inline std::string property(const dowser::Device& device, const std::string& key) {
  auto it = device.properties.find(key);
  return it != device.properties.end() && it->second ? *it->second : "<absent>";
}

}  // namespace onvif::peers
