// PluginManager and its DevicePluginServers against the kubelet simulator
// (the real device-plugin gRPC protocol over unix sockets in a temp dir):
// registration, ListAndWatch lists, Allocate and GetPreferredAllocation
// routed to the backend, removal, re-registration after a kubelet restart.
// The backend is a fake with a list the test sets: the manager and its
// servers are under test here, not the slot pool behind a real backend.
//
// Which thread binds each unix socket is recorded by wrapping the C library's
// bind in this executable (each call still goes to the real one): nothing
// else tells which thread did the work.
#include "device_plugin_server.hpp"
#include "device_plugins.hpp"
#include "eventually.hpp"
#include "log_capture.hpp"
#include "temp_dir.hpp"

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "deviceplugin/v1beta1/api.pb.h"

#include <dowser/kubelet_sim.hpp>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include <dirent.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

std::mutex bound_mutex;
std::map<std::string, std::thread::id> bound_by;  // unix socket path -> thread; under bound_mutex

std::optional<std::thread::id> thread_that_bound(const std::string& path) {
  const std::lock_guard lock(bound_mutex);
  auto found = bound_by.find(path);
  if (found == bound_by.end()) return std::nullopt;
  return found->second;
}

}  // namespace

extern "C" int bind(int fd, const sockaddr* address, socklen_t length) noexcept {
  using Real = int (*)(int, const sockaddr*, socklen_t);
  static const auto real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "bind"));
  if (address->sa_family == AF_UNIX) {
    const auto* unix_address = reinterpret_cast<const sockaddr_un*>(address);
    const std::lock_guard lock(bound_mutex);
    bound_by[unix_address->sun_path] = std::this_thread::get_id();
  }
  return real(fd, address, length);
}

namespace fs = std::filesystem;
using dowser::capacity::PluginDevice;
using dowser::plugins::DeviceList;
using dowser::plugins::PluginBackend;
using dowser::plugins::PluginManager;
using dowser::testkit::KubeletExit;
using dowser::testkit::KubeletSimulator;
using dowser::testkit::SimulatorStatus;

namespace {

constexpr std::chrono::seconds kDeadline{10};  // generous: waits end when their condition holds
const std::string kResource = "akri.sh/cams-a1b2c3";

DeviceList list_of(std::vector<PluginDevice> devices) {
  return std::make_shared<const std::vector<PluginDevice>>(std::move(devices));
}

// Lives on the core thread, as a real backend does.
class FakeBackend : public PluginBackend {
 public:
  DeviceList devices() override { return list; }
  // Answers each container with one variable per device id it was given.
  void allocate(const v1beta1::AllocateRequest& request,
                v1beta1::AllocateResponse& response) override {
    if (during_allocate) during_allocate();
    for (const auto& container : request.container_requests()) {
      auto* answer = response.add_container_responses();
      for (const auto& id : container.devices_ids())
        (*answer->mutable_envs())["GRANTED_" + id] = id;
    }
  }
  // Prefers the last ids offered, which the kubelet would not pick by itself.
  void preferred_allocation(const v1beta1::PreferredAllocationRequest& request,
                            v1beta1::PreferredAllocationResponse& response) override {
    for (const auto& container : request.container_requests()) {
      auto* answer = response.add_container_responses();
      const auto& ids = container.available_deviceids();
      for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
        if (answer->deviceids_size() >= container.allocation_size()) break;
        answer->add_deviceids(*it);
      }
    }
  }

  DeviceList list = list_of({{"cams-a1b2c3-0", true}, {"cams-a1b2c3-1", true}});
  std::function<void()> during_allocate;
};

using dowser::test::TempDir;

std::vector<std::pair<std::string, bool>> listed(const SimulatorStatus& status) {
  std::vector<std::pair<std::string, bool>> result;
  if (const auto* resource = status.resource(kResource))
    for (const auto& device : resource->devices) result.emplace_back(device.id, device.healthy());
  return result;
}

std::vector<std::pair<std::string, bool>> expected(const DeviceList& list) {
  std::vector<std::pair<std::string, bool>> result;
  for (const auto& device : *list) result.emplace_back(device.id, device.healthy);
  return result;
}

dowser::testkit::KubeletSimulatorConfig kubelet_config(const fs::path& dir) {
  dowser::testkit::KubeletSimulatorConfig config;
  config.device_plugin_dir = dir / "device-plugins";
  config.podresources_socket = dir / "pod-resources" / "kubelet.sock";
  return config;
}

// Runs task on the core thread, where every PluginManager member must run.
template <typename Task>
std::invoke_result_t<Task> run_on_core(boost::asio::io_context& core, Task task) {
  std::packaged_task<std::invoke_result_t<Task>()> packaged(std::move(task));
  auto result = packaged.get_future();
  boost::asio::post(core, std::move(packaged));
  if (result.wait_for(kDeadline) != std::future_status::ready)
    throw std::runtime_error("the core thread did not answer");
  return result.get();
}

