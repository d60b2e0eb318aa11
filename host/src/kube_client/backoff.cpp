#include <algorithm>

#include "kube_client.hpp"

namespace dowser::kube {

std::chrono::milliseconds Backoff::ceiling(int failures) const {
  if (failures <= 0 || initial.count() <= 0) return std::chrono::milliseconds(0);
  auto bound = initial;
  // Doubling stops at max, so this never overflows however many failures.
  for (int i = 1; i < failures && bound < max; ++i) bound *= 2;
  return std::min(bound, max);
}

std::chrono::milliseconds Backoff::delay(int failures, std::minstd_rand& random) const {
  std::uniform_int_distribution<std::chrono::milliseconds::rep> pick(0, ceiling(failures).count());
  return std::chrono::milliseconds(pick(random));
}

}  // namespace dowser::kube
