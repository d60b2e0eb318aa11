#include "describe.hpp"

#include <utility>

namespace dowser::check {
namespace {

using nlohmann::json;

// Shown when the handler wrote nothing into the error buffer.
constexpr std::string_view kLoaderPlaceholder = "(no message)";

std::string status_name(dowser_status status) {
  switch (status) {
    case DOWSER_OK:
      return "DOWSER_OK";
    case DOWSER_ERR_GENERIC:
      return "DOWSER_ERR_GENERIC";
    case DOWSER_ERR_INVALID_ARGUMENT:
      return "DOWSER_ERR_INVALID_ARGUMENT";
    case DOWSER_ERR_UNSUPPORTED:
      return "DOWSER_ERR_UNSUPPORTED";
    case DOWSER_ERR_NO_MEMORY:
      return "DOWSER_ERR_NO_MEMORY";
    case DOWSER_ERR_STOPPED:
      return "DOWSER_ERR_STOPPED";
    default:
      return "unknown status";
  }
}

json device_json(const Device& device) {
  json properties = json::object();
  for (const auto& [key, value] : device.properties)
    properties[key] = value ? json(*value) : json(nullptr);
  json mounts = json::array();
  for (const auto& m : device.mounts)
    mounts.push_back({{"container_path", m.container_path},
                      {"host_path", m.host_path},
                      {"read_only", m.read_only}});
  json nodes = json::array();
  for (const auto& n : device.device_nodes)
    nodes.push_back({{"container_path", n.container_path},
                     {"host_path", n.host_path},
                     {"permissions", n.permissions}});
  return {{"id", device.id},
          {"properties", std::move(properties)},
          {"mounts", std::move(mounts)},
          {"device_nodes", std::move(nodes)},
          {"sharing", device.sharing == Sharing::shared ? "shared" : "local"}};
}

}  // namespace

std::string describe_status(dowser_status status) {
  return std::to_string(status) + " (" + status_name(status) + ")";
}

bool gave_no_message(const host::HandlerCallError& error) { return error.message().empty(); }

std::string quoted_message(const std::string& message) {
  return message.empty() ? std::string(kLoaderPlaceholder) : "\"" + message + "\"";
}

std::string describe(const host::HandlerCallError& error) {
  return error.call() + " failed: status " + describe_status(error.status()) + ": " +
         quoted_message(error.message());
}

std::string describe(const host::HandlerLoadError& error) {
  return error.file().filename().string() + ": " + error.stage() + ": " + error.reason();
}

std::string milliseconds_text(std::chrono::steady_clock::duration duration) {
  auto tenths = std::chrono::duration_cast<std::chrono::microseconds>(duration).count() / 100;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " ms";
}

std::string milliseconds_text(std::chrono::milliseconds duration) {
  return std::to_string(duration.count()) + " ms";
}

std::string abi_text(uint16_t major, uint16_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

json handler_json(const host::LoadedHandler& handler) {
  return {{"name", handler.name()},
          {"version", handler.version()},
          {"abi", abi_text(handler.api().abi_major, handler.api().abi_minor)},
          {"shared", handler.shares_devices()}};
}

json devices_json(const host::Snapshot& snapshot) {
  json devices = json::array();
  for (const auto& device : snapshot) devices.push_back(device_json(device));
  return devices;
}

}  // namespace dowser::check