// A PluginManager, started, on a core thread of its own.
struct StandaloneManager {
  explicit StandaloneManager(
      const fs::path& kubelet_dir,
      std::chrono::milliseconds register_timeout = std::chrono::seconds(15)) {
    on_core([&] {
      dowser::plugins::PluginManagerOptions options;
      options.kubelet_dir = kubelet_dir;
      options.register_timeout = register_timeout;
      manager = std::make_unique<PluginManager>(core, options);
      manager->start();
    });
  }
  ~StandaloneManager() {
    on_core([this] { manager.reset(); });
    work.reset();
    core_thread.join();
  }
  StandaloneManager(const StandaloneManager&) = delete;
  StandaloneManager& operator=(const StandaloneManager&) = delete;

  template <typename Task>
  std::invoke_result_t<Task> on_core(Task task) {
    return run_on_core(core, std::move(task));
  }

  boost::asio::io_context core;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work =
      boost::asio::make_work_guard(core);
  std::thread core_thread{[this] { core.run(); }};
  FakeBackend backend;
  std::unique_ptr<PluginManager> manager;
};

class PluginManagerTest : public ::testing::Test {
 protected:
  PluginManagerTest() {
    on_core([this] {
      manager_->set_registration_observer(
          [this](const std::string& resource, const dowser::plugins::PluginStats& stats) {
            if (resource != kResource || !stats.registered) return;
            auto socket = manager_->stats(resource)->socket_name;
            {
              std::lock_guard lock(mutex_);
              registered_with_.push_back(std::move(socket));
            }
            registered_.notify_all();
          });
    });
  }

  const fs::path& plugin_dir() const { return kubelet_.config().device_plugin_dir; }

  template <typename Task>
  std::invoke_result_t<Task> on_core(Task task) {
    return node_.on_core(std::move(task));
  }

  bool wait_for(const std::function<bool(const SimulatorStatus&)>& condition) {
    return kubelet_.wait_for(condition, kDeadline);
  }

  // Waits until the kubelet has accepted `count` registrations of the plugin
  // (the kubelet streams lists before it answers Register).
  std::vector<std::string> wait_registered(size_t count) {
    std::unique_lock lock(mutex_);
    registered_.wait_for(lock, kDeadline, [&] { return registered_with_.size() >= count; });
    return registered_with_;
  }

  // Adds the plugin and waits until the kubelet streams its first list and
  // the plugin has its answer to Register.
  void add_and_wait() {
    on_core([this] { manager_->add(kResource, backend_); });
    ASSERT_TRUE(wait_for([](const SimulatorStatus& status) {
      const auto* resource = status.resource(kResource);
      return resource && resource->streaming && !resource->devices.empty();
    }));
    ASSERT_EQ(wait_registered(1).size(), 1u);
  }

  TempDir dir_;
  KubeletSimulator kubelet_{kubelet_config(dir_.path())};
  std::mutex mutex_;  // before the manager: its observer uses what follows until it goes
  std::condition_variable registered_;
  std::vector<std::string> registered_with_;  // the socket of each accepted registration
  StandaloneManager node_{plugin_dir()};
  std::unique_ptr<PluginManager>& manager_ = node_.manager;
  FakeBackend& backend_ = node_.backend;  // touched on the core thread only, once served
};

TEST_F(PluginManagerTest, ListAndWatchSendsTheListAndANewerOneAfterChanged) {
  ASSERT_NO_FATAL_FAILURE(add_and_wait());
  auto first = expected(on_core([this] { return backend_.list; }));
  EXPECT_TRUE(wait_for([&](const SimulatorStatus& status) { return listed(status) == first; }));

  auto newer =
      list_of({{"cams-a1b2c3-0", true}, {"cams-a1b2c3-1", false}, {"cams-a1b2c3-2", true}});
  on_core([&] {
    backend_.list = newer;
    manager_->changed(kResource);
  });
  EXPECT_TRUE(wait_for([&](const SimulatorStatus& status) {
    return listed(status) == expected(newer);
  })) << "the kubelet never saw the list offered after changed()";

  auto stats = on_core([this] { return manager_->stats(kResource); });
  ASSERT_TRUE(stats);
  EXPECT_TRUE(stats->registered);
  EXPECT_EQ(stats->registrations, 1u);
  EXPECT_EQ(stats->socket_name, kubelet_.status().resource(kResource)->endpoint);
}

