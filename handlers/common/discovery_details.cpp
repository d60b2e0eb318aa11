#include "discovery_details.hpp"

#include <dowser/handler.hpp>

#include <cmath>
#include <sstream>

namespace dowser::details {
namespace {

// 0.05 -> "0.05", 86400 -> "86400".
std::string shortest(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

}  // namespace

void refuse(const std::string& message) {
  throw dowser::InvalidArgument("discovery details: " + message);
}

YAML::Node load_yaml(const std::string& details) {
  try {
    return YAML::Load(details);
  } catch (const YAML::Exception& e) {
    // yaml-cpp counts lines and columns from 0; people count from 1.
    refuse("not valid YAML: line " + std::to_string(e.mark.line + 1) + ", column " +
           std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

std::string scalar_at(const YAML::Node& node, const std::string& where) {
  if (!node.IsScalar()) refuse(where + " is not a string");
  return node.as<std::string>();
}

std::chrono::milliseconds parse_seconds(const YAML::Node& root, const SecondsField& field,
                                        std::chrono::milliseconds fallback) {
  YAML::Node node = root[field.key];
  if (!node.IsDefined() || node.IsNull()) return fallback;
  double seconds = 0;
  bool number = node.IsScalar() && YAML::convert<double>::decode(node, seconds);
  if (!number || !std::isfinite(seconds) || seconds < field.min || seconds > field.max)
    refuse(std::string(field.key) + " must be a number of seconds from " + shortest(field.min) +
           " to " + shortest(field.max));
  return std::chrono::milliseconds(std::llround(seconds * 1000));
}

}  // namespace dowser::details
