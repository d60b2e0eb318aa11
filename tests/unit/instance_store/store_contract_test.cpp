// The store contract, run against FileInstanceStore: every handle is a
// FileInstanceStore object on the same directory, as separate dowserd
// processes (one per simulated node) would hold.
#include <memory>

#include "store_contract.hpp"

namespace dowser::store::testing {
namespace {

StoreOpener make_file_store() {
  auto directory = std::make_shared<TemporaryDirectory>(TemporaryDirectory::Medium::memory);
  return [directory] { return std::make_unique<FileInstanceStore>(directory->path() / "store"); };
}

INSTANTIATE_TEST_SUITE_P(File, InstanceStoreContract,
                         ::testing::Values(StoreImplementation{"FileInstanceStore",
                                                               make_file_store}),
                         implementation_name);

}  // namespace
}  // namespace dowser::store::testing
