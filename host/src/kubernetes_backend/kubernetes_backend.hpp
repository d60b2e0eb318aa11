// kubernetes_backend: dowserd's Kubernetes side (the API server as the
// Instance store and as the Configuration source, dead-node cleanup, the API
// probe) behind one interface. It is built as the module
// libdowser-kubernetes.so, which dowserd loads only when the cluster is used:
// libcurl and the TLS, Kerberos and LDAP libraries it pulls in then stay out
// of a dowserd that never talks to an API server (about 4 MB resident).
//
// An internal plugin, not the handler C ABI: the module comes from the same
// build, compiler and standard library as dowserd, so C++ objects
// (std::string, std::function, unique_ptr, virtual calls) cross it safely.
// Exceptions do not: the factory reports errors as text.
#pragma once

#include "configuration.hpp"
#include "instance_store.hpp"

#include <chrono>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

namespace dowser::kubernetes_backend {

struct BackendOptions {
  // The kubeconfig file; empty: the first file of $KUBECONFIG, else in-cluster.
  std::filesystem::path kubeconfig;
  std::string namespace_name;  // the only namespace read; empty: all
  std::string node_name;       // this node
};

// Whether the API server answers, for /readyz.
struct ApiStatus {
  bool ok = false;
  std::string detail = "not checked yet";
};

// One API server. Thread-safe as the objects it makes are.
class KubernetesBackend {
 public:
  KubernetesBackend() = default;
  virtual ~KubernetesBackend() = default;  // stops
  KubernetesBackend(const KubernetesBackend&) = delete;
  KubernetesBackend& operator=(const KubernetesBackend&) = delete;

  virtual std::string server() const = 0;  // "https://host:port"
  virtual std::unique_ptr<store::InstanceStore> make_instance_store() = 0;
  // Standing problems' Events are posted again about every event_refresh.
  virtual std::unique_ptr<configuration::ConfigurationSource> make_configuration_source(
      configuration::ConfigurationSource::Events events,
      std::chrono::milliseconds event_refresh) = 0;
  // Reads this node's Node object every interval on its own thread; any
  // answer but a refusal of our credentials shows the server reachable.
  virtual void start_api_probe(std::chrono::milliseconds interval) = 0;
  virtual ApiStatus api_status() const = 0;  // the probe's last answer
  // Scrubs the claims of nodes deleted or NotReady for longer than grace from
  // store, on its own thread. store must outlive stop().
  virtual void start_node_cleaner(store::InstanceStore& store, std::chrono::milliseconds grace) = 0;
  // For a shutdown, idempotent: ends every request to the API server, also
  // those of the stores and sources it made (they fail as stopped from then
  // on, see kube::KubeClient::stop), then stops the probe and the cleaner.
  virtual void stop() = 0;
};

// The module cannot be loaded, or the API server cannot be configured (no or
// bad kubeconfig); the message says which file and what is wrong.
class BackendError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where dowserd finds the module: ../lib/dowser/libdowser-kubernetes.so from
// the directory of the running executable (the build tree, and /usr).
std::filesystem::path default_module_path();

// Loads the module (kept loaded until the process exits) and makes a backend
// for the API server options name. Throws BackendError.
std::unique_ptr<KubernetesBackend> load(const std::filesystem::path& module,
                                        const BackendOptions& options);

// The module's only export: a new backend, or nullptr with the reason in error.
using CreateFunction = KubernetesBackend*(const BackendOptions& options, std::string& error);
inline constexpr const char* kCreateSymbol = "dowser_kubernetes_backend_create";

}  // namespace dowser::kubernetes_backend
