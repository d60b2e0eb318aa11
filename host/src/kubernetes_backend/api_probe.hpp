// ApiProbe: whether the Kubernetes API server answers, for /readyz, checked
// on its own thread so that readiness never blocks the core on the network.
#pragma once

#include "kube_client.hpp"
#include "kubernetes_backend.hpp"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace dowser::kubernetes_backend {

class ApiProbe {
 public:
  // Reads this node's Node object every interval: any answer but a refusal
  // of our credentials shows the server reachable (404 included).
  ApiProbe(kube::KubeClient& client, std::string node, std::chrono::milliseconds interval);
  ~ApiProbe();  // stops
  ApiProbe(const ApiProbe&) = delete;
  ApiProbe& operator=(const ApiProbe&) = delete;

  void start();
  void stop();
  ApiStatus last() const;

 private:
  void run();
  ApiStatus probe();

  kube::KubeClient& client_;
  const std::string node_;
  const std::chrono::milliseconds interval_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  ApiStatus last_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dowser::kubernetes_backend