// A short list offered for prompt delivery is sent at once from the core
// thread, a long one by the publisher's thread, which serves every plugin in
// turn. A short list offered
// while the publisher still builds a long one of the same plugin must follow
// it, or the kubelet would end with the older list. The publisher is given
// another plugin's long list first: once that one is written, it is building
// ours (50,000 devices take milliseconds), and the short list is offered then.
// A third long list, queued behind, tells when the publisher is done.
TEST_F(PluginManagerTest, AShortListOfferedWhileALongOneIsBuiltIsSentAfterIt) {
  ASSERT_NO_FATAL_FAILURE(add_and_wait());
  const std::string other = "akri.sh/other-d4e5f6";
  FakeBackend other_backend;
  on_core([&] { manager_->add(other, other_backend); });
  ASSERT_TRUE(wait_for([&](const SimulatorStatus& status) {
    const auto* resource = status.resource(other);
    return resource && resource->streaming && !resource->devices.empty();
  }));
  auto long_list = [](const std::string& prefix) {
    constexpr int kDevices = 50'000;
    std::vector<PluginDevice> many;
    many.reserve(kDevices);
    for (int i = 0; i < kDevices; ++i) many.push_back({prefix + std::to_string(i), true});
    return list_of(std::move(many));
  };
  auto lists_sent = [this](const std::string& resource) {
    return on_core([&] { return manager_->stats(resource)->lists_sent; });
  };
  const auto other_sent = lists_sent(other);
  on_core([&] {
    other_backend.list = long_list("other-");
    manager_->changed(other);
    backend_.list = long_list("cams-a1b2c3-");
    manager_->changed(kResource);
  });
  const auto give_up = std::chrono::steady_clock::now() + kDeadline;
  while (lists_sent(other) == other_sent && std::chrono::steady_clock::now() < give_up) {
  }
  const auto newest = list_of({{"cams-a1b2c3-7", false}});
  on_core([&] {
    backend_.list = newest;
    manager_->changed(kResource, dowser::plugins::ListDelivery::prompt);
    other_backend.list = long_list("later-");
    manager_->changed(other);
  });
  ASSERT_TRUE(wait_for([&](const SimulatorStatus& status) {
    const auto* resource = status.resource(other);
    return resource && !resource->devices.empty() && resource->devices[0].id == "later-0";
  })) << "the publisher never wrote the last long list";
  // Nothing of ours is queued any more: once the kubelet has every list
  // written, the last it got must be the newest.
  const auto written = lists_sent(kResource);
  EXPECT_TRUE(wait_for([&](const SimulatorStatus& status) {
    return status.resource(kResource)->lists_received >= written;
  }));
  const auto last = listed(kubelet_.status());
  EXPECT_TRUE(last == expected(newest))
      << "the kubelet ended with a list of " << last.size() << " devices, not the newest";
  on_core([&] { manager_->remove(other); });  // before its backend goes
}

TEST_F(PluginManagerTest, AllocateAndPreferenceAreTheBackends) {
  ASSERT_NO_FATAL_FAILURE(add_and_wait());
  auto result = kubelet_.allocate(kResource, {"default", "pod-a"}, "main", 1);
  ASSERT_TRUE(result.ok()) << result.status.error_message();
  EXPECT_EQ(result.device_ids, std::vector<std::string>{"cams-a1b2c3-1"})
      << "the kubelet took the id GetPreferredAllocation preferred";
  ASSERT_EQ(result.response.container_responses_size(), 1);
  EXPECT_EQ(result.response.container_responses(0).envs().at("GRANTED_cams-a1b2c3-1"),
            "cams-a1b2c3-1");
}

// A list changed while an Allocate is answered is sent after the reply, not
// alongside it. The backend changes its list in the middle of Allocate and
// then waits for the test, which sees no new list until it lets it finish.
TEST_F(PluginManagerTest, AListChangedDuringAnAllocateFollowsItsReply) {
  ASSERT_NO_FATAL_FAILURE(add_and_wait());
  auto newer = list_of({{"cams-a1b2c3-0", false}, {"cams-a1b2c3-1", true}});
  auto is_newer = [&](const SimulatorStatus& status) { return listed(status) == expected(newer); };
  std::promise<void> changed, finish;
  std::shared_future<void> finishing = finish.get_future().share();
  on_core([&] {
    backend_.during_allocate = [&, finishing] {
      backend_.list = newer;
      manager_->changed(kResource);
      changed.set_value();
      finishing.wait();  // the core thread, and so the reply, waits for the test
    };
  });
  auto allocation = std::async(std::launch::async, [&] {
    return kubelet_.allocate(kResource, {"default", "pod-a"}, "main", 1);
  });
  bool allocate_ran = changed.get_future().wait_for(kDeadline) == std::future_status::ready;
  // Fails within a millisecond or two when lists are not held back.
  bool sent_early = allocate_ran && kubelet_.wait_for(is_newer, std::chrono::milliseconds(300));
  finish.set_value();
  auto result = allocation.get();
  ASSERT_TRUE(allocate_ran) << "the backend's allocate never ran";
  EXPECT_FALSE(sent_early) << "the list went out while its Allocate was still open";
  ASSERT_TRUE(result.ok()) << result.status.error_message();
  EXPECT_TRUE(wait_for(is_newer)) << "the held list was never sent";
}

