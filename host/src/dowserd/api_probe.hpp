// ApiProbe: whether the Kubernetes API server answers, for /readyz, checked
// on its own thread so that readiness never blocks the core on the network.
#pragma once

#include "kube_client.hpp"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace dowser::daemon {

class ApiProbe {
 public:
  struct Result {
    bool ok = false;
    std::string detail;
  };

  // Reads this node's Node object every interval: any answer but a refusal
  // of our credentials shows the server reachable (404 included).
  ApiProbe(kube::KubeClient& client, std::string node, std::chrono::milliseconds interval);
  ~ApiProbe();  // stops
  ApiProbe(const ApiProbe&) = delete;
  ApiProbe& operator=(const ApiProbe&) = delete;

  void start();
  void stop();
  Result last() const;

 private:
  void run();
  Result probe();

  kube::KubeClient& client_;
  const std::string node_;
  const std::chrono::milliseconds interval_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  Result last_{false, "not checked yet"};
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dowser::daemon
