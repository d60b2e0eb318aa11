// The onvif discovery handler: finds ONVIF cameras (NetworkVideoTransmitters)
// with WS-Discovery and reports each as a shared device identified by its
// endpoint UUID. See docs/handlers-onvif.md. GPL-2.0-or-later (LICENSE).
#include <dowser/handler.hpp>

#include "credentials.hpp"
#include "device_client.hpp"
#include "discovery_session.hpp"
#include "onvif_settings.hpp"

#include <memory>

namespace onvif {
namespace {

class OnvifSession final : public dowser::Session {
 public:
  OnvifSession(const Settings& settings, CredentialStore credentials,
               const dowser::Reporter& reporter)
      : session_(
            settings, std::move(credentials),
            [timeout = settings.request_timeout](const std::atomic<bool>& stopping) {
              return std::make_unique<DeviceClient>(timeout, stopping);
            },
            [reporter](const std::vector<dowser::Device>& devices) {
              return reporter.report(devices);
            },
            [reporter](dowser::LogLevel level, const std::string& line) {
              reporter.log(level, line);
            },
            [reporter](const std::string& why) { reporter.fail(DOWSER_ERR_GENERIC, why); }) {}

 private:
  DiscoverySession session_;
};

class OnvifHandler final : public dowser::Handler {
 public:
  void validate(const dowser::DiscoverRequest& request) override {
    parse_settings(request);
    CredentialStore::from_properties(request.properties);
  }

  std::unique_ptr<dowser::Session> start(const dowser::DiscoverRequest& request,
                                         dowser::Reporter reporter) override {
    Settings settings = parse_settings(request);
    auto credentials = CredentialStore::from_properties(request.properties);
    for (const auto& warning : settings.warnings) reporter.warn(warning);
    return std::make_unique<OnvifSession>(settings, std::move(credentials), reporter);
  }
};

}  // namespace
}  // namespace onvif

DOWSER_HANDLER(onvif::OnvifHandler, "onvif", DOWSER_ONVIF_VERSION,
               DOWSER_HANDLER_FLAG_SHARED_DEVICES)
