// Turns observed states of Instances into watch events, each change once and
// in revision order per Instance. Store-agnostic: any store whose watcher
// re-reads state (rather than receiving a log of changes) can use it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "instance_store.hpp"

namespace dowser::store::detail {

class ChangeFilter {
 public:
  using Key = std::pair<std::string, std::string>;  // namespace, name

  // A baseline state, known before watching began: no event.
  void remember(const StoredInstance& stored);
  // An upsert if this state is newer than the last one seen for its Instance.
  std::optional<WatchEvent> present(const StoredInstance& stored);
  // A delete, with the last state seen, if the Instance was present.
  std::optional<WatchEvent> absent(const std::string& namespace_name, const std::string& name);
  std::vector<Key> present_keys() const;

 private:
  std::map<Key, StoredInstance> last_seen_;
};

}  // namespace dowser::store::detail
