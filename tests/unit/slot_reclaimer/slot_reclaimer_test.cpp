#include "slot_reclaimer.hpp"
#include "fake_kubelet.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <future>
#include <thread>

namespace dowser::reclaim {
namespace {

using namespace std::chrono_literals;
using testing::FakeKubelet;
using testing::ListMode;
using testing::TempDir;

constexpr auto kInterval = 50ms;
constexpr auto kGrace = 100ms;
constexpr auto kDeadline = 10s;  // for conditions that should hold far sooner

const HeldSlot kReported =
    instance_level_slot("akri.sh", {"default", "camera-a1b2c3"}, 0, "node-a");
const HeldSlot kUnreported =
    configuration_level_slot("akri.sh", "camera", "1", {"default", "camera-d4e5f6"}, 2, "node-a");

// The daemon's core: an io_context run by one thread.
class Core {
 public:
  Core() : thread_([this] { io.run(); }) {}
  ~Core() { halt(); }
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  void halt() {
    guard_.reset();
    io.stop();
    if (thread_.joinable()) thread_.join();
  }

  // Runs f on the core thread and waits for it.
  void run(const std::function<void()>& f) {
    std::promise<void> done;
    boost::asio::post(io, [&] {
      f();
      done.set_value();
    });
    ASSERT_EQ(done.get_future().wait_for(kDeadline), std::future_status::ready);
  }

  boost::asio::io_context io;

 private:
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_ =
      boost::asio::make_work_guard(io);
  std::thread thread_;
};

// The daemon's side: the slots it holds and what the reclaimer released.
// Each held_slots() call is one pass over a successful List.
class Daemon {
 public:
  explicit Daemon(std::vector<HeldSlot> held) : held_(std::move(held)) {}

  std::vector<HeldSlot> held_slots() {
    std::lock_guard lock(mutex_);
    ++passes_;
    changed_.notify_all();
    return held_;
  }
  void release(const HeldSlot& slot) {
    std::lock_guard lock(mutex_);
    released_.push_back(slot);
    std::erase(held_, slot);  // as the capacity manager would: no longer held
    changed_.notify_all();
  }

  bool wait_for_passes(uint64_t count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kDeadline, [&] { return passes_ >= count; });
  }
  bool wait_for_release(const HeldSlot& slot) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kDeadline, [&] {
      return std::find(released_.begin(), released_.end(), slot) != released_.end();
    });
  }
  uint64_t passes() const {
    std::lock_guard lock(mutex_);
    return passes_;
  }
  std::vector<HeldSlot> released() const {
    std::lock_guard lock(mutex_);
    return released_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<HeldSlot> held_;
  uint64_t passes_ = 0;
  std::vector<HeldSlot> released_;
};

// Captures what is logged while it lives.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    sink_->set_pattern("%l %v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink_));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }

  size_t count(const std::string& text) const {
    auto lines = sink_->last_formatted();
    return std::count_if(lines.begin(), lines.end(), [&](const std::string& line) {
      return line.find(text) != std::string::npos;
    });
  }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_ =
      std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000);
};

class SlotReclaimerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    core.halt();  // the reclaimer is destroyed while the core is not running
    reclaimer.reset();
  }

  std::unique_ptr<SlotReclaimer> make_reclaimer(boost::asio::io_context& io) {
    return std::make_unique<SlotReclaimer>(
        io, socket, kInterval, kGrace, [this] { return daemon.held_slots(); },
        [this](const HeldSlot& slot) { daemon.release(slot); });
  }
  void start() {
    reclaimer = make_reclaimer(core.io);
    core.run([this] { reclaimer->start(); });
  }

  CapturedLog log;
  TempDir dir;
  std::filesystem::path socket = dir.path() / "kubelet.sock";
  FakeKubelet kubelet{socket};
  Daemon daemon{{kReported, kUnreported}};
  Core core;
  std::unique_ptr<SlotReclaimer> reclaimer;
};

