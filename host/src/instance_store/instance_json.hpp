// Akri's Instance object (akri.sh/v0): the Kubernetes store's form of an
// Instance, and, plus a top-level "revision", the file store's on-disk form.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "instance_store.hpp"

namespace dowser::store::detail {

// What is wrong with a document, starting with the field path ("spec.capacity: ...").
class InstanceFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// apiVersion, kind, metadata (name, namespace) and spec.
nlohmann::json to_akri_object(const Instance& instance);

// The Instance in an object's metadata and spec; other members (apiVersion,
// kind, the rest of metadata) are not looked at. Throws InstanceFormatError.
Instance from_akri_object(const nlohmann::json& object);

// Throws InstanceFormatError if a string is not valid UTF-8 (JSON cannot hold it).
std::string to_json_text(const StoredInstance& stored);

// The highest revision the file store reads or hands out: far above any a
// store reaches, and far below where adding one would wrap to 0 (which
// every watcher would take for an old change and drop).
inline constexpr uint64_t kMaxRevision = std::numeric_limits<int64_t>::max();

// Throws InstanceFormatError (also for a revision above kMaxRevision).
StoredInstance from_json_text(std::string_view text);

}  // namespace dowser::store::detail
