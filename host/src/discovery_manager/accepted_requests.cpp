#include "accepted_requests.hpp"

#include <blake2.h>
#include <spdlog/spdlog.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace dowser::discovery {
namespace {

constexpr size_t kDigestBytes = 16;

void add_field(std::string& input, std::string_view field) {
  input.append(field);
  input.push_back('\0');  // no field can run into the next
}

}  // namespace

std::string request_digest(const std::string& handler_name, const DiscoverRequest& request) {
  std::string input;
  add_field(input, handler_name);
  add_field(input, request.discovery_details);
  for (const auto& [name, value] : request.properties) {  // a map: in name order
    add_field(input, name);
    add_field(input, value ? "=" + *value : "-");
  }
  std::array<uint8_t, kDigestBytes> digest{};
  blake2b(digest.data(), input.data(), nullptr, digest.size(), input.size(), 0);
  std::string hex;
  for (uint8_t byte : digest) hex += fmt::format("{:02x}", byte);
  return hex;
}

AcceptedRequests::AcceptedRequests(std::optional<std::filesystem::path> file)
    : file_(std::move(file)) {
  if (!file_) return;
  std::ifstream in(*file_);
  for (std::string line; std::getline(in, line);)
    if (line.size() == 2 * kDigestBytes) digests_.insert(line);  // a torn last line is dropped
}

void AcceptedRequests::add(const std::string& digest) {
  if (!digests_.insert(digest).second || !file_) return;
  std::error_code ignored;  // the open below says what is wrong
  std::filesystem::create_directories(file_->parent_path(), ignored);
  std::ofstream out(*file_, std::ios::app);
  out << digest << '\n';
  out.flush();
  if (out || std::exchange(write_failed_, true)) return;  // logged once
  spdlog::warn("cannot record accepted discovery requests in {}: {}", file_->string(),
               std::strerror(errno));
}

}  // namespace dowser::discovery
