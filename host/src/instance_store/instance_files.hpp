// The file store's directory layout: <root>/<namespace>/<name>.json, plus
// <root>/.lock, <root>/.revision and <root>/.journal. Reading only; writes
// live in the store.
#pragma once

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "instance_store.hpp"

namespace dowser::store::detail {

class InstanceFiles {
 public:
  explicit InstanceFiles(std::filesystem::path root) : root_(std::move(root)) {}

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path lock_file() const { return root_ / ".lock"; }
  std::filesystem::path revision_file() const { return root_ / ".revision"; }
  std::filesystem::path journal_file() const { return root_ / ".journal"; }

  // Both throw StoreError(io) for a namespace or name that could leave the
  // directory or hide among the store's own files.
  std::filesystem::path namespace_directory(const std::string& namespace_name) const;
  std::filesystem::path instance_file(const std::string& namespace_name,
                                      const std::string& name) const;

  // nullopt if there is no such file. Throws StoreError(io) naming the file if
  // it cannot be read or is not a valid Instance stored under that name.
  std::optional<StoredInstance> read(const std::string& namespace_name,
                                     const std::string& name) const;
  // What read() makes of the file's text.
  StoredInstance parse(const std::string& namespace_name, const std::string& name,
                       std::string_view text) const;

  // Every Instance that can be read, by namespace and name; an unreadable one
  // is skipped (and warned of, once per reason), and one vanishing meanwhile
  // is skipped.
  std::vector<StoredInstance> read_all() const;
  // The files read() found unreadable the last time it read them,
  // "<path>: <reason>" each (shared by copies, such as the watch thread's).
  std::vector<std::string> unreadable() const;

  // read() and read_all() under a shared lock on lock_file(): writers rewrite
  // files in place under the exclusive lock, so this never sees half a file.
  // Writers, who hold the exclusive lock, call read() and read_all().
  std::optional<StoredInstance> read_settled(const std::string& namespace_name,
                                             const std::string& name) const;
  std::vector<StoredInstance> read_all_settled() const;

  std::vector<std::string> namespaces() const;
  std::vector<std::string> instance_names(const std::string& namespace_name) const;

  // True for names that may be a namespace or Instance name here.
  static bool is_valid_name(std::string_view name);
  // The Instance a file in a namespace directory holds; nullopt for anything
  // else (temporary files, stray files).
  static std::optional<std::string> instance_name_of(std::string_view file_name);

 private:
  struct Unreadable {
    struct Entry {
      std::string why;
      bool warned = false;
    };
    std::mutex mutex;
    std::map<std::filesystem::path, Entry> files;
    std::atomic<size_t> count{0};  // files.size(), read without the mutex
  };
  void note_readable(const std::filesystem::path& file) const;
  void note_unreadable(const std::filesystem::path& file, const std::string& why) const;
  // Whether read_all should warn of it: not yet for this reason.
  bool take_warning(const std::filesystem::path& file) const;

  std::filesystem::path root_;
  std::shared_ptr<Unreadable> unreadable_ = std::make_shared<Unreadable>();
};

}  // namespace dowser::store::detail