// Binding a socket makes an inode, hundreds of microseconds on a slow disk,
// during which the core thread would answer no Allocate: it is done on the
// plugins' lifecycle thread.
TEST_F(PluginManagerTest, APluginsSocketIsBoundOffTheCoreThread) {
  ASSERT_NO_FATAL_FAILURE(add_and_wait());
  auto socket = plugin_dir() / kubelet_.status().resource(kResource)->endpoint;
  auto thread = thread_that_bound(socket.string());
  ASSERT_TRUE(thread.has_value()) << socket << " was not bound through bind()";
  EXPECT_NE(*thread, node_.core_thread.get_id());
}

// A kubelet that comes (kubelet.sock created) while a new plugin's server is
// still being built: the plugin registers once, when its server is up, and
// the kubelet streams from it.
TEST_F(PluginManagerTest, AKubeletThatComesWhileTheServerStartsGetsOneRegistration) {
  on_core([this] {
    manager_->add(kResource, backend_);
    manager_->kubelet_dir_changed("kubelet.sock", true);
  });
  ASSERT_EQ(wait_registered(1).size(), 1u) << "the plugin never registered";
  EXPECT_TRUE(wait_for([](const SimulatorStatus& status) {
    const auto* resource = status.resource(kResource);
    return resource && resource->streaming && !resource->devices.empty();
  }));
  const auto stats = on_core([this] { return *manager_->stats(kResource); });
  EXPECT_EQ(stats.registrations, 1u);
  EXPECT_EQ(kubelet_.status().resource(kResource)->endpoint, stats.socket_name);
}

TEST_F(PluginManagerTest, RemoveEndsTheStreamAndDeletesTheSocket) {
  ASSERT_NO_FATAL_FAILURE(add_and_wait());
  auto socket = plugin_dir() / kubelet_.status().resource(kResource)->endpoint;
  ASSERT_TRUE(fs::exists(socket));

  on_core([this] { manager_->remove(kResource); });
  EXPECT_FALSE(fs::exists(socket));
  EXPECT_FALSE(on_core([this] { return manager_->has(kResource); }));
  EXPECT_TRUE(wait_for([](const SimulatorStatus& status) {
    const auto* resource = status.resource(kResource);
    return resource && !resource->streaming;
  }));
}

// A kubelet restart, clean or after a crash (then the old kubelet.sock is
// still there when the plugin's socket goes, and a Register sent then, if the
// deletion is handled that soon, is refused): the plugin registers again, on
// a socket no kubelet was given before, and the kubelet gets its list there.
class PluginManagerRestartTest : public PluginManagerTest,
                                 public ::testing::WithParamInterface<KubeletExit> {};

TEST_P(PluginManagerRestartTest, AKubeletRestartBringsAFreshRegistration) {
  ASSERT_NO_FATAL_FAILURE(add_and_wait());
  auto before = kubelet_.status().resource(kResource)->endpoint;

  kubelet_.restart(GetParam());

  auto sockets = wait_registered(2);
  ASSERT_GE(sockets.size(), 2u) << "the plugin did not register again";
  EXPECT_EQ(sockets.front(), before);
  EXPECT_NE(sockets.back(), before) << "a registration after a restart uses a fresh socket";
  EXPECT_TRUE(wait_for([&](const SimulatorStatus& status) {
    const auto* resource = status.resource(kResource);
    return resource && resource->streaming && resource->endpoint != before &&
           !resource->devices.empty();
  })) << "the kubelet gets no list on a new socket";
}

INSTANTIATE_TEST_SUITE_P(Exits, PluginManagerRestartTest,
                         ::testing::Values(KubeletExit::clean, KubeletExit::crash),
                         [](const auto& info) {
                           return info.param == KubeletExit::clean ? "Clean" : "AfterACrash";
                         });

// A plugin served and streaming, and a file kept open in the kubelet
// directory, as dowserd keeps its lock file: it keeps a deleted directory in
// use, so the kernel does not say the directory was deleted until the file
// is closed. Tests delete the directory and make it anew with a kubelet.
class PluginManagerKubeletDir : public ::testing::Test {
 protected:
  void SetUp() override {
    node_.on_core([this] {
      node_.manager->set_directory_observer([this] { observed_ = true; });
      node_.manager->set_registration_observer(
          [this](const std::string&, const dowser::plugins::PluginStats& stats) {
            if (stats.registered && deleting_ && !observed_) ++registered_too_soon_;
          });
      node_.manager->add(kResource, node_.backend);
    });
    ASSERT_TRUE(kubelet_->wait_for(streaming, kDeadline));
    // The kubelet may stream before the manager heard its Register answered.
    ASSERT_TRUE(dowser::test::eventually([this] {
      return node_.on_core([this] { return node_.manager->stats(kResource)->registered; });
    }));
    lock_file_.open(plugin_dir_ / "dowserd.lock");
  }