TEST_F(SlotReclaimerTest, ReleasesAfterGraceOnlyWhatNoContainerHolds) {
  kubelet.pod_resources().set_in_use({{kReported.resource, kReported.device_id}});
  const auto started = std::chrono::steady_clock::now();
  start();

  ASSERT_TRUE(daemon.wait_for_release(kUnreported));
  EXPECT_GE(std::chrono::steady_clock::now() - started, kGrace);
  // A few more passes, each well past the grace of anything unused.
  ASSERT_TRUE(daemon.wait_for_passes(daemon.passes() + 3));

  EXPECT_EQ(daemon.released(), std::vector<HeldSlot>{kUnreported});
  EXPECT_EQ(reclaimer->stats().reclaimed_total, 1u);
  EXPECT_EQ(reclaimer->stats().list_failures_total, 0u);
  EXPECT_EQ(log.count("freeing device 1 of resource akri.sh/camera"), 1u);
  EXPECT_EQ(log.count("no container has held it for 100 ms"), 1u);
}

TEST_F(SlotReclaimerTest, FreesNothingWhileListFails) {
  kubelet.pod_resources().set_in_use({{kReported.resource, kReported.device_id}});
  kubelet.pod_resources().set_mode(ListMode::fail);
  start();
  // Eight failed Lists span seven intervals, far more than the grace.
  ASSERT_TRUE(kubelet.pod_resources().wait_for_lists(8, kDeadline));
  kubelet.pod_resources().set_mode(ListMode::answer);
  // The core handles results in order: every failure before this pass.
  ASSERT_TRUE(daemon.wait_for_passes(1));

  EXPECT_TRUE(daemon.released().empty());
  const ReclaimerStats stats = reclaimer->stats();
  EXPECT_GE(stats.list_failures_total, 8u);
  EXPECT_GE(stats.lists_total, 1u);
  EXPECT_NE(stats.last_error.find("kubelet is restarting"), std::string::npos) << stats.last_error;
  EXPECT_EQ(log.count("cannot list pod resources"), 1u) << "logged once, not per interval";
  EXPECT_EQ(log.count("works again"), 1u);
}

TEST_F(SlotReclaimerTest, StopCancelsAListInFlightPromptly) {
  kubelet.pod_resources().set_mode(ListMode::hold_until_cancelled);
  start();
  ASSERT_TRUE(kubelet.pod_resources().wait_for_lists(1, kDeadline));

  const auto stopping = std::chrono::steady_clock::now();
  core.run([this] { reclaimer->stop(); });
  // The List's own deadline is 5 s; cancelling must not wait for it.
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, 2s);
  EXPECT_EQ(daemon.passes(), 0u);
}

TEST_F(SlotReclaimerTest, ResultsPostedBeforeDestructionAreDropped) {
  boost::asio::io_context idle_core;  // not run until the reclaimer is gone
  auto early = make_reclaimer(idle_core);
  early->start();
  // The second List starts only after the first result was posted.
  ASSERT_TRUE(kubelet.pod_resources().wait_for_lists(2, kDeadline));
  early.reset();

  idle_core.poll();
  EXPECT_EQ(daemon.passes(), 0u);
  EXPECT_TRUE(daemon.released().empty());
}

// A List that began before a grant cannot show the grant's container, even
// when the core gets to its result after the grace (a core busy with slow
// store writes): such a result frees nothing granted since.
TEST_F(SlotReclaimerTest, AListBegunBeforeAGrantDoesNotFreeItHoweverLateItIsHandled) {
  kubelet.pod_resources().set_in_use({{kReported.resource, kReported.device_id}});
  boost::asio::io_context busy_core;  // run only once the grace has passed
  auto early = make_reclaimer(busy_core);
  early->start();
  ASSERT_TRUE(kubelet.pod_resources().wait_for_lists(1, kDeadline));
  // Later Lists are held: every answered one began before the grant below.
  kubelet.pod_resources().set_mode(ListMode::hold_until_cancelled);
  ASSERT_TRUE(
      kubelet.pod_resources().wait_for_lists(kubelet.pod_resources().lists() + 1, kDeadline));
  const auto granted_at = std::chrono::steady_clock::now();
  early->granted(kUnreported);  // the core is not running: this thread is it
  // Not a wait for a condition: the scenario is a core that is this late.
  std::this_thread::sleep_until(granted_at + kGrace + 20ms);

  busy_core.poll();
  EXPECT_GE(daemon.passes(), 1u);
  EXPECT_TRUE(daemon.released().empty());
  early.reset();
}

}  // namespace
}  // namespace dowser::reclaim
