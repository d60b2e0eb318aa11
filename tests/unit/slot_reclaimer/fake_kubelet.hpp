// A real v1.PodResourcesLister server on a unix socket under /tmp, playing
// the kubelet: it answers List with what the test says is in use, fails on
// demand, or holds a List until the client cancels it.
#pragma once

#include "podresources/v1/api.grpc.pb.h"
#include "slot_reclaimer.hpp"
#include "temp_dir.hpp"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>

namespace dowser::reclaim::testing {

using dowser::test::TempDir;

enum class ListMode { answer, fail, hold_until_cancelled };

class FakePodResources final : public v1::PodResourcesLister::CallbackService {
 public:
  void set_response(v1::ListPodResourcesResponse response);
  void set_in_use(const DevicesInUse& devices);  // one pod, one container per device
  void set_mode(ListMode mode);

  // How many List calls arrived; waits until at least `count` did.
  uint64_t lists() const;
  bool wait_for_lists(uint64_t count, std::chrono::milliseconds timeout) const;

  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* context,
                                 const v1::ListPodResourcesRequest* request,
                                 v1::ListPodResourcesResponse* response) override;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable listed_;
  v1::ListPodResourcesResponse response_;
  ListMode mode_ = ListMode::answer;
  uint64_t lists_ = 0;
};

class FakeKubelet {
 public:
  explicit FakeKubelet(const std::filesystem::path& socket);
  ~FakeKubelet();
  FakeKubelet(const FakeKubelet&) = delete;
  FakeKubelet& operator=(const FakeKubelet&) = delete;

  FakePodResources& pod_resources() { return service_; }

 private:
  FakePodResources service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace dowser::reclaim::testing