  static bool streaming(const SimulatorStatus& status) {
    const auto* resource = status.resource(kResource);
    return resource && resource->streaming && !resource->devices.empty();
  }
  void start_kubelet_anew() {
    kubelet_ = std::make_unique<KubeletSimulator>(kubelet_config(dir_.path()));
  }

  dowser::test::LogCapture log_;  // first made, last gone: the manager's threads log
  TempDir dir_;
  std::unique_ptr<KubeletSimulator> kubelet_ =
      std::make_unique<KubeletSimulator>(kubelet_config(dir_.path()));
  const fs::path plugin_dir_ = kubelet_->config().device_plugin_dir;
  StandaloneManager node_{plugin_dir_};
  std::atomic<bool> observed_ = false;  // the directory observer ran
  std::atomic<bool> deleting_ = false;  // the test began deleting the directory
  // Registrations done since, before the directory observer ran.
  std::atomic<int> registered_too_soon_ = 0;
  std::ofstream lock_file_;
};

// A kubelet reinstall (or kubeadm reset) deletes the whole directory and
// makes it again: the plugin is served and registered in the new one.
TEST_F(PluginManagerKubeletDir, ADeletedAndRecreatedDirectoryIsServedAgain) {
  deleting_ = true;
  kubelet_.reset();
  // The manager serves a fresh socket for each one deleted, so the removal
  // may find the directory not empty: tried again, as `rm -rf` would be.
  std::error_code not_empty;
  for (int attempt = 0; attempt < 100 && fs::exists(plugin_dir_); ++attempt)
    fs::remove_all(plugin_dir_, not_empty);
  ASSERT_FALSE(fs::exists(plugin_dir_)) << not_empty.message();
  start_kubelet_anew();
  EXPECT_TRUE(kubelet_->wait_for(streaming, kDeadline)) << "not registered in the new directory";
  EXPECT_TRUE(observed_);
  EXPECT_EQ(registered_too_soon_, 0) << "registered before the manager took the directory up:\n"
                                     << log_.text();
}

// The same, with the socket's deletion handled only once the directory is
// gone (the core thread was busy), and a plugin that could not be served
// anew then would try again 250 ms later (a file standing in the directory's
// place makes it fail here; under load a bind racing the removal did). By
// then the directory is back, but the watcher looks for it only a second
// after the old one went. The plugin must not be served and registered in it
// before the manager took it up.
TEST_F(PluginManagerKubeletDir, ADirectoryMadeAnewIsNotServedBeforeItIsTakenUp) {
  std::promise<void> release;
  boost::asio::post(node_.core, [done = release.get_future()] { done.wait(); });
  deleting_ = true;
  kubelet_.reset();
  fs::remove_all(plugin_dir_);
  std::ofstream(plugin_dir_) << "not a directory\n";
  release.set_value();
  ASSERT_TRUE(dowser::test::eventually(
      [&] { return log_.text().find("was deleted or moved away") != std::string::npos; }));
  fs::remove(plugin_dir_);
  start_kubelet_anew();

  ASSERT_TRUE(kubelet_->wait_for(streaming, kDeadline)) << "not registered in the new directory";
  EXPECT_EQ(registered_too_soon_, 0) << "registered before the manager took the directory up:\n"
                                     << log_.text();
}

// A kubelet restart deletes the plugin's socket, then creates kubelet.sock.
// When the core thread handles the deletion late, the new kubelet.sock is
// there already and the plugin registers with it; the creation, handled
// after that, must not register it again: that would replace the socket the
// kubelet streams from and leave the resource unhealthy meanwhile. The
// creation is replayed by hand: the kernel cannot be made to deliver it late.
TEST_F(PluginManagerTest, AKubeletSeenOnceIsNotRegisteredWithTwice) {
  ASSERT_NO_FATAL_FAILURE(add_and_wait());
  auto before = kubelet_.status().resource(kResource)->endpoint;
  kubelet_.restart();
  ASSERT_EQ(wait_registered(2).size(), 2u) << "the plugin did not register again";
  ASSERT_TRUE(wait_for([&](const SimulatorStatus& status) {
    const auto* resource = status.resource(kResource);
    return resource && resource->streaming && resource->endpoint != before;
  }));
  auto serving = on_core([this] { return manager_->stats(kResource)->socket_name; });

  auto after = on_core([this] {
    manager_->kubelet_dir_changed("kubelet.sock", true);
    return *manager_->stats(kResource);
  });

  EXPECT_EQ(after.socket_name, serving) << "the plugin left the socket the kubelet streams from";
  EXPECT_TRUE(after.registered) << "the plugin started registering again";
  EXPECT_EQ(after.registrations, 2u);
}

