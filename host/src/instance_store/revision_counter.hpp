// The file store's revision counter, <root>/.revision: one number, the last
// revision handed out, read and rewritten in place under the store lock.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "instance_files.hpp"

namespace dowser::store::detail {

// A revision written as decimal digits, trailing whitespace allowed; nullopt
// for anything else, and for kMaxRevision or above (no revision may follow).
std::optional<uint64_t> parse_revision(std::string_view text);

// The next store-wide revision, above at_least (the revision being replaced,
// or a journalled one after a crash); call with the store lock held. A lost
// or corrupt counter is recounted from the stored files (with a warning for a
// corrupt one). It is not fsynced on each write: the journal holds every
// revision since the last checkpoint, which fsyncs the counter, and an
// Instance's own revision only grows, because an update never goes below the
// revision it replaces.
uint64_t next_revision(const InstanceFiles& files, uint64_t at_least);

// The last revision handed out, read without the store lock (a write may be
// under way); nullopt if the counter is missing or unreadable.
std::optional<uint64_t> last_revision_unlocked(const InstanceFiles& files);

}  // namespace dowser::store::detail
