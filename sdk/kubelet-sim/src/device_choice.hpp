// How the kubelet picks device ids for a container.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dowser::testkit {

// Up to `count` ids from `available`: first the plugin's `preferred` ids that
// are available (in its order; others are ignored, as the kubelet intersects
// the advisory answer with its candidates), then the rest of `available` in order.
std::vector<std::string> choose_devices(const std::vector<std::string>& available,
                                        std::size_t count,
                                        const std::vector<std::string>& preferred = {});

}  // namespace dowser::testkit
