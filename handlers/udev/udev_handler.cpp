// The udev discovery handler: reports the local devices that Akri-style
// udev rules match, following udev events as they happen.
#include <dowser/handler.hpp>

#include "udev_details.hpp"
#include "udev_session.hpp"

#include <memory>

namespace udev_handler {
namespace {

class UdevHandler final : public dowser::Handler {
 public:
  // Bad rules are refused when a Configuration is loaded, not at discovery.
  void validate(const dowser::DiscoverRequest& request) override { parse_request(request); }

  std::unique_ptr<dowser::Session> start(const dowser::DiscoverRequest& request,
                                         dowser::Reporter reporter) override {
    return std::make_unique<UdevSession>(parse_request(request), std::move(reporter));
  }
};

}  // namespace
}  // namespace udev_handler

DOWSER_HANDLER(udev_handler::UdevHandler, "udev", DOWSER_UDEV_VERSION, 0)
