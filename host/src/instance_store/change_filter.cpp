#include "change_filter.hpp"

namespace dowser::store::detail {
namespace {

ChangeFilter::Key key_of(const Instance& instance) {
  return {instance.namespace_name, instance.name};
}

}  // namespace

void ChangeFilter::remember(const StoredInstance& stored) {
  last_seen_.insert_or_assign(key_of(stored.instance), stored);
}

std::optional<WatchEvent> ChangeFilter::present(const StoredInstance& stored) {
  // Revisions grow store-wide, so a re-created Instance is newer than its
  // deleted predecessor and forgetting deleted ones loses no ordering.
  auto [seen, inserted] = last_seen_.try_emplace(key_of(stored.instance), stored);
  if (!inserted) {
    if (stored.revision <= seen->second.revision) return std::nullopt;
    seen->second = stored;
  }
  return WatchEvent{WatchEvent::Type::upserted, stored};
}

std::optional<WatchEvent> ChangeFilter::absent(const std::string& namespace_name,
                                               const std::string& name) {
  const auto seen = last_seen_.find({namespace_name, name});
  if (seen == last_seen_.end()) return std::nullopt;
  WatchEvent event{WatchEvent::Type::deleted, std::move(seen->second)};
  last_seen_.erase(seen);
  return event;
}

std::vector<ChangeFilter::Key> ChangeFilter::present_keys() const {
  std::vector<Key> keys;
  keys.reserve(last_seen_.size());
  for (const auto& [key, stored] : last_seen_) keys.push_back(key);
  return keys;
}

}  // namespace dowser::store::detail
