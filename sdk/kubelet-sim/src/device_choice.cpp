#include "device_choice.hpp"

#include <set>

namespace dowser::testkit {

std::vector<std::string> choose_devices(const std::vector<std::string>& available,
                                        std::size_t count,
                                        const std::vector<std::string>& preferred) {
  const std::set<std::string> candidates(available.begin(), available.end());
  std::set<std::string> taken;
  std::vector<std::string> chosen;
  auto take_from = [&](const std::vector<std::string>& ids) {
    for (const auto& id : ids) {
      if (chosen.size() == count) return;
      if (candidates.contains(id) && taken.insert(id).second) chosen.push_back(id);
    }
  };
  take_from(preferred);
  take_from(available);
  return chosen;
}

}  // namespace dowser::testkit
