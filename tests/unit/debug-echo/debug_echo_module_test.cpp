// Loads the built module through its C entry point, as the host does.
#include <dlfcn.h>
#include <dowser/handler.h>

#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace debug_echo {
namespace {

using testing::ids;
using testing::RecordingHost;
using testing::TempDir;

dowser_get_handler_api_fn load_entry() {
  void* module = ::dlopen(DEBUG_ECHO_MODULE_PATH, RTLD_NOW | RTLD_LOCAL);
  if (module == nullptr) throw std::runtime_error(::dlerror());
  // Never closed: the host never unloads a handler either (rule O3).
  return reinterpret_cast<dowser_get_handler_api_fn>(::dlsym(module, DOWSER_ENTRY_SYMBOL));
}

class DebugEchoModule : public ::testing::Test {
 protected:
  void SetUp() override {
    auto entry = load_entry();
    ASSERT_NE(entry, nullptr);
    char err[DOWSER_MAX_ERRLEN] = "";
    api_ = entry(DOWSER_ABI_VERSION_MAJOR, DOWSER_ABI_VERSION_MINOR, err, sizeof err);
    ASSERT_NE(api_, nullptr) << err;
    ASSERT_EQ(api_->init(host_.api(), host_.ctx(), {nullptr, 0}, &handler_, err, sizeof err),
              DOWSER_OK)
        << err;
  }
  void TearDown() override {
    if (handler_ != nullptr) api_->destroy(handler_);
  }

  dowser_status validate(const dowser::DiscoverRequest& request, std::string& message) {
    dowser::abi::RequestView view(request);
    char err[DOWSER_MAX_ERRLEN] = "";
    dowser_status status = api_->validate_request(handler_, view.get(), err, sizeof err);
    message = err;
    return status;
  }

  RecordingHost host_;
  const dowser_handler_api* api_ = nullptr;
  dowser_handler* handler_ = nullptr;
};

TEST_F(DebugEchoModule, IdentifiesItself) {
  EXPECT_STREQ(api_->name, "debugEcho");
  EXPECT_STREQ(api_->version, DEBUG_ECHO_EXPECTED_VERSION);
  EXPECT_EQ(api_->flags, 0u);
  EXPECT_NE(api_->validate_request, nullptr);
}

TEST_F(DebugEchoModule, RefusesAnotherMajor) {
  char err[DOWSER_MAX_ERRLEN] = "";
  EXPECT_EQ(load_entry()(DOWSER_ABI_VERSION_MAJOR + 1, 0, err, sizeof err), nullptr);
  EXPECT_NE(std::string(err), "");
}

TEST_F(DebugEchoModule, ValidatesDetailsAndProperties) {
  std::string message;
  EXPECT_EQ(validate({"descriptions: [a]", {}}, message), DOWSER_OK) << message;
  EXPECT_EQ(validate({"", {}}, message), DOWSER_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(message, "discovery details are empty");
  EXPECT_EQ(validate({"descriptions: [a]", {{"DEBUG_ECHO_POLL_INTERVAL_MS", "5"}}}, message),
            DOWSER_ERR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("DEBUG_ECHO_POLL_INTERVAL_MS"), std::string::npos) << message;
}

TEST_F(DebugEchoModule, StartReportsAndStopEnds) {
  TempDir dir;
  dowser::DiscoverRequest request{"descriptions: [foo0, foo1]",
                                  {{"DEBUG_ECHO_AVAILABILITY_FILE", dir.file("availability")}}};
  dowser::abi::RequestView view(request);
  dowser_session* session = nullptr;
  char err[DOWSER_MAX_ERRLEN] = "";
  ASSERT_EQ(api_->start_discovery(handler_, view.get(), host_.session(), &session, err, sizeof err),
            DOWSER_OK)
      << err;
  EXPECT_TRUE(host_.wait_for([](const RecordingHost::Snapshot& s) {
    return ids(s) == std::vector<std::string>{"foo0", "foo1"} &&
           s[0].properties == dowser::Properties{{"DEBUG_ECHO_DESCRIPTION", "foo0"}} &&
           s[0].sharing == dowser::Sharing::local;
  }));
  api_->stop_discovery(handler_, session);
}

TEST_F(DebugEchoModule, StartRefusesBadDetails) {
  dowser::DiscoverRequest request{"descriptions: [a, [b]]", {}};
  dowser::abi::RequestView view(request);
  dowser_session* session = nullptr;
  char err[DOWSER_MAX_ERRLEN] = "";
  EXPECT_EQ(api_->start_discovery(handler_, view.get(), host_.session(), &session, err, sizeof err),
            DOWSER_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(err, "discovery details: descriptions[1] is not a string");
}

}  // namespace
}  // namespace debug_echo
