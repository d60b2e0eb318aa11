// Two nodes' capacity managers over one file store in a directory of the
// test's own, each with its own store object (as two daemons would have):
// where every claim test starts.
#pragma once

#include "capacity_manager.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <memory>

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
