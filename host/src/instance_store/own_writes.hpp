// What the file store wrote itself, so that its watch thread can report those
// writes without reading the files back under the store's lock (which would
// hold up the store's next write, as the watch thread wakes right after each
// one).
//
// A write of this store may be reported from memory only if nothing else has
// touched the file since:
// - no other writer (another store on the directory, in this process or
//   another): every write takes a revision from the store-wide counter
//   first, so if every revision handed out since this store's write is one
//   of this store's own, nobody else wrote since;
// - no edit by hand: the file's identity (inode, size, times) is still what
//   the write left (an edit to the same size within one tick of the file
//   system's clock would go unseen, and is reported at the next event);
// - and this store's own later writes of the file are recorded in order,
//   under the store lock, so the newest recorded state is the file's.
// Anything else is read from the file as before. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "posix_io.hpp"

namespace dowser::store::detail {

class OwnWrites {
 public:
  using Key = std::pair<std::string, std::string>;  // namespace, name

  // This store took revision from the counter for a write; call with the
  // store lock held. (Its write may still be under way when the watch thread
  // asks about an earlier one: the revision is this store's all the same.)
  void handed_out(uint64_t revision);
  // This store wrote the file's text, at revision, which left the file as
  // `identity`; call with the store lock held, before the file is closed.
  void wrote(const Key& file, uint64_t revision, std::string text, const FileIdentity& identity);
  // This store removed the file (the watch thread reads it: it is gone).
  void removed(const Key& file);

  // The text this store last wrote to file, if nothing else touched it since
  // (see above): on_disk is the file's identity now (nullopt: no file),
  // counter the revision counter now (nullopt: unreadable). Either way the
  // record is used up: a later event about the file reads it.
  std::optional<std::string> take_if_current(const Key& file,
                                             const std::optional<FileIdentity>& on_disk,
                                             std::optional<uint64_t> counter);

  bool has(const Key& file) const;  // a write of file not yet taken
  size_t pending() const;           // writes not yet taken
  void clear();

 private:
  struct Written {
    uint64_t revision = 0;
    std::string text;
    FileIdentity identity;
  };

  bool only_own_revisions_after(uint64_t revision, uint64_t counter) const;
  void erase(std::map<Key, Written>::iterator written);

  mutable std::mutex mutex_;
  std::map<Key, Written> latest_;  // per file, the newest write not yet taken
  // Revisions of this store's writes from the oldest one in latest_ on.
  std::set<uint64_t> revisions_;
  std::set<uint64_t> pending_revisions_;  // those of latest_
};

}  // namespace dowser::store::detail
