// What the capacity manager's tests share: Instances of Configuration
// "config-a", expected device lists, and two nodes over one store.
#pragma once

#include "capacity_manager.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

// An Instance of "config-a" with these claims (slot name -> usage).
inline dowser::store::Instance instance(std::string name, uint32_t capacity,
                                        std::map<std::string, std::string> usage = {},
                                        std::set<std::string> nodes = {"node-a", "node-b"}) {
  dowser::store::Instance result;
  result.name = std::move(name);
  result.configuration_name = "config-a";
  result.capacity = capacity;
  result.nodes = std::move(nodes);
  result.device_usage = std::move(usage);
  return result;
}

inline std::vector<dowser::capacity::PluginDevice> devices(
    std::initializer_list<std::pair<const char*, bool>> list) {
  std::vector<dowser::capacity::PluginDevice> result;
  for (auto [id, healthy] : list) result.push_back({id, healthy});
  return result;
}

// Two nodes' capacity managers over one file store in a directory of the
// test's own, each with its own store object (as two daemons would have):
// where every claim test starts.
class TwoNodesOneStore : public ::testing::Test {
 protected:
  // Creates the Instance and tells both nodes about it.
  void add(const dowser::store::Instance& instance) {
    uint64_t revision = store_a_->create(instance);
    node_a_->apply({instance, revision});
    node_b_->apply({instance, revision});
  }

  dowser::test::TempDir dir_{"dowser-capacity"};
  std::unique_ptr<dowser::store::FileInstanceStore> store_a_ =
      std::make_unique<dowser::store::FileInstanceStore>(dir_.path());
  std::unique_ptr<dowser::store::FileInstanceStore> store_b_ =
      std::make_unique<dowser::store::FileInstanceStore>(dir_.path());
  std::unique_ptr<dowser::capacity::CapacityManager> node_a_ =
      std::make_unique<dowser::capacity::CapacityManager>(*store_a_, "node-a");
  std::unique_ptr<dowser::capacity::CapacityManager> node_b_ =
      std::make_unique<dowser::capacity::CapacityManager>(*store_b_, "node-b");
};
