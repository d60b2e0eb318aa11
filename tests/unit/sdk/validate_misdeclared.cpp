// Must not compile: a const validate hides Handler::validate and overrides
// nothing, so the checks in it would never run. Built by ctest, expecting the
// SDK's own message (before, it compiled and offered a validate_request that
// checked nothing).
#include <dowser/handler.hpp>

namespace {

class ConstValidate final : public dowser::Handler {
 public:
  std::unique_ptr<dowser::Session> start(const dowser::DiscoverRequest&,
                                         dowser::Reporter) override {
    return nullptr;
  }
  void validate(const dowser::DiscoverRequest&) const {}
};

}  // namespace

DOWSER_HANDLER(ConstValidate, "constValidate", "1.0.0", 0)
