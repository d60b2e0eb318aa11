#include "revision_counter.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <string>

#include "instance_json.hpp"
#include "instance_store.hpp"
#include "posix_io.hpp"

namespace dowser::store::detail {
namespace {

uint64_t highest_stored_revision(const InstanceFiles& files) {
  uint64_t highest = 0;
  for (const StoredInstance& stored : files.read_all()) {
    highest = std::max(highest, stored.revision);
  }
  return highest;
}

void overwrite_counter(int fd, const std::filesystem::path& path, uint64_t value, size_t old_size) {
  const std::string text = std::to_string(value) + "\n";
  write_all_at(fd, text, 0, path);
  // The counter only grows, except when recovered from a corrupt one.
  if (old_size > text.size() && ::ftruncate(fd, static_cast<off_t>(text.size())) != 0) {
    throw_io_error("truncate", path, errno);
  }
}

}  // namespace

std::optional<uint64_t> parse_revision(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() ||
      value >= kMaxRevision)  // the next one must still be readable
    return std::nullopt;
  return value;
}

std::optional<uint64_t> last_revision_unlocked(const InstanceFiles& files) {
  try {
    const std::optional<std::string> text = read_file_if_exists(files.revision_file());
    return text ? parse_revision(*text) : std::nullopt;
  } catch (const StoreError&) {
    return std::nullopt;
  }
}

uint64_t next_revision(const InstanceFiles& files, uint64_t at_least) {
  const std::filesystem::path path = files.revision_file();
  const UniqueFd fd = open_or_throw(path, O_RDWR | O_CREAT, 0644);
  const std::string text = read_all(fd.get(), path);
  std::optional<uint64_t> last = parse_revision(text);
  if (!last) {
    // New store, or the counter was lost: never go below what is stored.
    if (!text.empty()) spdlog::warn("instance store: {} is corrupt; recounting", path.string());
    last = highest_stored_revision(files);
  }
  const uint64_t next = std::max(*last, at_least) + 1;
  if (next > kMaxRevision) {  // only a hand edit gets here: the file would be unreadable
    throw StoreError(StoreError::Kind::io, "no revision is left above " + std::to_string(next - 1) +
                                               " (the highest is " + std::to_string(kMaxRevision) +
                                               "); an Instance file was edited to hold it");
  }
  overwrite_counter(fd.get(), path, next, text.size());
  return next;
}

}  // namespace dowser::store::detail
