// journal_sync_probe: what one journal record costs on the disk under --base:
// made durable as the store makes every write but an Allocate's; the same
// with a stat of the file before each write; and written to the disk with
// its flush after, as an Allocate's claims are (the flush timed apart).
//
//   journal_sync_probe [--base /var/tmp] [--records 2000] [--record-bytes 600]
//                      [--gap-us 300] [--run 100] [--journal-mib 1]
//
// Opens three store journals (StoreJournal, as the file store uses it, 1 MiB
// each unless --journal-mib says otherwise) in scratch directories under
// --base and appends records to them.
// They take turns in runs of --run records, so all see the same disk but not
// each other's writes: two files made one after the other may share an
// inode-table block, and records interleaved one by one would make each
// journal's fdatasync write the other's inode as well. Since Linux 6.13 a
// stat makes the next write take a fine-grained timestamp, so the inode
// changes on every write; where fdatasync then writes the inode too (ext4
// without a journal, for one), the stat is slower (the journal has not
// stat'ed itself since 0fea074). A record written to the disk waits for one
// write to the disk; its flush is what fdatasync adds on a disk with a
// volatile write cache.
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

struct Options {
  fs::path base = "/var/tmp";
  size_t records = 2000;
  size_t record_bytes = 600;
  unsigned gap_us = 300;
  size_t run = 100;
  size_t journal_mib = 1;
};

double micros_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// How a journal's records are appended.
enum class Append { durable, stat_then_durable, written_then_flushed };

// One journal's appends, timed (and their flushes, if apart); emptied
// (untimed) when full.
class TimedJournal {
 public:
  TimedJournal(const fs::path& journal, size_t bytes, Append how)
      : journal_(journal, bytes), how_(how) {}

  void append(const JournalRecord& record) {
    if (how_ == Append::stat_then_durable) {
      struct stat status {};
      if (::stat(journal_.path().c_str(), &status) != 0)
        throw std::system_error(errno, std::generic_category(), "stat " + journal_.path().string());
    }
    const bool written = how_ == Append::written_then_flushed;
    const auto start = Clock::now();
    const bool appended =
        journal_.append(record, written ? StoreJournal::Sync::written : StoreJournal::Sync::now);
    const double took = micros_since(start);
    if (!appended) {
      journal_.reset();
      return append(record);
    }
    micros_.push_back(took);
    if (!written) return;
    const auto flush_start = Clock::now();
    journal_.grow_ahead();  // as the store's thread does before its flush
    journal_.sync();
    flush_micros_.push_back(micros_since(flush_start));
  }
  const std::vector<double>& micros() const { return micros_; }
  const std::vector<double>& flush_micros() const { return flush_micros_; }

 private:
  StoreJournal journal_;
  Append how_;
  std::vector<double> micros_;
  std::vector<double> flush_micros_;
};

void run(const Options& options) {
  const size_t journal_bytes = options.journal_mib << 20;
  if (options.record_bytes == 0 ||
      options.record_bytes + StoreJournal::kHeaderSize + StoreJournal::kRecordHeaderSize >
          journal_bytes)
    throw std::invalid_argument("--record-bytes must be between 1 and " +
                                std::to_string(journal_bytes - StoreJournal::kHeaderSize -
                                               StoreJournal::kRecordHeaderSize));
  if (options.run == 0) throw std::invalid_argument("--run must be at least 1");
  // Each journal in a directory of its own, as a store's is.
  const dowser::test::TempDir durable_directory("journal-sync-probe", options.base);
  const dowser::test::TempDir stat_directory("journal-sync-probe", options.base);
  const dowser::test::TempDir written_directory("journal-sync-probe", options.base);
  TimedJournal durable(durable_directory.path() / ".journal", journal_bytes, Append::durable);
  TimedJournal stat_first(stat_directory.path() / ".journal", journal_bytes,
                          Append::stat_then_durable);
  TimedJournal written(written_directory.path() / ".journal", journal_bytes,
                       Append::written_then_flushed);
  const JournalRecord record{JournalRecord::Kind::put, std::string(options.record_bytes, 'r')};
  auto write_run = [&](TimedJournal& journal) {
    for (size_t i = 0; i < options.run && journal.micros().size() < options.records; ++i) {
      journal.append(record);
      std::this_thread::sleep_for(std::chrono::microseconds(options.gap_us));
    }
  };
  while (written.micros().size() < options.records) {
    write_run(durable);
    write_run(stat_first);
    write_run(written);
  }
  std::printf("records of %zu bytes under %s, %u us apart, in runs of %zu, journals of %zu MiB\n",
              options.record_bytes, options.base.c_str(), options.gap_us, options.run,
              options.journal_mib);
  dowser::bench::print_percentiles("durable (as the store)", durable.micros());
  dowser::bench::print_percentiles("stat, then durable", stat_first.micros());
  dowser::bench::print_percentiles("on the disk (a claim)", written.micros());
  dowser::bench::print_percentiles("  then its flush", written.flush_micros());
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{
      "journal_sync_probe: a journal record's cost: durable, after a stat, written then flushed"};
  app.add_option("--base", options.base, "directory on the disk to probe (files made there)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--records", options.records, "records timed per file");
  app.add_option("--record-bytes", options.record_bytes, "bytes per record");
  app.add_option("--gap-us", options.gap_us, "pause after each record");
  app.add_option("--run", options.run, "records written to one file before the other's turn");
  app.add_option("--journal-mib", options.journal_mib, "each journal's capacity (dowserd: 16)")
      ->check(CLI::Range(1, 1024));
  CLI11_PARSE(app, argc, argv);
  try {
    run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "journal_sync_probe: %s\n", error.what());
    return 1;
  }
  return 0;
}
