#include "own_writes.hpp"

namespace dowser::store::detail {

void OwnWrites::handed_out(uint64_t revision) {
  const std::lock_guard lock(mutex_);
  revisions_.insert(revision);
}

void OwnWrites::wrote(const Key& file, uint64_t revision, std::string text,
                      const FileIdentity& identity) {
  const std::lock_guard lock(mutex_);
  if (auto previous = latest_.find(file); previous != latest_.end())
    pending_revisions_.erase(previous->second.revision);
  latest_.insert_or_assign(file, Written{revision, std::move(text), identity});
  pending_revisions_.insert(revision);
  revisions_.insert(revision);
}

void OwnWrites::removed(const Key& file) {
  const std::lock_guard lock(mutex_);
  if (auto written = latest_.find(file); written != latest_.end()) erase(written);
}

std::optional<std::string> OwnWrites::take_if_current(const Key& file,
                                                      const std::optional<FileIdentity>& on_disk,
                                                      std::optional<uint64_t> counter) {
  const std::lock_guard lock(mutex_);
  auto written = latest_.find(file);
  if (written == latest_.end()) return std::nullopt;
  std::optional<std::string> current;
  if (on_disk && counter && *on_disk == written->second.identity &&
      only_own_revisions_after(written->second.revision, *counter)) {
    current = std::move(written->second.text);
  }
  erase(written);
  return current;
}

bool OwnWrites::has(const Key& file) const {
  const std::lock_guard lock(mutex_);
  return latest_.count(file) > 0;
}

size_t OwnWrites::pending() const {
  const std::lock_guard lock(mutex_);
  return latest_.size();
}

void OwnWrites::clear() {
  const std::lock_guard lock(mutex_);
  latest_.clear();
  revisions_.clear();
  pending_revisions_.clear();
}

bool OwnWrites::only_own_revisions_after(uint64_t revision, uint64_t counter) const {
  // A counter below the write's revision was misread (or recounted): no proof.
  if (counter < revision || counter - revision > revisions_.size()) return false;
  for (uint64_t handed_out = revision + 1; handed_out <= counter; ++handed_out) {
    if (revisions_.count(handed_out) == 0) return false;
  }
  return true;
}

void OwnWrites::erase(std::map<Key, Written>::iterator written) {
  pending_revisions_.erase(written->second.revision);
  latest_.erase(written);
  // Only revisions after a pending write's can still be asked about.
  if (pending_revisions_.empty()) {
    revisions_.clear();
  } else {
    revisions_.erase(revisions_.begin(), revisions_.lower_bound(*pending_revisions_.begin()));
  }
}

}  // namespace dowser::store::detail