// The kubelet took the plugin's socket but answered Register too late: the
// retry must offer a new socket, since the kubelet takes no second Register
// on one path.
TEST(PluginManagerRegistration, ARegisterThatTimedOutIsRetriedOnANewSocket) {
  TempDir dir;
  KubeletSimulator kubelet(kubelet_config(dir.path()));
  kubelet.answer_registrations_late(std::chrono::seconds(3), 1);
  StandaloneManager node(kubelet.config().device_plugin_dir, std::chrono::seconds(1));
  node.on_core([&] { node.manager->add(kResource, node.backend); });
  std::string first;
  ASSERT_TRUE(kubelet.wait_for(
      [&](const SimulatorStatus& status) {
        const auto* resource = status.resource(kResource);
        if (resource) first = resource->endpoint;
        return resource != nullptr;
      },
      kDeadline))
      << "the first Register never reached the kubelet";

  ASSERT_TRUE(kubelet.wait_for(
      [&](const SimulatorStatus& status) {
        const auto* resource = status.resource(kResource);
        return resource->registrations >= 2 && resource->streaming;
      },
      kDeadline))
      << "the plugin did not register again after its Register timed out";
  EXPECT_NE(kubelet.status().resource(kResource)->endpoint, first)
      << "the retry offered the socket the kubelet already had";
  // On a busy machine a retry may time out too, and offer yet another socket.
  EXPECT_TRUE(dowser::test::eventually([&] {
    const auto stats = node.on_core([&] { return *node.manager->stats(kResource); });
    return stats.registered && stats.socket_name == kubelet.status().resource(kResource)->endpoint;
  })) << "the plugin never ended registered on the socket the kubelet has";
}

// The plugin directory cannot hold a socket for a while (a file stands where
// the directory was): the plugin says why, and is served once it can be.
TEST(PluginManagerServing, APluginThatCannotBeServedSaysWhyAndIsServedOnceItCan) {
  TempDir dir;
  fs::path kubelet_dir = dir.path() / "device-plugins";
  StandaloneManager node(kubelet_dir);
  fs::remove_all(kubelet_dir);
  std::ofstream(kubelet_dir) << "not a directory\n";
  node.on_core([&] { node.manager->add(kResource, node.backend); });
  auto stats = [&] { return *node.on_core([&] { return node.manager->stats(kResource); }); };

  EXPECT_TRUE(dowser::test::eventually([&] { return !stats().last_error.empty(); }))
      << "no error in the plugin's stats";
  EXPECT_NE(stats().last_error.find(kubelet_dir.string()), std::string::npos) << stats().last_error;
  fs::remove(kubelet_dir);
  fs::create_directories(kubelet_dir);
  EXPECT_TRUE(dowser::test::eventually([&] {
    return fs::is_socket(kubelet_dir / stats().socket_name);
  })) << "the plugin was not served once its directory was back";
}

// The longest resource name a Configuration may give, in a deep kubelet
// directory: the socket path with the whole name in it would not fit a unix
// socket address, so the name is cut short there, and the plugin registers.
TEST(PluginManagerServing, AResourceNameTooLongForASocketPathIsCutShortThere) {
  TempDir dir;
  KubeletSimulator kubelet(kubelet_config(dir.path() / std::string(30, 'k')));
  const fs::path& plugin_dir = kubelet.config().device_plugin_dir;
  const std::string resource = "akri.sh/" + std::string(56, 'c') + "-1f0893";
  ASSERT_GT((plugin_dir / (resource + "-1764900000000-0.sock")).string().size(),
            sizeof(sockaddr_un::sun_path))
      << "the whole name would fit: this test shows nothing";
  StandaloneManager node(plugin_dir);
  node.on_core([&] { node.manager->add(resource, node.backend); });
  ASSERT_TRUE(kubelet.wait_for(
      [&](const SimulatorStatus& status) {
        const auto* registered = status.resource(resource);
        return registered && registered->streaming;
      },
      kDeadline))
      << node.on_core([&] { return node.manager->stats(resource)->last_error; });
  const std::string socket =
      node.on_core([&] { return node.manager->stats(resource)->socket_name; });
  EXPECT_EQ(socket.rfind("akri.sh_ccc", 0), 0u) << socket;
  EXPECT_LT((plugin_dir / socket).string().size(), sizeof(sockaddr_un::sun_path)) << socket;
  EXPECT_TRUE(dowser::plugins::is_plugin_socket_name(socket)) << socket;
}

