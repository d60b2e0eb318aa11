#include "accepted_requests.hpp"

#include "state_files.hpp"

#include <blake2.h>
#include <spdlog/spdlog.h>

#include <array>
#include <sstream>
#include <stdexcept>
#include <string_view>

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

// The file's text; "" when there is none. Any other failure throws, saying
// what the file is for.
std::string read_records(const std::filesystem::path& path) {
  try {
    // Owner only: a digest of a request that holds a Secret's value is as
    // good as that value to whoever can guess it.
    return state_files::read_whole(path, state_files::Access::owner_only).value_or("");
  } catch (const state_files::ReadError& error) {
    throw std::runtime_error(
        std::string(error.what()) +
        "; it records the discovery requests handlers accepted (so that a handler refusing one "
        "later is not taken at its word): make it readable, or remove it to start afresh");
  }
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

AcceptedRequests::AcceptedRequests(std::optional<std::filesystem::path> file,
                                   boost::asio::io_context& core, RetryDelays retry)
    : file_(std::move(file)), retry_(retry), retry_delay_(retry.first), retry_timer_(core) {
  if (!file_) return;
  std::istringstream in(read_records(*file_));
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

void AcceptedRequests::forget(const Configuration& configuration) {
  if (digests_.erase(configuration) > 0 && file_) save();
}

void AcceptedRequests::save() {
  const std::optional<std::string> failure = write_file();
  if (!failure) {
    if (std::exchange(save_failed_, false))
      spdlog::info("recorded accepted discovery requests in {} again", file_->string());
    retry_delay_ = retry_.first;
    return;
  }
  if (!std::exchange(save_failed_, true))  // said once, not at every retry
    spdlog::warn("cannot record accepted discovery requests in {}: {}; retrying", file_->string(),
                 *failure);
  retry_later();
}

void AcceptedRequests::retry_later() {
  if (std::exchange(retry_pending_, true)) return;  // a later accept() is in the pending write
  retry_timer_.expires_after(retry_delay_);
  retry_delay_ = std::min(retry_delay_ * 2, retry_.max);
  // Destroying the timer cancels the wait: `this` is not touched then.
  retry_timer_.async_wait([this](const boost::system::error_code& error) {
    if (error) return;
    retry_pending_ = false;
    save();
  });
}

// Accepts are rare (a Configuration's start), so the fsyncs may block the
// core thread for their milliseconds.
std::optional<std::string> AcceptedRequests::write_file() const {
  std::string text;
  for (const auto& [configuration, digest] : digests_)
    text += configuration.first + '/' + configuration.second + ' ' + digest + '\n';
  return state_files::replace_durably(*file_, text, state_files::Access::owner_only);
}

}  // namespace dowser::discovery
