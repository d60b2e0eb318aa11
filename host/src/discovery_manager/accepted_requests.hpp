// Which discovery requests handlers have accepted (started a session on),
// remembered across dowserd restarts: a handler refusing
// (DOWSER_ERR_INVALID_ARGUMENT) a request it accepted before is failing, not
// judging the request (a device or file it checks is missing for now), and
// must not withdraw a Configuration whose devices pods may be using. Only
// digests are kept: requests may hold Secret values.
#pragma once

#include <dowser/handler.hpp>

#include <filesystem>
#include <optional>
#include <set>
#include <string>

namespace dowser::discovery {

// A digest of the handler's name and the request (details and properties).
std::string request_digest(const std::string& handler_name, const DiscoverRequest& request);

class AcceptedRequests {
 public:
  // Reads the file, if given (a missing one is empty); without a file, what
  // is accepted is remembered for this process only.
  explicit AcceptedRequests(std::optional<std::filesystem::path> file);

  bool contains(const std::string& digest) const { return digests_.count(digest) > 0; }
  // Remembers it, appending to the file if it is new there. A file that
  // cannot be written is logged, once: remembering is a safeguard, not a
  // reason to stop.
  void add(const std::string& digest);

 private:
  std::optional<std::filesystem::path> file_;
  std::set<std::string> digests_;
  bool write_failed_ = false;
};

}  // namespace dowser::discovery
