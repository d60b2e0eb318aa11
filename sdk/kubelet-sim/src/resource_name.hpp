// The kubelet's IsExtendedResourceName check, with the reason a name fails.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dowser::testkit {

// nullopt when `name` is a valid extended resource name, else why it is not.
std::optional<std::string> extended_resource_name_error(std::string_view name);

}  // namespace dowser::testkit
