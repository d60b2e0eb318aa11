// journal_sync_probe: what one durable journal record costs on the disk under
// --base, and what a stat of the file before each write adds to it.
//
//   journal_sync_probe [--base /var/tmp] [--records 2000] [--record-bytes 600]
//                      [--gap-us 300] [--run 100]
//
// Opens two store journals (StoreJournal, as the file store uses it, 1 MiB
// each) in a scratch directory under --base and appends durable records to
// them: one as the store does, the other with a stat of the journal before
// every append, as the journal itself did before 0fea074. They take turns in
// runs of --run records, so both see the same disk but not each other's
// writes: two files made one after the other may share an inode-table block,
// and records interleaved one by one would make each journal's fdatasync
// write the other's inode as well. Since Linux 6.13 a stat makes the next
// write take a fine-grained timestamp, so the inode changes on every write;
// where fdatasync then writes the inode too (ext4 without a journal, for
// one), the second is slower. Where a time-only change costs fdatasync
// nothing (journaled ext4, XFS, older kernels) the two are alike.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "percentiles.hpp"
#include "store_journal.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using dowser::store::detail::JournalRecord;
using dowser::store::detail::StoreJournal;

constexpr size_t kJournalBytes = size_t{1} << 20;

struct Options {
  fs::path base = "/var/tmp";
  size_t records = 2000;
  size_t record_bytes = 600;
  unsigned gap_us = 300;
  size_t run = 100;
};

// One journal's durable appends, timed; emptied (untimed) when full.
class TimedJournal {
 public:
  TimedJournal(const fs::path& journal, bool stat_before_append)
      : journal_(journal, kJournalBytes), stat_(stat_before_append) {}

  void append(const JournalRecord& record) {
    if (stat_) {
      struct stat status {};
      if (::stat(journal_.path().c_str(), &status) != 0)
        throw std::system_error(errno, std::generic_category(), "stat " + journal_.path().string());
    }
    const auto start = Clock::now();
    const bool appended = journal_.append(record);
    const auto end = Clock::now();
    if (!appended) {
      journal_.reset();
      return append(record);
    }
    micros_.push_back(std::chrono::duration<double, std::micro>(end - start).count());
  }
  const std::vector<double>& micros() const { return micros_; }

 private:
  StoreJournal journal_;
  bool stat_;
  std::vector<double> micros_;
};

void run(const Options& options) {
  if (options.record_bytes == 0 ||
      options.record_bytes + StoreJournal::kHeaderSize + StoreJournal::kRecordHeaderSize >
          kJournalBytes)
    throw std::invalid_argument("--record-bytes must be between 1 and " +
                                std::to_string(kJournalBytes - StoreJournal::kHeaderSize -
                                               StoreJournal::kRecordHeaderSize));
  if (options.run == 0) throw std::invalid_argument("--run must be at least 1");
  // Each journal in a directory of its own, as a store's is.
  const dowser::test::TempDir plain_directory("journal-sync-probe", options.base);
  const dowser::test::TempDir stat_directory("journal-sync-probe", options.base);
  TimedJournal plain(plain_directory.path() / ".journal", false);
  TimedJournal stat_first(stat_directory.path() / ".journal", true);
  const JournalRecord record{JournalRecord::Kind::put, std::string(options.record_bytes, 'r')};
  auto write_run = [&](TimedJournal& journal) {
    for (size_t i = 0; i < options.run && journal.micros().size() < options.records; ++i) {
      journal.append(record);
      std::this_thread::sleep_for(std::chrono::microseconds(options.gap_us));
    }
  };
  while (stat_first.micros().size() < options.records) {
    write_run(plain);
    write_run(stat_first);
  }
  std::printf("records of %zu bytes under %s, %u us apart, in runs of %zu\n", options.record_bytes,
              options.base.c_str(), options.gap_us, options.run);
  dowser::bench::print_percentiles("append (as the store)", plain.micros());
  dowser::bench::print_percentiles("stat, then append", stat_first.micros());
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
