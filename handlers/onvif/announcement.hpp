// What a camera says about itself over WS-Discovery (a ProbeMatch or a
// Hello), and Akri's rules for reading it.
#ifndef DOWSER_HANDLERS_ONVIF_ANNOUNCEMENT_HPP
#define DOWSER_HANDLERS_ONVIF_ANNOUNCEMENT_HPP

#include <string>
#include <string_view>
#include <vector>

namespace onvif {

struct Announcement {
  std::string endpoint;             // EndpointReference/Address, as sent
  std::vector<std::string> types;   // QNames, e.g. "dn:NetworkVideoTransmitter"
  std::vector<std::string> scopes;  // URIs
  std::vector<std::string> xaddrs;  // device service URLs, in the camera's order
  friend bool operator==(const Announcement&, const Announcement&) = default;
};

// Splits a WS-Discovery list (whitespace-separated), dropping empty items.
std::vector<std::string> split_list(std::string_view text);

// Akri's device UUID: the endpoint address without a leading "urn:" and
// then a leading "uuid:", lower-cased ("urn:uuid:D" -> "d").
std::string device_uuid(std::string_view endpoint_address);

// Whether a Types list names an ONVIF NetworkVideoTransmitter (any prefix).
bool is_video_transmitter(const std::vector<std::string>& types);

}  // namespace onvif

#endif  // DOWSER_HANDLERS_ONVIF_ANNOUNCEMENT_HPP
