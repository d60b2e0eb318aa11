// Which discovery request each Configuration's handler last accepted (started
// a session on), remembered across dowserd restarts: a handler refusing
// (DOWSER_ERR_INVALID_ARGUMENT) the request it accepted before for that
// Configuration is failing, not judging the request (a device or file it
// checks is missing for now), and must not withdraw a Configuration whose
// devices pods may be using. Only digests are kept: requests may hold Secret
// values. One line per Configuration, so the file stays as small as the set
// of Configurations: a deleted one's line goes (forget). One deleted while
// dowserd was not running keeps its line until a Configuration of that name
// is accepted: at startup an unreadable manifest cannot be told from a
// deleted one, and forgetting it would make a refusal of its request final.
#pragma once

#include <dowser/handler.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace dowser::discovery {

// A digest of the handler's name and the request (details and properties).
std::string request_digest(const std::string& handler_name, const DiscoverRequest& request);

// How long to wait before doing again what failed: first, then doubled per
// failure up to max.
struct RetryDelays {
  std::chrono::milliseconds first = std::chrono::seconds(1);
  std::chrono::milliseconds max = std::chrono::seconds(60);
};

class AcceptedRequests {
 public:
  using Configuration = std::pair<std::string, std::string>;  // namespace, name

  // Reads the file, if given (a missing one is empty; one that cannot be
  // read throws std::runtime_error naming it); without a file, what is
  // accepted is remembered for this process only. The file is written
  // owner-only (0600). Retries run on core, the thread that calls accept().
  AcceptedRequests(std::optional<std::filesystem::path> file, boost::asio::io_context& core,
                   RetryDelays retry = {});

  // Whether the Configuration's handler last accepted this request.
  bool accepted(const Configuration& configuration, const std::string& digest) const;
  // Remembers it as the Configuration's, replacing the file (atomically) if
  // that changes it. A file that cannot be written (a full disk) is logged
  // once, with the reason, and written again later, with backoff, until it
  // is: remembering is a safeguard, not a reason to stop.
  void accept(const Configuration& configuration, const std::string& digest);
  // The Configuration was deleted: its line goes, likewise.
  void forget(const Configuration& configuration);

 private:
  void save();
  // The reason the file could not be written, nullopt once it was.
  std::optional<std::string> write_file() const;
  void retry_later();

  std::optional<std::filesystem::path> file_;
  std::map<Configuration, std::string> digests_;
  RetryDelays retry_;
  std::chrono::milliseconds retry_delay_;
  boost::asio::steady_timer retry_timer_;
  bool retry_pending_ = false;
  bool save_failed_ = false;  // since the file was last written: logged
};

}  // namespace dowser::discovery
