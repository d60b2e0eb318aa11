#include "accepted_requests.hpp"

#include <blake2.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string_view>
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

// Owner only: a digest of a request that holds a Secret's value is as good
// as that value to whoever can guess it. A file system that keeps no modes
// (some FUSE, CIFS, 9p mounts) refuses: it is no reason not to save.
void restrict_to_owner(int fd, const std::filesystem::path& path) {
  struct stat info {};
  if (::fstat(fd, &info) != 0 || (info.st_mode & 077) == 0) return;
  if (::fchmod(fd, 0600) != 0)
    spdlog::debug("cannot make {} owner-only: {}", path.string(), std::strerror(errno));
}

// Writes text as the whole file and makes it durable; what went wrong
// ("write PATH: REASON"), if anything.
std::optional<std::string> write_whole(const std::filesystem::path& path, std::string_view text) {
  const auto failed = [&](const char* action) {
    return std::string(action) + " " + path.string() + ": " + std::strerror(errno);
  };
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return failed("open");
  restrict_to_owner(fd, path);  // a temporary file left by a crash keeps its mode through O_TRUNC
  while (!text.empty()) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) {
      auto failure = failed("write");
      ::close(fd);
      return failure;
    }
    text.remove_prefix(static_cast<size_t>(written));
  }
  // A file system that cannot fsync (EINVAL: some FUSE and 9p mounts) keeps
  // what it can; only a failed write-back is a failure.
  if (::fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP) {
    auto failure = failed("fsync");
    ::close(fd);
    return failure;
  }
  if (::close(fd) != 0) return failed("close");
  return std::nullopt;
}

// Makes a rename in the directory durable, as far as its file system can:
// the new file is in place either way, so a failure is only logged (at
// debug level: a file system that cannot sync directories says so at every
// save).
void sync_directory(const std::filesystem::path& directory) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0)
    spdlog::debug("cannot fsync {}: {}", directory.string(), std::strerror(errno));
  if (fd >= 0) ::close(fd);
}

// The file's text; "" when there is none. Any other failure throws: saving
// over a file that could not be read would lose every other record.
std::string read_records(const std::filesystem::path& path) {
  const auto unreadable = [&] {
    return std::runtime_error(
        "cannot read " + path.string() + ": " + std::strerror(errno) +
        "; it records the discovery requests handlers accepted (so that a handler refusing one "
        "later is not taken at its word): make it readable, or remove it to start afresh");
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return "";
    throw unreadable();
  }
  restrict_to_owner(fd, path);  // written by an older dowserd (0644), or by hand
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      auto error = unreadable();
      ::close(fd);
      throw error;
    }
    if (got == 0) break;
    text.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  return text;
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

// A temporary file, made durable, renamed over the old one, and the rename
// made durable: a crash or a power cut leaves one or the other, never an
// empty file (which would forget every Configuration's accepted request).
// Accepts are rare (a Configuration's start), so the fsyncs may block the
// core thread for their milliseconds.
std::optional<std::string> AcceptedRequests::write_file() const {
  const std::filesystem::path& file = *file_;
  std::error_code error;
  std::filesystem::create_directories(file.parent_path(), error);
  if (error) return "create directory " + file.parent_path().string() + ": " + error.message();
  std::string text;
  for (const auto& [configuration, digest] : digests_)
    text += configuration.first + '/' + configuration.second + ' ' + digest + '\n';
  const std::filesystem::path temporary = file.string() + ".tmp";
  if (auto failure = write_whole(temporary, text)) {
    std::filesystem::remove(temporary, error);  // nothing left behind on a full disk
    return failure;
  }
  std::filesystem::rename(temporary, file, error);
  if (error)
    return "rename " + temporary.string() + " to " + file.string() + ": " + error.message();
  sync_directory(file.has_parent_path() ? file.parent_path() : ".");
  return std::nullopt;
}

}  // namespace dowser::discovery
