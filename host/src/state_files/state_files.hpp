// Small files in which dowserd keeps state across restarts (the discovery
// requests handlers accepted, which file holds a Configuration name several
// define): read whole, and replaced whole and durably.
#pragma once

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dowser::state_files {

// Who may read the file. owner_only (0600) is for files that hold what
// others must not learn; an existing file is made so when read or written
// (a file system that keeps no modes is no reason not to go on).
enum class Access { owner_only, everyone };

// "cannot read PATH: REASON".
class ReadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The file's text; nullopt when there is none. Anything else that keeps it
// from being read throws ReadError: saving over a file that could not be
// read would lose what it held.
std::optional<std::string> read_whole(const std::filesystem::path& path, Access access);

// Replaces the file with text (its directory created if missing): a
// temporary file next to it (PATH.tmp) made durable, renamed over it, and
// the rename made durable as far as the file system can. A crash or a power
// cut leaves the old text or the new, never a torn or empty file. Returns
// what went wrong ("write PATH: REASON"), nullopt when nothing did.
std::optional<std::string> replace_durably(const std::filesystem::path& path, std::string_view text,
                                           Access access);

}  // namespace dowser::state_files
