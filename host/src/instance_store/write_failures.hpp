// Why a store's last write failed, for readiness: a store that cannot write
// cannot claim slots. Shared by the file and the Kubernetes store.
#pragma once

#include "instance_store.hpp"

#include <mutex>
#include <optional>
#include <string>
#include <type_traits>

namespace dowser::store::detail {

class WriteFailures {
 public:
  // Runs a create, update or remove, noting whether it failed with an I/O
  // error (a lost race or a missing Instance is no failure of the store).
  template <typename Write>
  auto noting(const Write& write) -> decltype(write()) {
    try {
      if constexpr (std::is_void_v<decltype(write())>) {
        write();
        note(std::nullopt);
      } else {
        auto result = write();
        note(std::nullopt);
        return result;
      }
    } catch (const StoreError& error) {
      if (error.kind() == StoreError::Kind::io) note(error.what());
      throw;
    }
  }

  // InstanceStore::write_failure: any thread.
  std::optional<std::string> last() const {
    const std::lock_guard guard(mutex_);
    return last_;
  }

 private:
  void note(std::optional<std::string> failure) {
    const std::lock_guard guard(mutex_);
    last_ = std::move(failure);
  }

  mutable std::mutex mutex_;
  std::optional<std::string> last_;
};

}  // namespace dowser::store::detail
