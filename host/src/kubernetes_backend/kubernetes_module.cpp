// The module libdowser-kubernetes.so: KubernetesBackend over kube_client, and
// the factory it exports (everything else is hidden by kubernetes_module.map).
#include "api_probe.hpp"
#include "kube_client.hpp"
#include "kubernetes_backend.hpp"
#include "node_cleanup.hpp"

#include <cstdlib>
#include <exception>
#include <type_traits>

namespace dowser::kubernetes_backend {
namespace {

// The agents of a cluster scrub one dead node up to a tenth of the grace
// apart (node_cleanup's stagger): 30 s with the default grace.
constexpr int kDeadNodeSpreadPerGrace = 10;

// kubeconfig, else the first file of $KUBECONFIG, else in-cluster when in a pod.
kube::ClusterAccess cluster_access(const std::filesystem::path& kubeconfig) {
  std::filesystem::path path = kubeconfig;
  if (const char* variable = std::getenv("KUBECONFIG"); path.empty() && variable != nullptr) {
    const std::string files = variable;
    path = files.substr(0, files.find(':'));
  }
  if (!path.empty()) return kube::load_kubeconfig(path);
  if (std::getenv("KUBERNETES_SERVICE_HOST") != nullptr) return kube::load_in_cluster();
  throw kube::ConfigError(
      "no API server: pass --kubeconfig, set KUBECONFIG, or run in a pod (in-cluster)");
}

class Backend final : public KubernetesBackend {
 public:
  explicit Backend(BackendOptions options)
      : options_(std::move(options)),
        client_(std::make_shared<kube::KubeClient>(cluster_access(options_.kubeconfig))) {}
  ~Backend() override { stop(); }
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  std::string server() const override { return client_->access().server; }

  std::unique_ptr<store::InstanceStore> make_instance_store() override {
    return std::make_unique<store::KubeInstanceStore>(client_, options_.namespace_name);
  }

  std::unique_ptr<configuration::ConfigurationSource> make_configuration_source(
      configuration::ConfigurationSource::Events events,
      std::chrono::milliseconds event_refresh) override {
    return std::make_unique<configuration::KubeConfigurationSource>(
        *client_, options_.namespace_name, options_.node_name, std::move(events), event_refresh);
  }

  void start_api_probe(std::chrono::milliseconds interval) override {
    api_probe_ = std::make_unique<ApiProbe>(*client_, options_.node_name, interval);
    api_probe_->start();
  }

  ApiStatus api_status() const override { return api_probe_ ? api_probe_->last() : ApiStatus{}; }

  void start_node_cleaner(store::InstanceStore& store, std::chrono::milliseconds grace) override {
    node_cleaner_ = std::make_unique<node_cleanup::NodeCleaner>(
        *client_, store,
        node_cleanup::NodeCleanerOptions{
            .self = options_.node_name, .grace = grace, .spread = grace / kDeadNodeSpreadPerGrace});
    node_cleaner_->start();
  }

  void stop() override {
    if (node_cleaner_) node_cleaner_->stop_soon();  // its cut-off requests are no failures
    client_->stop();
    if (node_cleaner_) node_cleaner_->stop();
    if (api_probe_) api_probe_->stop();
  }

 private:
  const BackendOptions options_;
  const std::shared_ptr<kube::KubeClient> client_;
  std::unique_ptr<ApiProbe> api_probe_;
  std::unique_ptr<node_cleanup::NodeCleaner> node_cleaner_;
};

}  // namespace
}  // namespace dowser::kubernetes_backend

// Checked against the loader's declaration, so the two cannot drift apart.
extern "C" __attribute__((visibility("default"))) dowser::kubernetes_backend::KubernetesBackend*
dowser_kubernetes_backend_create(const dowser::kubernetes_backend::BackendOptions& options,
                                 std::string& error) {
  static_assert(std::is_same_v<decltype(dowser_kubernetes_backend_create),
                               dowser::kubernetes_backend::CreateFunction>);
  try {
    return new dowser::kubernetes_backend::Backend(options);
  } catch (const std::exception& e) {
    error = e.what();
    return nullptr;
  }
}
