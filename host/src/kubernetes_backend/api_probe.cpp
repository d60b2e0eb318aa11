#include "api_probe.hpp"

#include "thread_names.hpp"

namespace dowser::kubernetes_backend {

ApiProbe::ApiProbe(kube::KubeClient& client, std::string node, std::chrono::milliseconds interval)
    : client_(client), node_(std::move(node)), interval_(interval) {}

ApiProbe::~ApiProbe() { stop(); }

void ApiProbe::start() {
  thread_ = std::thread([this] {
    name_this_thread("api-probe");
    run();
  });
}

void ApiProbe::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

ApiStatus ApiProbe::last() const {
  std::lock_guard lock(mutex_);
  return last_;
}

ApiStatus ApiProbe::probe() {
  const std::string server = client_.access().server;
  try {
    client_.get(kube::resources::kNodes, "", node_);
    return {true, server};
  } catch (const kube::ApiError& error) {
    const int status = error.status();
    const bool refused = status == 0 || status == 401 || status == 403 || status >= 500;
    return {!refused, server + ": " + error.what()};
  }
}

void ApiProbe::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    ApiStatus result = probe();
    lock.lock();
    last_ = std::move(result);
    wake_.wait_for(lock, interval_, [this] { return stopping_; });
  }
}

}  // namespace dowser::kubernetes_backend