// gRPC says why it cannot listen only on its own stderr lines: the plugin's
// error must carry the reason itself.
TEST(PluginManagerServing, APluginWhoseSocketCannotBeBoundSaysWhatTheKernelSaid) {
  TempDir dir;
  const fs::path kubelet_dir = dir.path() / std::string(100, 'd');  // too long for sun_path
  StandaloneManager node(kubelet_dir);
  node.on_core([&] { node.manager->add(kResource, node.backend); });
  auto stats = [&] { return *node.on_core([&] { return node.manager->stats(kResource); }); };
  EXPECT_TRUE(dowser::test::eventually([&] { return !stats().last_error.empty(); }));
  EXPECT_NE(stats().last_error.find(": the path is too long for a unix socket"), std::string::npos)
      << stats().last_error;
}

// A kubelet that takes Register calls and never answers them; it only sees
// them cancelled.
class SilentKubelet final : public v1beta1::Registration::CallbackService {
 public:
  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext*, const v1beta1::RegisterRequest*,
                                     v1beta1::Empty*) override {
    note([this] { ++received_; });
    return new Held(*this);
  }
  bool wait_until(const std::function<bool(int received, int cancelled)>& condition) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kDeadline, [&] { return condition(received_, cancelled_); });
  }

 private:
  struct Held final : grpc::ServerUnaryReactor {
    explicit Held(SilentKubelet& kubelet) : kubelet_(kubelet) {}
    void OnCancel() override {
      kubelet_.note([this] { ++kubelet_.cancelled_; });
      Finish(grpc::Status::CANCELLED);
    }
    void OnDone() override { delete this; }
    SilentKubelet& kubelet_;
  };
  template <typename Change>
  void note(Change change) {
    {
      std::lock_guard lock(mutex_);
      change();
    }
    changed_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  int received_ = 0;
  int cancelled_ = 0;
};

// A daemon stopping while a Register call is unanswered: the manager ends the
// call instead of leaving it to its deadline (15 s), and lets go of its
// channel only after the call is gone (gRPC 1.51 frees its shared callback
// queue twice when its last user goes away on one of its own threads).
// A unix socket file at path; listening (kept open, returned) or dead (closed
// without unlinking, as a killed process leaves it).
int make_socket_file(const fs::path& path, bool listening) {
  const auto address = dowser::plugins::unix_socket_address(path);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&*address), sizeof *address), 0);
  if (listening) {
    EXPECT_EQ(::listen(fd, 1), 0);
    return fd;
  }
  ::close(fd);
  return -1;
}

// After a SIGKILL the plugin sockets stay in the kubelet directory (nothing
// removed them); the next start removes those, and nothing else.
TEST(PluginManagerStart, RemovesDeadPluginSocketsAndNothingElse) {
  TempDir dir;
  const fs::path kubelet_dir = dir.path() / "dp";
  fs::create_directories(kubelet_dir);
  const auto dead = kubelet_dir / "akri.sh_cams-1700000000000-3.sock";
  const auto live = kubelet_dir / "akri.sh_cams-1700000000001-4.sock";
  const auto foreign = kubelet_dir / "vendor-plugin.sock";
  const auto not_a_socket = kubelet_dir / "akri.sh_cams-1700000000002-5.sock";
  make_socket_file(dead, false);
  const int live_fd = make_socket_file(live, true);
  make_socket_file(foreign, false);
  std::ofstream(not_a_socket) << "x";
  {
    StandaloneManager node(kubelet_dir);
    EXPECT_FALSE(fs::exists(dead)) << "a dead socket of ours stays";
    EXPECT_TRUE(fs::exists(live)) << "something accepts on it";
    EXPECT_TRUE(fs::exists(foreign)) << "not named as ours";
    EXPECT_TRUE(fs::exists(not_a_socket));
  }
  ::close(live_fd);
  EXPECT_TRUE(dowser::plugins::is_plugin_socket_name("akri.sh_cams-1-2.sock"));
  EXPECT_FALSE(dowser::plugins::is_plugin_socket_name("kubelet.sock"));
  EXPECT_FALSE(dowser::plugins::is_plugin_socket_name("-1-2.sock"));
  EXPECT_FALSE(dowser::plugins::is_plugin_socket_name("a-1-x.sock"));
}

// The process's open descriptors, without the one that lists them.
std::set<int> open_fds() {
  std::set<int> fds;
  DIR* listing = ::opendir("/proc/self/fd");
  if (listing == nullptr) return fds;
  while (const dirent* entry = ::readdir(listing))
    if (entry->d_name[0] != '.') fds.insert(std::atoi(entry->d_name));
  fds.erase(::dirfd(listing));
  ::closedir(listing);
  return fds;
}

