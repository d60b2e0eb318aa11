#include "accepted_requests.hpp"

#include <blake2.h>
#include <spdlog/spdlog.h>

#include <array>
#include <cerrno>
#include <fstream>
#include <system_error>

namespace dowser::discovery {
namespace {

constexpr size_t kDigestBytes = 16;

void add_field(std::string& input, std::string_view field) {
  input.append(field);
  input.push_back('\0');  // no field can run into the next
}

// "<namespace>/<name> <digest>": neither part can hold a space or a second '/'.
std::optional<std::pair<AcceptedRequests::Configuration, std::string>> parse_line(
    const std::string& line) {
  const size_t space = line.find(' ');
  const size_t slash = line.find('/');
  if (space == std::string::npos || slash == std::string::npos || slash > space ||
      line.size() - space - 1 != 2 * kDigestBytes)
    return std::nullopt;
  return std::pair{AcceptedRequests::Configuration{line.substr(0, slash),
                                                   line.substr(slash + 1, space - slash - 1)},
                   line.substr(space + 1)};
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
    if (auto entry = parse_line(line)) digests_.insert_or_assign(entry->first, entry->second);
}

bool AcceptedRequests::accepted(const Configuration& configuration,
                                const std::string& digest) const {
  auto entry = digests_.find(configuration);
  return entry != digests_.end() && entry->second == digest;
}

void AcceptedRequests::accept(const Configuration& configuration, const std::string& digest) {
  auto [entry, added] = digests_.try_emplace(configuration, digest);
  if (!added && entry->second == digest) return;
  entry->second = digest;
  if (file_) save();
}

// A temporary file renamed over the old one: a crash leaves one or the other.
void AcceptedRequests::save() {
  std::error_code error;
  std::filesystem::create_directories(file_->parent_path(), error);
  const std::filesystem::path temporary = file_->string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    for (const auto& [configuration, digest] : digests_)
      out << configuration.first << '/' << configuration.second << ' ' << digest << '\n';
    if (!out.flush()) error.assign(errno != 0 ? errno : EIO, std::generic_category());
  }
  if (!error) std::filesystem::rename(temporary, *file_, error);
  if (!error || std::exchange(save_failed_, true)) return;  // said once
  spdlog::warn("cannot record accepted discovery requests in {}: {}", file_->string(),
               error.message());
}

}  // namespace dowser::discovery
