// Reading discovery details (YAML) in the built-in handlers: every problem is
// a dowser::InvalidArgument saying "discovery details: <what>", which the host
// reports with the Configuration.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <string>

namespace dowser::details {

[[noreturn]] void refuse(const std::string& message);

// Parses the text; invalid YAML is refused with its line and column.
YAML::Node load_yaml(const std::string& details);

// The node as a string; anything but a scalar is refused, naming where.
std::string scalar_at(const YAML::Node& node, const std::string& where);

// A duration given in (possibly fractional) seconds within [min, max].
struct SecondsField {
  const char* key;
  double min;
  double max;
};

// root[field.key] in milliseconds, or fallback when absent or null.
std::chrono::milliseconds parse_seconds(const YAML::Node& root, const SecondsField& field,
                                        std::chrono::milliseconds fallback);

}  // namespace dowser::details