// Lowers RLIMIT_NOFILE until one fd number is left free below it, for as long
// as it lives: the next fd opened is given, the one after is refused (EMFILE).
class OneFreeDescriptor {
 public:
  OneFreeDescriptor() {
    EXPECT_EQ(::getrlimit(RLIMIT_NOFILE, &saved_), 0);
    const auto used = open_fds();
    int free_found = 0;
    rlim_t limit = 0;
    while (free_found < 2) free_found += used.count(static_cast<int>(limit++)) == 0 ? 1 : 0;
    rlimit lowered = saved_;
    lowered.rlim_cur = limit - 1;  // the second free number and above are refused
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
  }
  ~OneFreeDescriptor() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
  OneFreeDescriptor(const OneFreeDescriptor&) = delete;
  OneFreeDescriptor& operator=(const OneFreeDescriptor&) = delete;

 private:
  rlimit saved_{};
};

// The kubelet directory's watcher needs two descriptors; when the second is
// refused, start() fails saying why and leaves the first open no longer.
TEST(PluginManagerStart, AWatchThatCannotStartSaysWhyAndKeepsNoDescriptor) {
  TempDir dir;
  boost::asio::io_context core;
  PluginManager manager(core, dowser::plugins::PluginManagerOptions{.kubelet_dir = dir.path()});
  const auto before = open_fds();
  std::exception_ptr failure;
  {
    OneFreeDescriptor one_free;
    try {
      manager.start();
    } catch (...) {
      failure = std::current_exception();
    }
  }
  // Read once the limit is back: UBSan's check of the virtual call to what()
  // may need a pipe of its own.
  std::string error = "start() did not fail";
  try {
    if (failure) std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    error = e.what();
  }
  EXPECT_EQ(error, "cannot watch " + dir.path().string() + ": Too many open files");
  EXPECT_EQ(open_fds(), before);
}

TEST(PluginManagerShutdown, AStoppingManagerCancelsItsUnansweredRegistrations) {
  TempDir dir;
  fs::path kubelet_dir = dir.path() / "device-plugins";
  fs::create_directories(kubelet_dir);
  SilentKubelet kubelet;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + (kubelet_dir / "kubelet.sock").string(),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(&kubelet);
  auto server = builder.BuildAndStart();
  ASSERT_TRUE(server);

  StandaloneManager node(kubelet_dir);
  node.on_core([&] { node.manager->add(kResource, node.backend); });
  EXPECT_TRUE(kubelet.wait_until([](int received, int) { return received == 1; }));

  node.on_core([&] { node.manager.reset(); });
  EXPECT_TRUE(kubelet.wait_until([](int, int cancelled) { return cancelled == 1; }))
      << "the Register call was left to its deadline";
  server->Shutdown();
}

// dowserd's core thread stops on SIGTERM with whatever is queued on it left
// unrun, and gRPC's Shutdown waits for every callback call to be finished:
// an Allocate that arrived just before would hold the plugin's shutdown, and
// dowserd's exit, for ever. Stopping the plugin answers it.
TEST(PluginManagerShutdown, ACallTheCoreNeverRanIsAnsweredWhenThePluginStops) {
  TempDir dir;
  KubeletSimulator kubelet(kubelet_config(dir.path()));
  boost::asio::io_context core;
  auto work = boost::asio::make_work_guard(core);
  std::thread core_thread([&] { core.run(); });
  FakeBackend backend;
  std::unique_ptr<PluginManager> manager;
  run_on_core(core, [&] {
    dowser::plugins::PluginManagerOptions options;
    options.kubelet_dir = kubelet.config().device_plugin_dir;
    manager = std::make_unique<PluginManager>(core, options);
    manager->start();
    manager->add(kResource, backend);
  });
  ASSERT_TRUE(kubelet.wait_for(
      [](const SimulatorStatus& status) {
        const auto* resource = status.resource(kResource);
        return resource && resource->streaming && !resource->devices.empty();
      },
      kDeadline));
  // The core stops as dowserd's does; from here this thread is the core.
  boost::asio::post(core, [&] { core.stop(); });
  core_thread.join();

  auto allocation = std::async(std::launch::async, [&] {
    return kubelet.allocate(kResource, {"default", "pod-a"}, "main", 1);
  });
  ASSERT_TRUE(dowser::test::eventually([&] {
    return manager->stats(kResource)->calls_waiting == 1;
  })) << "the call never reached the plugin";

  std::promise<void> destroyed;
  std::thread destroying([&] {
    manager.reset();
    destroyed.set_value();
  });
  if (destroyed.get_future().wait_for(kDeadline) != std::future_status::ready) {
    ADD_FAILURE() << "stopping the plugin waits for a call the core will never run";
    std::_Exit(1);  // the manager's threads cannot be joined: nothing else ends the test
  }
  destroying.join();
  auto result = allocation.get();
  EXPECT_FALSE(result.ok());
}

}  // namespace
