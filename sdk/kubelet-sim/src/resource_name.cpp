#include "resource_name.hpp"

#include <cstddef>

namespace dowser::testkit {
namespace {

constexpr std::string_view kRequestsPrefix = "requests.";
constexpr std::string_view kNativePrefix = "kubernetes.io/";
constexpr std::size_t kMaxSubdomainLength = 253;
constexpr std::size_t kMaxNamePartLength = 63;

bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool is_alnum(char c) { return is_lower_alnum(c) || (c >= 'A' && c <= 'Z'); }

// A DNS-1123 label without the length limit: [a-z0-9]([-a-z0-9]*[a-z0-9])?
bool is_subdomain_label(std::string_view label) {
  if (label.empty() || !is_lower_alnum(label.front()) || !is_lower_alnum(label.back())) {
    return false;
  }
  for (char c : label) {
    if (!is_lower_alnum(c) && c != '-') return false;
  }
  return true;
}

bool is_dns1123_subdomain(std::string_view value) {
  if (value.size() > kMaxSubdomainLength) return false;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = value.find('.', start);
    if (!is_subdomain_label(value.substr(start, dot - start))) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]
bool is_qualified_name_part(std::string_view name) {
  if (name.empty() || !is_alnum(name.front()) || !is_alnum(name.back())) return false;
  for (char c : name) {
    if (!is_alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// validation.IsQualifiedName for a name that contains exactly one '/'.
std::optional<std::string> prefixed_qualified_name_error(std::string_view value) {
  const std::size_t slash = value.find('/');
  const std::string_view prefix = value.substr(0, slash);
  const std::string_view name = value.substr(slash + 1);
  if (name.find('/') != std::string_view::npos) return "it has more than one '/'";
  if (!is_dns1123_subdomain(prefix)) {
    return "the prefix must be a lowercase DNS subdomain of at most 253 characters";
  }
  if (name.size() > kMaxNamePartLength) return "the name part must be at most 63 characters";
  if (!is_qualified_name_part(name)) {
    return "the name part must consist of alphanumeric characters, '-', '_' or '.', "
           "and start and end with an alphanumeric character";
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> extended_resource_name_error(std::string_view name) {
  if (name.find('/') == std::string_view::npos) {
    return "it has no domain prefix, so it names a native resource";
  }
  if (name.find(kNativePrefix) != std::string_view::npos) {
    return "it contains \"kubernetes.io/\", so it names a native resource";
  }
  if (name.starts_with(kRequestsPrefix)) return "it starts with \"requests.\"";
  // The kubelet validates the name as the quota system will see it.
  return prefixed_qualified_name_error(std::string(kRequestsPrefix) + std::string(name));
}

}  // namespace dowser::testkit
