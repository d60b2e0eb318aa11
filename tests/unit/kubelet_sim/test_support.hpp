// Small helpers shared by the kubelet simulator tests.
#pragma once

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <string>

namespace dowser::testkit::test {

// Generous: waits end as soon as their condition holds.
inline constexpr std::chrono::seconds kDeadline{10};

// A fresh directory under /tmp (unix socket paths must stay short), removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/ksim-XXXXXX";
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace dowser::testkit::test
