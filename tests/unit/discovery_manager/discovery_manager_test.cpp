// DiscoveryManager with the real debugEcho handler library, copied into a
// temp handler directory: sessions started, restarted and waiting for a
// handler that is not there yet; events arrive on a core thread of the test.
#include "discovery_manager.hpp"
#include "eventually.hpp"
#include "log_capture.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace fs = std::filesystem;
using dowser::configuration::Configuration;
using dowser::discovery::ConfigurationKey;
using dowser::discovery::DiscoveryManager;
using dowser::discovery::DiscoveryOptions;

namespace {

constexpr std::chrono::seconds kDeadline{10};  // generous: waits end when their condition holds
const ConfigurationKey kKey{"default", "echoes"};

// What the manager reported, from the core thread; the test waits on it.
class Recorder {
 public:
  struct Reports {
    // Device ids after each change of kKey's devices, sorted; and whether
    // the change was complete.
    std::vector<std::vector<std::string>> snapshots;
    std::vector<bool> complete;
    std::vector<std::string> failures;         // reasons given for kKey
    std::vector<std::string> refusals;         // the same, for refusals (not retried)
    std::vector<std::string> report_problems;  // what the host did not take from reports
    size_t starts = 0;                         // sessions the handler accepted
  };

  DiscoveryManager::Events events() {
    return {[this](const ConfigurationKey& key, const dowser::host::DeviceChanges& changes) {
              record(key, [&](Reports& reports) {
                if (changes.complete) devices_.clear();
                for (const auto& device : changes.gone) devices_.erase(device.id);
                for (const auto& device : changes.reported) devices_.insert(device.id);
                reports.snapshots.emplace_back(devices_.begin(), devices_.end());
                reports.complete.push_back(changes.complete);
              });
            },
            [this](const ConfigurationKey& key, const std::string& reason) {
              record(key, [&](Reports& reports) { reports.failures.push_back(reason); });
            },
            [this](const ConfigurationKey& key, const std::string& reason) {
              record(key, [&](Reports& reports) { reports.refusals.push_back(reason); });
            },
            [this](const ConfigurationKey& key, const std::string& problem) {
              record(key, [&](Reports& reports) { reports.report_problems.push_back(problem); });
            },
            [this](const ConfigurationKey& key) {
              record(key, [&](Reports& reports) { ++reports.starts; });
            }};
  }

  bool wait_for(const std::function<bool(const Reports&)>& condition) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kDeadline, [&] { return condition(reports_); });
  }

 private:
  template <typename Change>
  void record(const ConfigurationKey& key, Change change) {
    if (key != kKey) return;
    {
      std::lock_guard lock(mutex_);
      change(reports_);
    }
    changed_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  Reports reports_;
  std::set<std::string> devices_;  // as the changes so far describe them
};

bool mentions(const std::vector<std::string>& reasons, const std::string& text) {
  for (const auto& reason : reasons)
    if (reason.find(text) != std::string::npos) return true;
  return false;
}

class DiscoveryManagerTest : public ::testing::Test {
 protected:
  DiscoveryManagerTest() {
    fs::create_directories(handler_dir());
    DiscoveryOptions options;
    options.handler_dir = handler_dir();
    // Short, so that the tests need not wait long for a rescan or a retry.
    options.handler_rescan = std::chrono::milliseconds(50);
    options.first_retry = std::chrono::milliseconds(50);
    options.max_retry = std::chrono::milliseconds(200);
    options.accepted_requests_file = dir_ / "accepted-requests";
    options_ = options;
    on_core(
        [&] { manager_ = std::make_unique<DiscoveryManager>(core_, options, recorder_.events()); });
  }

  // A new manager over the same files, as after a dowserd restart.
  void restart_manager() {
    on_core([this] {
      manager_.reset();
      manager_ = std::make_unique<DiscoveryManager>(core_, options_, recorder_.events());
    });
  }
  ~DiscoveryManagerTest() override {
    on_core([this] { manager_.reset(); });
    work_.reset();
    core_thread_.join();
  }

  fs::path handler_dir() const { return dir_ / "handlers"; }

  // Puts the handler library in whole (rename), so a rescan never sees half a file.
  void install_handler() {
    fs::copy_file(DEBUG_ECHO_SO, dir_ / "staged.so");
    fs::rename(dir_ / "staged.so", handler_dir() / "libdowser-handler-debug-echo.so");
  }

  fs::path refuses_later_state() const { return dir_ / "state"; }

  // Installs the refuses-later fixture; a Configuration of it.
  Configuration refuses_later() {
    fs::copy_file(FIXTURE_REFUSES_LATER, handler_dir() / "libfixture-refuses-later.so");
    Configuration configuration = echoes("");
    configuration.handler_name = "fixtureRefusesLater";
    configuration.discovery_properties = {
        {"FIXTURE_STATE_FILE", refuses_later_state().string(), {}, {}}};
    return configuration;
  }

