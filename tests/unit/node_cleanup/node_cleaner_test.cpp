// The NodeCleaner's thread against the test API server
// (tests/peers/kube-apiserver) and a real file store.
#include "apiserver_peer.hpp"
#include "eventually.hpp"
#include "log_capture.hpp"
#include "node_cleanup.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>

namespace dowser::node_cleanup {
namespace {

using namespace std::chrono_literals;

// A file store whose first list() (the cleaner's check of the Instances
// against the Node list) is held until stop() has been asked for, as it is
// told by the cleaner's log.
class StoreListingUntilStop : public store::FileInstanceStore {
 public:
  StoreListingUntilStop(const std::filesystem::path& directory, const test::LogCapture& log)
      : FileInstanceStore(directory), log_(log) {}

  std::vector<store::StoredInstance> list() override {
    if (!std::exchange(held_, true)) {
      entered_.set_value();
      test::eventually(
          [this] { return log_.text().find("dead-node cleanup: stopping") != std::string::npos; });
    }
    return FileInstanceStore::list();
  }

  std::future<void> entered() { return entered_.get_future(); }

 private:
  const test::LogCapture& log_;
  bool held_ = false;  // the cleaner's thread only
  std::promise<void> entered_;
};

// stop() that comes while the cleaner's thread has released its lock for
// store I/O must still end that thread: it once waited for a wake-up that
// had come and gone, and dowserd hung on SIGTERM.
TEST(NodeCleaner, AStopDuringTheStoreCheckEndsTheThread) {
  kube::testing::TestApiServer server({"--no-crds"});
  kube::KubeClient client(server.access());
  client.create(kube::resources::kNodes, "",
                {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node-a"}}}});
  test::LogCapture log;
  spdlog::default_logger()->set_level(spdlog::level::debug);
  const test::TempDir directory{"dowser-node-cleaner"};
  StoreListingUntilStop store(directory.path(), log);
  auto entered = store.entered();
  NodeCleaner cleaner(client, store, {"node-a"});
  cleaner.start();
  ASSERT_EQ(entered.wait_for(20s), std::future_status::ready)
      << "a listing that shows this node checks the store";

  auto stopped = std::async(std::launch::async, [&] { cleaner.stop(); });
  if (stopped.wait_for(20s) != std::future_status::ready) {
    // The stop cannot be abandoned: its thread is joining the cleaner's.
    std::fputs("NodeCleaner::stop() did not return: its thread missed the stop\n", stderr);
    std::_Exit(EXIT_FAILURE);
  }
}

}  // namespace
}  // namespace dowser::node_cleanup
