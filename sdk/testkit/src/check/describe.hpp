// Text and JSON for what the checks see: statuses, errors, durations,
// handlers and devices. Used in the child processes, so the parent only ever
// sees plain JSON.
#pragma once

#include <dowser/handler.hpp>
#include <handler_registry.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace dowser::check {

// "2 (DOWSER_ERR_INVALID_ARGUMENT)".
std::string describe_status(dowser_status status);

// Whether a refusal came without a message of the handler's own.
bool gave_no_message(const host::HandlerCallError& error);

// "\"message\"", or "(no message)".
std::string quoted_message(const std::string& message);

// "start_discovery failed: status 1 (DOWSER_ERR_GENERIC): \"why\"".
std::string describe(const host::HandlerCallError& error);

// "libfoo.so: negotiate: handler ABI 2.0, host ABI 1.0 (major differs)".
std::string describe(const host::HandlerLoadError& error);

// "12.3 ms" (tenths) and "300 ms".
std::string milliseconds_text(std::chrono::steady_clock::duration duration);
std::string milliseconds_text(std::chrono::milliseconds duration);

// "1.0".
std::string abi_text(uint16_t major, uint16_t minor);

// {name, version, abi, shared}.
nlohmann::json handler_json(const host::LoadedHandler& handler);

// [{id, properties, mounts, device_nodes, sharing}, ...].
nlohmann::json devices_json(const host::Snapshot& snapshot);

}  // namespace dowser::check
