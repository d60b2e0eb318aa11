// Daemon start-up failing half-way against the test API server: what it
// started must be stopped before what it uses goes.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>

#include "apiserver_peer.hpp"
#include "daemon.hpp"
#include "instance_store.hpp"
#include "kubernetes_backend.hpp"
#include "temp_dir.hpp"

namespace dowser::daemon {
namespace {

using kubernetes_backend::KubernetesBackend;

// The real Kubernetes module's backend, watched for one thing: whether the
// Instance store it was given for its node cleaner is destroyed before the
// backend is stopped (its contract: the store outlives stop()). Everything
// else is the module's own doing.
class WatchedBackend : public KubernetesBackend {
 public:
  WatchedBackend(std::unique_ptr<KubernetesBackend> real, kube::ClusterAccess access)
      : real_(std::move(real)), access_(std::move(access)) {}

  // Whether a store was destroyed while this backend still ran.
  bool store_outlived_by_its_cleaner() const { return store_outlived_; }

  std::string server() const override { return real_->server(); }
  std::unique_ptr<store::InstanceStore> make_instance_store() override {
    return std::make_unique<Store>(std::make_shared<kube::KubeClient>(access_), *this);
  }
  std::unique_ptr<configuration::ConfigurationSource> make_configuration_source(
      configuration::ConfigurationSource::Events events,
      std::chrono::milliseconds event_refresh) override {
    return real_->make_configuration_source(std::move(events), event_refresh);
  }
  void start_api_probe(std::chrono::milliseconds interval) override {
    real_->start_api_probe(interval);
  }
  kubernetes_backend::ApiStatus api_status() const override { return real_->api_status(); }
  void start_node_cleaner(store::InstanceStore& store, std::chrono::milliseconds grace) override {
    running_ = true;
    real_->start_node_cleaner(store, grace);
  }
  void stop() override {
    real_->stop();
    running_ = false;
  }

 private:
  // The Kubernetes store, noting when it goes.
  class Store : public store::KubeInstanceStore {
   public:
    Store(std::shared_ptr<kube::KubeClient> client, WatchedBackend& backend)
        : KubeInstanceStore(std::move(client)), backend_(backend) {}
    ~Store() override {
      if (backend_.running_) backend_.store_outlived_ = true;
    }
    Store(const Store&) = delete;
    Store& operator=(const Store&) = delete;

   private:
    WatchedBackend& backend_;
  };

  std::unique_ptr<KubernetesBackend> real_;
  kube::ClusterAccess access_;
  std::atomic<bool> running_{false};
  std::atomic<bool> store_outlived_{false};
};

// A kubelet directory that cannot be made (a file stands there) fails the
// daemon's start-up after the node cleaner has started: its destruction must
// stop the cleaner before the store it cleans is destroyed (else the
// cleaner's thread goes on using a destroyed store until the process exits).
// (An API server that does not list Instances no longer fails the start:
// dowserd serves on and lists them again.)
TEST(DaemonShutdown, AFailedStartStopsTheNodeCleanerBeforeTheStoreGoes) {
  kube::testing::TestApiServer server;
  const test::TempDir directory;
  for (const char* name : {"configurations", "handlers", "state"})
    std::filesystem::create_directories(directory.path() / name);
  std::ofstream(directory.path() / "kubelet") << "not a directory\n";
  auto backend = std::make_shared<WatchedBackend>(
      kubernetes_backend::load(KUBERNETES_MODULE, {server.kubeconfig(), "", "node-a"}),
      server.access());

  DaemonOptions options;
  options.node_name = "node-a";
  options.config_dir = directory.path() / "configurations";
  options.handler_dir = directory.path() / "handlers";
  options.state_dir = directory.path() / "state";
  options.kubelet_dir = directory.path() / "kubelet";
  options.http_listen = "";
  options.store = StoreKind::kubernetes;
  options.kubernetes = backend;
  {
    Daemon daemon(options);
    try {
      daemon.run();
      ADD_FAILURE() << "the daemon started without its kubelet directory";
    } catch (const std::filesystem::filesystem_error& error) {
      EXPECT_NE(std::string(error.what()).find("kubelet"), std::string::npos) << error.what();
    }
  }
  EXPECT_FALSE(backend->store_outlived_by_its_cleaner())
      << "the Instance store was destroyed while the node cleaner still ran";
}

}  // namespace
}  // namespace dowser::daemon
