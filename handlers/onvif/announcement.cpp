#include "announcement.hpp"

#include <dowser/handler.hpp>

#include <algorithm>
#include <cctype>

namespace onvif {

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> items;
  auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  auto it = text.begin();
  while (it != text.end()) {
    it = std::find_if_not(it, text.end(), is_space);
    auto end = std::find_if(it, text.end(), is_space);
    if (it != end) items.emplace_back(it, end);
    it = end;
  }
  return items;
}

std::string device_uuid(std::string_view endpoint_address) {
  auto strip = [&](std::string_view prefix) {
    if (endpoint_address.substr(0, prefix.size()) == prefix)
      endpoint_address.remove_prefix(prefix.size());
  };
  strip("urn:");
  strip("uuid:");
  return dowser::lowercase(std::string(endpoint_address));
}

bool is_video_transmitter(const std::vector<std::string>& types) {
  return std::any_of(types.begin(), types.end(), [](const std::string& type) {
    auto colon = type.rfind(':');
    return type.substr(colon == std::string::npos ? 0 : colon + 1) == "NetworkVideoTransmitter";
  });
}

}  // namespace onvif
