// The file store's on-disk form of an Instance: Akri's Instance object
// (akri.sh/v0) plus a top-level "revision".
#pragma once

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

// Throws InstanceFormatError if a string is not valid UTF-8 (JSON cannot hold it).
std::string to_json_text(const StoredInstance& stored);

// Throws InstanceFormatError.
StoredInstance from_json_text(std::string_view text);

}  // namespace dowser::store::detail
