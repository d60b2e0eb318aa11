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
  explicit UdevHandler(const dowser::InitContext& context) : host_(context.host) {}

  // Bad rules are refused when a Configuration is loaded, not at discovery;
  // rules that may mean something else than in Akri are warned of then.
  void validate(const dowser::DiscoverRequest& request) override {
    for (const auto& warning : regex_lookalikes(parse_request(request).rules)) host_.warn(warning);
  }

  std::unique_ptr<dowser::Session> start(const dowser::DiscoverRequest& request,
                                         dowser::Reporter reporter) override {
    return std::make_unique<UdevSession>(parse_request(request), std::move(reporter));
  }

 private:
  dowser::Host host_;
};

}  // namespace
}  // namespace udev_handler

DOWSER_HANDLER(udev_handler::UdevHandler, "udev", DOWSER_UDEV_VERSION, 0)
