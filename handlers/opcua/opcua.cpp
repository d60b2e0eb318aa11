// The opcua discovery handler: finds OPC UA servers through FindServers on
// Local Discovery Servers or on the servers themselves, and reports each as
// a shared device identified by its discovery URL. See README.md.
#include <dowser/handler.hpp>

#include "discovery_loop.hpp"
#include "opcua_settings.hpp"

#include <memory>

namespace opcua {
namespace {

class OpcuaSession final : public dowser::Session {
 public:
  OpcuaSession(const Settings& settings, const dowser::Reporter& reporter)
      : loop_(
            settings, network_services(settings.client),
            [reporter](const std::vector<dowser::Device>& devices) {
              return reporter.report(devices);
            },
            [reporter](dowser::LogLevel level, const std::string& line) {
              reporter.log(level, line);
            }) {}

 private:
  DiscoveryLoop loop_;
};

class OpcuaHandler final : public dowser::Handler {
 public:
  void validate(const dowser::DiscoverRequest& request) override {
    parse_settings(request.discovery_details);
  }

  std::unique_ptr<dowser::Session> start(const dowser::DiscoverRequest& request,
                                         dowser::Reporter reporter) override {
    Settings settings = parse_settings(request.discovery_details);
    for (const auto& warning : settings.warnings) reporter.warn(warning);
    return std::make_unique<OpcuaSession>(settings, reporter);
  }
};

}  // namespace
}  // namespace opcua

DOWSER_HANDLER(opcua::OpcuaHandler, "opcua", DOWSER_OPCUA_VERSION,
               DOWSER_HANDLER_FLAG_SHARED_DEVICES)
