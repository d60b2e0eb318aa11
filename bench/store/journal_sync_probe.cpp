// journal_sync_probe: what one durable journal record costs on the disk under
// --base, and what a stat of the file before each write adds to it.
//
//   journal_sync_probe [--base /var/tmp] [--records 2000] [--record-bytes 600]
//                      [--gap-us 300] [--run 100]
//
// Makes two files of 1 MiB of zeros (durable before timing starts), then
// writes records one after another into them, as the store's journal does:
// pwrite into the zero-filled space, then fdatasync. One file is written as
// the journal is since 0fea074 (no stat); the other gets an fstat before every
// write, as the journal did before. They take turns in runs of --run records,
// so both see the same disk but not each other's writes: two files made one
// after the other may share an inode-table block, and records interleaved
// one by one would make each file's fdatasync write the other's inode as well. Since
// Linux 6.13 a stat makes the next write take a fine-grained timestamp, so the
// inode changes on every write; where fdatasync then writes the inode too
// (ext4 without a journal, for one), the second file is slower. Where a
// time-only change costs fdatasync nothing (journaled ext4, XFS, older
// kernels) the two are alike.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "percentiles.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr size_t kFileBytes = size_t{1} << 20;

struct Options {
  fs::path base = "/var/tmp";
  size_t records = 2000;
  size_t record_bytes = 600;
  unsigned gap_us = 300;
  size_t run = 100;
};

[[noreturn]] void fail(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// A file of zeros, durable, written into record by record.
class ZeroFilledFile {
 public:
  ZeroFilledFile(const fs::path& path, bool stat_before_write)
      : path_(path), stat_(stat_before_write) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) fail("open " + path.string());
    const std::string zeros(kFileBytes, '\0');
    if (::pwrite(fd_, zeros.data(), zeros.size(), 0) != static_cast<ssize_t>(zeros.size()))
      fail("write " + path.string());
    if (::fsync(fd_) != 0) fail("fsync " + path.string());
  }
  ~ZeroFilledFile() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  ZeroFilledFile(const ZeroFilledFile&) = delete;
  ZeroFilledFile& operator=(const ZeroFilledFile&) = delete;

  bool has_room_for(size_t bytes) const { return offset_ + bytes <= kFileBytes; }

  // Writes one record and makes it durable; returns how long that took (the
  // stat, if any, comes before the clock starts: its cost is the write's).
  double append(const std::string& record) {
    if (stat_) {
      struct stat status {};
      if (::fstat(fd_, &status) != 0) fail("stat " + path_.string());
    }
    const auto start = Clock::now();
    if (::pwrite(fd_, record.data(), record.size(), static_cast<off_t>(offset_)) !=
        static_cast<ssize_t>(record.size()))
      fail("write " + path_.string());
    if (::fdatasync(fd_) != 0) fail("fdatasync " + path_.string());
    offset_ += record.size();
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  }

 private:
  fs::path path_;
  bool stat_;
  int fd_ = -1;
  size_t offset_ = 0;
};

// One file's records, in fresh files whenever the space runs out (as the
// journal grows its own).
class Writer {
 public:
  Writer(fs::path path, bool stat_before_write)
      : path_(std::move(path)), stat_(stat_before_write) {}

  void append(const std::string& record, std::vector<double>& micros) {
    if (!file_ || !file_->has_room_for(record.size())) {
      file_.reset();
      file_ = std::make_unique<ZeroFilledFile>(path_, stat_);
    }
    micros.push_back(file_->append(record));
  }

 private:
  fs::path path_;
  bool stat_;
  std::unique_ptr<ZeroFilledFile> file_;
};

void run(const Options& options) {
  if (options.record_bytes == 0 || options.record_bytes > kFileBytes)
    throw std::invalid_argument("--record-bytes must be between 1 and " +
                                std::to_string(kFileBytes));
  if (options.run == 0) throw std::invalid_argument("--run must be at least 1");
  const std::string record(options.record_bytes, 'r');
  Writer plain(options.base / "journal-sync-probe-plain", false);
  Writer stat_first(options.base / "journal-sync-probe-stat", true);
  std::vector<double> plain_micros;
  std::vector<double> stat_micros;
  auto write_run = [&](Writer& writer, std::vector<double>& micros) {
    for (size_t i = 0; i < options.run && micros.size() < options.records; ++i) {
      writer.append(record, micros);
      std::this_thread::sleep_for(std::chrono::microseconds(options.gap_us));
    }
  };
  while (stat_micros.size() < options.records) {
    write_run(plain, plain_micros);
    write_run(stat_first, stat_micros);
  }
  std::printf("records of %zu bytes under %s, %u us apart, in runs of %zu\n", options.record_bytes,
              options.base.c_str(), options.gap_us, options.run);
  dowser::bench::print_percentiles("pwrite + fdatasync", plain_micros);
  dowser::bench::print_percentiles("fstat, then the same", stat_micros);
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"journal_sync_probe: a durable journal record's cost, with and without a stat"};
  app.add_option("--base", options.base, "directory on the disk to probe (files made there)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--records", options.records, "records timed per file");
  app.add_option("--record-bytes", options.record_bytes, "bytes per record");
  app.add_option("--gap-us", options.gap_us, "pause after each record");
  app.add_option("--run", options.run, "records written to one file before the other's turn");
  CLI11_PARSE(app, argc, argv);
  try {
    run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "journal_sync_probe: %s\n", error.what());
    return 1;
  }
  return 0;
}
