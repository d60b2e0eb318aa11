// The debugEcho discovery handler: reports the devices its discovery details
// describe, or none while an availability file says OFFLINE. Used to test
// the host end to end without real hardware.
#include <dowser/handler.hpp>

#include "debug_echo_details.hpp"
#include "debug_echo_session.hpp"

#include <memory>

namespace debug_echo {
namespace {

class DebugEchoHandler final : public dowser::Handler {
 public:
  void validate(const dowser::DiscoverRequest& request) override { parse_request(request); }

  std::unique_ptr<dowser::Session> start(const dowser::DiscoverRequest& request,
                                         dowser::Reporter reporter) override {
    return std::make_unique<DebugEchoSession>(parse_request(request), reporter);
  }
};

}  // namespace
}  // namespace debug_echo

DOWSER_HANDLER(debug_echo::DebugEchoHandler, "debugEcho", DOWSER_DEBUG_ECHO_VERSION, 0)
