// Must not compile: a validate the SDK cannot use as the override of
// Handler::validate. Built by ctest with -DMISDECLARED_<how>, expecting the
// SDK's own message (before, a const validate compiled and checked nothing).
#include <dowser/handler.hpp>

namespace {

class Misdeclared final : public dowser::Handler {
 public:
  std::unique_ptr<dowser::Session> start(const dowser::DiscoverRequest&,
                                         dowser::Reporter) override {
    return nullptr;
  }
#if defined(MISDECLARED_CONST)
  void validate(const dowser::DiscoverRequest&) const {}  // hides Handler::validate
#elif defined(MISDECLARED_PRIVATE)

 private:
  void validate(const dowser::DiscoverRequest&) override {}
#endif
};

}  // namespace

DOWSER_HANDLER(Misdeclared, "misdeclared", "1.0.0", 0)
