// look_up: host names resolved on a thread of their own, so that a lookup
// that hangs ends when the session is cancelled. A resolver that
// hangs is a stand-in here (a real one needs a DNS server that does not
// answer, set in /etc/resolv.conf); the answering cases use getaddrinfo.
#include "tcp_stream.hpp"
#include "eventually.hpp"
#include "ua_test_peer.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <utility>

namespace opcua {
namespace {

using namespace std::chrono_literals;

// A resolver that returns getaddrinfo's answer for 127.0.0.1 once released.
struct HangingResolver {
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released{release.get_future().share()};

  Resolver resolver(const std::shared_ptr<HangingResolver>& self) {
    return [self](const char*, const char* service, const addrinfo* hints, addrinfo** found) {
      self->entered.set_value();
      self->released.wait();
      return ::getaddrinfo("127.0.0.1", service, hints, found);
    };
  }
};

// Runs look_up with a hanging resolver on a thread of the test; the
// resolver is released when this goes, whatever happened, so that a
// look_up that waits for it (the defect) fails the test instead of hanging it.
class HangingLookup {
 public:
  explicit HangingLookup(const Cancellation& cancellation)
      : entered_(hanging_->entered.get_future()),
        lookup_(std::async(std::launch::async, [this, &cancellation] {
          return look_up("lds.example", "4840", cancellation, hanging_->resolver(hanging_));
        })) {}
  ~HangingLookup() {
    release();
    if (lookup_.valid()) lookup_.wait();
  }
  HangingLookup(const HangingLookup&) = delete;
  HangingLookup& operator=(const HangingLookup&) = delete;

  bool entered() { return entered_.wait_for(10s) == std::future_status::ready; }
  bool ended() { return lookup_.wait_for(10s) == std::future_status::ready; }
  AddressList result() { return lookup_.get(); }
  // Lets the resolver answer; true once the lookup's thread has ended and
  // let go of it (and of the answer it holds with it).
  bool thread_ended() {
    release();
    return dowser::test::eventually([this] { return hanging_.use_count() == 1; });
  }

 private:
  void release() {
    if (!std::exchange(released_, true)) hanging_->release.set_value();
  }

  std::shared_ptr<HangingResolver> hanging_ = std::make_shared<HangingResolver>();
  bool released_ = false;
  std::future<void> entered_;
  std::future<AddressList> lookup_;
};

// EAI_AGAIN (no DNS server answered) is not "no such host".
TEST(LookUp, AResolverThatCannotAnswerNowIsToldFromAnUnknownName) {
  const Cancellation cancellation;
  const auto answering = [](int status) {
    return [status](const char*, const char*, const addrinfo*, addrinfo**) { return status; };
  };
  for (const int status : {EAI_AGAIN, EAI_MEMORY, EAI_SYSTEM})
    EXPECT_THROW(look_up("plc1.factory", "4840", cancellation, answering(status)),
                 LookupUnavailable)
        << status;
  try {
    look_up("plc1.factory", "4840", cancellation, answering(EAI_NONAME));
    ADD_FAILURE() << "resolved";
  } catch (const LookupUnavailable&) {
    ADD_FAILURE() << "an unknown name taken for a resolver that could not answer";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot resolve 'plc1.factory'"), std::string::npos);
  }
}

TEST(LookUp, AnswersWithTheAddressesOrSaysWhyNot) {
  const Cancellation cancellation;
  for (const char* host : {"127.0.0.1", "::1", "localhost"}) {  // literals, and a name
    auto addresses = look_up(host, "4840", cancellation);
    ASSERT_NE(addresses, nullptr) << host;
    EXPECT_EQ(addresses->ai_socktype, SOCK_STREAM) << host;
  }
  try {
    look_up(test::kNameNeverResolved, "4840", cancellation);
    ADD_FAILURE() << "an invalid name resolved";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot resolve '" + test::kNameNeverResolved + "'"),
              std::string::npos)
        << e.what();
  }
}

TEST(LookUp, ALookupThatHangsEndsWhenTheSessionIsCancelled) {
  Cancellation cancellation;
  HangingLookup lookup(cancellation);
  ASSERT_TRUE(lookup.entered());
  cancellation.cancel();
  ASSERT_TRUE(lookup.ended()) << "the lookup waited for a resolver that does not answer";
  EXPECT_THROW(lookup.result(), Cancelled);
  EXPECT_TRUE(lookup.thread_ended()) << "the thread ends once the resolver answers";
}

size_t thread_count() {
  size_t count = 0;
  for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task"))
    ++count;
  return count;
}

// A stopped session's scan may still go through every server an LDS
// listed: it starts no lookup, and no thread, for any of them.
TEST(LookUp, ACancelledSessionStartsNoLookup) {
  Cancellation cancellation;
  cancellation.cancel();
  auto hanging = std::make_shared<HangingResolver>();
  const size_t threads = thread_count();
  EXPECT_THROW(look_up("lds.example", "4840", cancellation, hanging->resolver(hanging)), Cancelled);
  // A thread started would still be in the resolver, which has not answered.
  EXPECT_LE(thread_count(), threads) << "a lookup thread was started for a stopped session";
  hanging->release.set_value();
}

}  // namespace
}  // namespace opcua