  // Runs the refuses-later fixture until it accepted its details once.
  Configuration run_refuses_later() {
    Configuration configuration = refuses_later();
    on_core([&] {
      manager_->start();
      manager_->run(configuration);
    });
    EXPECT_TRUE(recorder_.wait_for([](const Recorder::Reports& reports) {
      return mentions(reports.failures, "the handler ended discovery: fixture: lost the device");
    }));
    // The fixture may end discovery before its start returns, and the
    // acceptance is recorded only after that: a restart must come later.
    EXPECT_TRUE(dowser::test::eventually([this] {
      std::error_code error;
      return fs::file_size(dir_ / "accepted-requests", error) > 0 && !error;
    })) << "the accepted details were never recorded";
    return configuration;
  }

  // Starts kKey's session and, before that start has run, stops it
  // (forgetting it first when `deleted`); returns the file of accepted
  // requests once another Configuration's start, queued behind both on the
  // handler's control thread, has recorded its own.
  std::string accepted_after_stopping_a_start(bool deleted) {
    install_handler();
    Configuration other = echoes("descriptions: [other]");
    other.name = "other";
    on_core([&] {
      manager_->start();
      manager_->run(echoes("descriptions: [a]"));
      if (deleted) manager_->forget(kKey);
      manager_->stop(kKey);
      manager_->run(other);
    });
    auto text = [this] {
      std::ifstream in(dir_ / "accepted-requests");
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    EXPECT_TRUE(dowser::test::eventually([&] {
      return text().find("default/other ") != std::string::npos;
    })) << text();
    return text();
  }

  // A debugEcho Configuration with an availability file of this test's own.
  Configuration echoes(const std::string& details) const {
    Configuration configuration;
    configuration.name = kKey.second;
    configuration.handler_name = "debugEcho";
    configuration.discovery_details = details;
    configuration.discovery_properties = {
        {"DEBUG_ECHO_AVAILABILITY_FILE", (dir_ / "availability.txt").string(), {}, {}}};
    return configuration;
  }

  // Runs task on the core thread, where every DiscoveryManager member must run.
  template <typename Task>
  std::invoke_result_t<Task> on_core(Task task) {
    std::packaged_task<std::invoke_result_t<Task>()> packaged(std::move(task));
    auto result = packaged.get_future();
    boost::asio::post(core_, std::move(packaged));
    if (result.wait_for(kDeadline) != std::future_status::ready)
      throw std::runtime_error("the core thread did not answer");
    return result.get();
  }

  bool wait_for_snapshot(const std::vector<std::string>& ids) {
    return recorder_.wait_for([&](const Recorder::Reports& reports) {
      return !reports.snapshots.empty() && reports.snapshots.back() == ids;
    });
  }

  const dowser::test::TempDir temp_dir_{"dowser-discovery"};  // outlives the manager
  const fs::path dir_ = temp_dir_.path();
  Recorder recorder_;
  DiscoveryOptions options_;
  boost::asio::io_context core_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ =
      boost::asio::make_work_guard(core_);
  std::unique_ptr<DiscoveryManager> manager_;
  std::thread core_thread_{[this] { core_.run(); }};
};

TEST_F(DiscoveryManagerTest, MissingHandlerIsReportedAndItsSessionStartsWhenItAppears) {
  on_core([this] {
    manager_->start();
    manager_->run(echoes("descriptions: [foo0, foo1]"));
  });
  EXPECT_TRUE(recorder_.wait_for([](const Recorder::Reports& reports) {
    return mentions(reports.failures, "no discovery handler named 'debugEcho' is loaded");
  }));
  EXPECT_THROW(on_core([this] { manager_->validate(echoes("descriptions: [foo0]")); }),
               std::runtime_error);

  install_handler();

  EXPECT_TRUE(wait_for_snapshot({"foo0", "foo1"})) << "the waiting session did not start";
  auto handlers = on_core([this] { return manager_->handlers(); });
  ASSERT_EQ(handlers.size(), 1u);
  EXPECT_EQ(handlers[0].name, "debugEcho");
  EXPECT_EQ(handlers[0].path, handler_dir() / "libdowser-handler-debug-echo.so");
}

TEST_F(DiscoveryManagerTest, ChangedDiscoveryDetailsRestartTheSession) {
  install_handler();
  on_core([this] {
    manager_->start();
    manager_->run(echoes("descriptions: [foo0]"));
  });
  ASSERT_TRUE(wait_for_snapshot({"foo0"}));
  // Told after the first report can arrive: waited for before the change,
  // which would otherwise replace the session before it was told.
  ASSERT_TRUE(
      recorder_.wait_for([](const Recorder::Reports& reports) { return reports.starts == 1; }));

  on_core([this] { manager_->run(echoes("descriptions: [bar0, bar1]")); });
  // Only a complete first snapshot of the new session drops foo0.
  EXPECT_TRUE(wait_for_snapshot({"bar0", "bar1"})) << "the session kept its old details";
  EXPECT_TRUE(recorder_.wait_for([](const Recorder::Reports& reports) {
    return reports.starts == 2;
  })) << "each version's session is told as started";
}

TEST_F(DiscoveryManagerTest, AvailabilityChangesReachTheCoreAsNewSnapshots) {
  install_handler();
  on_core([this] {
    manager_->start();
    manager_->run(echoes("descriptions: [foo0]"));
  });
  ASSERT_TRUE(wait_for_snapshot({"foo0"}));

  std::ofstream(dir_ / "availability.txt") << "OFFLINE\n";
  EXPECT_TRUE(wait_for_snapshot({}));
  std::ofstream(dir_ / "availability.txt") << "ONLINE\n";
  EXPECT_TRUE(wait_for_snapshot({"foo0"}));
  EXPECT_TRUE(recorder_.wait_for([](const Recorder::Reports& reports) {
    return reports.complete.front() && !reports.complete.back();
  })) << "the first snapshot is complete, later ones are changes";
}

// What the host leaves out of a report reaches the core (for the status
// API) as well as the log.
TEST_F(DiscoveryManagerTest, DevicesLeftOutOfReportsReachTheCore) {
  fs::copy_file(FIXTURE_REPORTS_BAD_DEVICES, handler_dir() / "libfixture-reports-bad-devices.so");
  Configuration configuration = echoes("");
  configuration.handler_name = "fixtureReportsBadDevices";
  on_core([&] {
    manager_->start();
    manager_->run(configuration);
  });
  EXPECT_TRUE(recorder_.wait_for([](const Recorder::Reports& reports) {
    return mentions(reports.report_problems,
                    "device left out of the snapshot: device \"cam-utf8\"");
  }));
}

// It is loaded: saying it is not (as before) sent operators looking for a file.
TEST_F(DiscoveryManagerTest, AHandlerWhoseInitFailsIsReportedAsSuchAndRetried) {
  fs::copy_file(FIXTURE_INIT_FAILS, handler_dir() / "libfixture-init-fails.so");
  Configuration configuration = echoes("");
  configuration.handler_name = "fixtureInitFails";
  on_core([&] {
    manager_->start();
    manager_->run(configuration);
  });
  const std::string why =
      "handler fixtureInitFails is loaded but init failed (status 1): fixture: init always fails";
  EXPECT_TRUE(recorder_.wait_for([&](const Recorder::Reports& reports) {
    return mentions(reports.failures, why + " (retrying in");
  }));
  try {
    on_core([&] { manager_->validate(configuration); });
    ADD_FAILURE() << "validate should have failed";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(e.what(), why);
  }
}

// DOWSER_ERR_INVALID_ARGUMENT from start_discovery means bad details: only
// a new version of the Configuration can change that, so no retry.
TEST_F(DiscoveryManagerTest, DetailsTheHandlerRefusesAtStartAreRefusedNotRetried) {
  install_handler();
  on_core([this] {
    manager_->start();
    manager_->run(echoes("descriptions: 5"));
  });
  EXPECT_TRUE(recorder_.wait_for([](const Recorder::Reports& reports) {
    return mentions(reports.refusals, "start_discovery failed (status 2)");
  }));
  EXPECT_TRUE(recorder_.wait_for([](const Recorder::Reports& reports) {
    return reports.failures.empty() && reports.refusals.size() == 1;
  })) << "refused once, not retried";
  EXPECT_TRUE(recorder_.wait_for([](const Recorder::Reports& reports) {
    return reports.starts == 0;
  })) << "a refused session never started";
}

// A handler that reports its devices (an empty list when they went) and
// then ends the session: the list still counts.
TEST_F(DiscoveryManagerTest, DevicesReportedJustBeforeAnErrorAreDelivered) {
  Configuration configuration = refuses_later();
  configuration.discovery_properties.push_back({"FIXTURE_REPORT_DEVICE", "dev-a", {}, {}});
  const fs::path ended = refuses_later_state().string() + ".ended";
  // The core thread waits until the handler has reported and ended the
  // session, so that both reach it as one event (its retries report nothing).
  on_core([&] {
    manager_->start();
    manager_->run(configuration);
    EXPECT_TRUE(dowser::test::eventually([&] { return fs::exists(ended); }));
  });
  EXPECT_TRUE(recorder_.wait_for([](const Recorder::Reports& reports) {
    return mentions(reports.failures, "the handler ended discovery: fixture: lost the device");
  }));
  EXPECT_TRUE(recorder_.wait_for([](const Recorder::Reports& reports) {
    return !reports.snapshots.empty() &&
           reports.snapshots.front() == std::vector<std::string>{"dev-a"};
  })) << "the devices reported before the error were dropped";
}

// A validation that fails for a passing reason is no refusal: the
// Configuration would otherwise stay refused until it is edited.
TEST_F(DiscoveryManagerTest, AValidationThatFailsWithoutRefusingDoesNotRefuse) {
  const Configuration configuration = refuses_later();
  std::ofstream(refuses_later_state()) << "busy";
  const dowser::test::LogCapture log;
  on_core([&] {
    manager_->start();
    EXPECT_NO_THROW(manager_->validate(configuration));
  });
  EXPECT_NE(log.text().find("could not check the discovery details"), std::string::npos)
      << log.text();
  EXPECT_NE(log.text().find("fixture: too busy to validate"), std::string::npos) << log.text();
}

// The refuses-later fixture accepts its details and soon ends with an
// error; from when the state file says so, it refuses them.
const char* const kRefusal = "fixture: refuses these details now";

bool retried_refusals_only(const Recorder::Reports& reports) {
  size_t retried = 0;
  for (const auto& reason : reports.failures) retried += reason.find(kRefusal) != std::string::npos;
  return retried >= 2 && reports.refusals.empty();
}

// A refusal of details the handler accepted before, at a restart after an
// error, is a failure to retry: withdrawing the Configuration would drop its
// Instances until the manifest changes.
TEST_F(DiscoveryManagerTest, ARefusalOfDetailsAcceptedBeforeIsRetried) {
  const Configuration configuration = run_refuses_later();
  std::ofstream(refuses_later_state()) << "refuse";
  EXPECT_TRUE(recorder_.wait_for([](const Recorder::Reports& reports) {
    return mentions(reports.failures, std::string(kRefusal) + " (retrying in");
  }));
  EXPECT_TRUE(recorder_.wait_for(retried_refusals_only)) << "retried again and again";
}

// The same after a restart of dowserd: the first start of the new process
// is refused, but the details were accepted by the process before.
TEST_F(DiscoveryManagerTest, ARefusalOfDetailsAcceptedBeforeARestartIsRetried) {
  const Configuration configuration = run_refuses_later();
  std::ofstream(refuses_later_state()) << "refuse";
  restart_manager();
  on_core([&] {
    manager_->start();
    manager_->run(configuration);
  });
  EXPECT_TRUE(recorder_.wait_for(retried_refusals_only));

  // Other details it never accepted are refused as before.
  Configuration changed = configuration;
  changed.discovery_details = "something else";
  on_core([&] { manager_->run(changed); });
  EXPECT_TRUE(recorder_.wait_for(
      [](const Recorder::Reports& reports) { return mentions(reports.refusals, kRefusal); }));
}

// A start already under way when its Configuration is deleted records what
// it accepted before the deletion forgets it, not after.
TEST_F(DiscoveryManagerTest, ADeletionForgetsWhatAStartUnderWayAccepted) {
  const std::string accepted = accepted_after_stopping_a_start(true);
  EXPECT_EQ(accepted.find("default/" + kKey.second + " "), std::string::npos) << accepted;
}

// Stopped without being deleted (withdrawn: refused, or giving its resource
// name back), a Configuration keeps what a start under way accepted.
TEST_F(DiscoveryManagerTest, AWithdrawalKeepsWhatAStartUnderWayAccepted) {
  const std::string accepted = accepted_after_stopping_a_start(false);
  EXPECT_NE(accepted.find("default/" + kKey.second + " "), std::string::npos) << accepted;
}

TEST_F(DiscoveryManagerTest, ValidateUsesTheHandlersChecks) {
  install_handler();
  on_core([this] { manager_->start(); });
  EXPECT_NO_THROW(on_core([this] { manager_->validate(echoes("descriptions: [foo0]")); }));
  EXPECT_THROW(on_core([this] { manager_->validate(echoes("descriptions: 5")); }),
               dowser::host::HandlerCallError);
}

TEST_F(DiscoveryManagerTest, PropertyFromASecretIsRefusedWithoutTheKubernetesSource) {
  install_handler();
  auto configuration = echoes("descriptions: [foo0]");
  dowser::configuration::KeyReference secret;
  secret.name = "camera-credentials";
  secret.key = "password";
  configuration.discovery_properties.push_back({"PASSWORD", std::nullopt, secret, std::nullopt});
  on_core([&] {
    manager_->start();
    manager_->run(configuration);
  });
  EXPECT_TRUE(recorder_.wait_for([](const Recorder::Reports& reports) {
    return mentions(reports.failures, "discovery property PASSWORD");
  }));
}

}  // namespace
