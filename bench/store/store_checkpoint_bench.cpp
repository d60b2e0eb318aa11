// store_checkpoint_bench: the latency of every write to the file Instance
// store, and of the writes that empty a full journal (checkpoints).
//
//   store_checkpoint_bench [--instances 1000] [--updates 30000] [--journal-kib 16384]
//                          [--base /tmp] [--seed 1] [--watch] [--new-instance-every-us 0]
//                          [--flushed-after]
//
// Creates --instances Instances of about 1.5 KB (an ONVIF camera's properties,
// capacity 4) in a fresh store under --base, then claims and releases their
// slots at random, as the capacity manager does, with one compare-and-swap
// update each. Every write is timed. A write after which the journal's epoch
// (bytes 8-15 of <store>/.journal) has changed is one that emptied the journal:
// those are listed one by one. Writes made while the journal was at least a
// quarter full (counted from the records the writes add) are also shown apart:
// that is while the store's checkpoint thread fsyncs files; and those from 3/4
// full, where writes help it if it fell behind (and where the store did the
// whole checkpoint in steps on writes before it had the thread).
// With --watch, a watch runs throughout, as in dowserd: then it also says how
// many events the watch had delivered when the last write returned (events
// lag behind writes when its thread falls behind) and how many files the
// watch thread read back.
// With --new-instance-every-us N, another thread creates a new Instance every
// N microseconds while the updates are timed, as dowserd does for a discovery
// report with a new device: the create's sync is deferred and handed to the
// store's own thread. The updates then show what that sync costs a claim.
// With --flushed-after, each update is written as an Allocate's claims are:
// on the disk when it returns, flushed by the store's thread right after
// (Deferring::flush). Then the updates show what the checkpoint's fsyncs
// cost claims that do not flush themselves.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "instance_store.hpp"
#include "paced_loop.hpp"
#include "percentiles.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using dowser::bench::print_percentiles;
using dowser::store::FileInstanceStore;
using dowser::store::Instance;

struct Options {
  size_t instances = 1000;
  size_t updates = 30000;
  size_t journal_kib = dowser::store::kDefaultJournalCapacity / 1024;
  fs::path base = "/tmp";
  unsigned seed = 1;
  bool watch = false;
  unsigned new_instance_every_us = 0;  // 0: none while updating
  bool flushed_after = false;
};

// The epoch in the journal's header; it changes when the journal is emptied.
uint64_t journal_epoch(const fs::path& journal) {
  std::array<char, 16> header{};
  const int fd = ::open(journal.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t count = ::pread(fd, header.data(), header.size(), 0);
  ::close(fd);
  uint64_t epoch = 0;
  if (count == static_cast<ssize_t>(header.size())) std::memcpy(&epoch, header.data() + 8, 8);
  return epoch;
}

// An ONVIF camera as the onvif handler reports it, with capacity 4 and free slots.
Instance camera(size_t index) {
  std::array<char, 17> digits{};
  std::snprintf(digits.data(), digits.size(), "%06zx", index % 0x1000000);
  const std::string hex = digits.data();
  Instance instance;
  instance.name = "onvif-cameras-" + hex;
  instance.configuration_name = "onvif-cameras";
  instance.cdi_name = "akri.sh/onvif-cameras=" + hex;
  instance.capacity = 4;
  instance.shared = true;
  instance.nodes = {"node-a", "node-b"};
  const std::string ip = "10.0." + std::to_string(index / 250) + "." + std::to_string(index % 250);
  instance.broker_properties = {
      {"ONVIF_DEVICE_SERVICE_URL", "http://" + ip + ":80/onvif/device_service"},
      {"ONVIF_DEVICE_IP_ADDRESS", ip},
      {"ONVIF_DEVICE_MAC_ADDRESS",
       "00:1a:2b:" + hex.substr(0, 2) + ":" + hex.substr(2, 2) + ":" + hex.substr(4)},
      {"ONVIF_DEVICE_UUID", "urn:uuid:6f1e3c2a-0b4d-4e8f-9a7c-" + std::string(6, '0') + hex},
      {"ONVIF_DEVICE_MANUFACTURER", "Example Cameras Inc."},
      {"ONVIF_DEVICE_MODEL", "EC-4200 Outdoor Dome"},
      {"ONVIF_DEVICE_FIRMWARE_VERSION", "4.2.17-build.20240611"},
      {"ONVIF_DEVICE_SERIAL_NUMBER", "EC4200-" + hex},
      {"ONVIF_MEDIA_PROFILES", "profile_1_h264,profile_2_h264,profile_3_jpeg"},
      {"ONVIF_STREAM_URI_PROFILE_1",
       "rtsp://" + ip + ":554/Streaming/Channels/101?transportmode=unicast&profile=Profile_1"},
      {"ONVIF_STREAM_URI_PROFILE_2",
       "rtsp://" + ip + ":554/Streaming/Channels/102?transportmode=unicast&profile=Profile_2"},
      {"ONVIF_SNAPSHOT_URI", "http://" + ip + ":80/onvif-http/snapshot?Profile_1"},
      {"ONVIF_DEVICE_LOCATION", "building-7/floor-2/corridor-west/camera-" + hex},
      {"ONVIF_DEVICE_SCOPES",
       "onvif://www.onvif.org/type/video_encoder onvif://www.onvif.org/Profile/Streaming "
       "onvif://www.onvif.org/hardware/EC-4200 onvif://www.onvif.org/name/Example"},
  };
  return instance;
}

constexpr size_t kJournalHeader = 64;
constexpr size_t kRecordHeader = 24;

struct Sample {
  double micros = 0;
  bool emptied_journal = false;
  double journal_fill = 0;  // the fraction of the journal in use before this write
};

void print_distribution(const char* what, const std::vector<Sample>& samples) {
  std::vector<double> all;
  std::vector<double> early;
  std::vector<double> under_way;
  std::vector<double> late;
  std::vector<double> emptying;
  for (const Sample& sample : samples) {
    all.push_back(sample.micros);
    (sample.journal_fill >= 0.25 ? under_way : early).push_back(sample.micros);
    if (sample.journal_fill >= 0.75) late.push_back(sample.micros);
    if (sample.emptied_journal) emptying.push_back(sample.micros);
  }
  print_percentiles(what, all);
  print_percentiles(std::string(what) + ", journal < 1/4", early);
  print_percentiles(std::string(what) + ", journal >= 1/4", under_way);
  print_percentiles(std::string(what) + ", journal >= 3/4", late);
  if (emptying.empty()) return;
  std::printf("%-8s writes that emptied the journal (%zu):", what, emptying.size());
  for (double micros : emptying) std::printf(" %.1f ms", micros / 1000);
  std::printf("\n");
}

class Bench {
 public:
  explicit Bench(const Options& options)
      : options_(options),
        store_(directory_, options.journal_kib * 1024),
        random_(options.seed),
        epoch_(journal_epoch(journal())) {}

  void run() {
    std::atomic<size_t> delivered{0};
    std::unique_ptr<dowser::store::WatchSubscription> subscription;
    if (options_.watch)
      subscription = store_.watch([&](const dowser::store::WatchEvent&) { ++delivered; });
    std::vector<Sample> creates;
    for (size_t i = 0; i < options_.instances; ++i) {
      instances_.push_back(camera(i));
      revisions_.push_back(0);
      creates.push_back(timed(i, [&] { revisions_.back() = store_.create(instances_.back()); }));
    }
    std::vector<Sample> updates;
    size_t discovered = 0;
    {
      std::optional<dowser::bench::PacedLoop> discovery;
      if (options_.new_instance_every_us > 0)
        discovery.emplace(
            std::chrono::microseconds(options_.new_instance_every_us),
            [this, next = options_.instances]() mutable { create_discovered(next++); });
      for (size_t i = 0; i < options_.updates; ++i) {
        const size_t index = random_() % instances_.size();
        updates.push_back(timed(index, [&] { write_claim_or_release(index); }));
      }
      if (discovery) discovered = discovery->ticks();
    }
    std::printf("store %s, journal %zu KiB, %zu Instances of %zu bytes\n", directory_.c_str(),
                options_.journal_kib, instances_.size(), document_size());
    print_distribution("create", creates);
    print_distribution("update", updates);
    if (options_.new_instance_every_us > 0)
      std::printf(
          "%zu new Instances created while updating (one every %u us, synced by the "
          "store's thread)\n",
          discovered, options_.new_instance_every_us);
    if (!subscription) return;
    std::printf(
        "watch: %zu events delivered when the last of %zu writes returned; %llu files "
        "read back by the watch thread\n",
        delivered.load(), creates.size() + updates.size() + discovered,
        static_cast<unsigned long long>(store_.watch_file_reads()));
  }

 private:
  fs::path journal() const { return directory_ / ".journal"; }

  size_t document_size() const {
    if (instances_.empty()) return 0;
    return static_cast<size_t>(
        fs::file_size(directory_ / "default" / (instances_.front().name + ".json")));
  }

  // Times a write to Instance index, and follows how full the journal is.
  template <typename Write>
  Sample timed(size_t index, Write write) {
    const double fill =
        static_cast<double>(journal_used_) / static_cast<double>(options_.journal_kib * 1024);
    const auto start = Clock::now();
    write();
    const std::chrono::duration<double, std::micro> took = Clock::now() - start;
    const uint64_t epoch = journal_epoch(journal());
    const bool emptied = epoch != epoch_;
    epoch_ = epoch;
    if (emptied) journal_used_ = kJournalHeader;
    journal_used_ += record_size(index);
    return {took.count(), emptied, fill};
  }

  // The size of the journal record of the last write to Instance index: a
  // header, then namespace NUL name NUL revision NUL document.
  size_t record_size(size_t index) const {
    const Instance& instance = instances_[index];
    const fs::path file = directory_ / instance.namespace_name / (instance.name + ".json");
    return kRecordHeader + instance.namespace_name.size() + instance.name.size() +
           std::to_string(revisions_[index]).size() + 3 + static_cast<size_t>(fs::file_size(file));
  }

  // A new Instance as a discovery report makes one: its sync handed to the
  // store's own thread.
  void create_discovered(size_t index) {
    const dowser::store::DeferredSync report(store_,
                                             dowser::store::DeferredSync::SyncOn::store_thread);
    store_.create(camera(index));
  }

  void write_claim_or_release(size_t index) {
    if (!options_.flushed_after) return claim_or_release(index);
    const dowser::store::DeferredSync claims_on_disk(
        store_, dowser::store::DeferredSync::SyncOn::store_thread,
        dowser::store::InstanceStore::Deferring::flush);
    claim_or_release(index);
  }

  // Claims a free slot for a virtual device of node-a, or frees a held one.
  void claim_or_release(size_t index) {
    Instance& instance = instances_[index];
    const std::string slot = instance.name + "-" + std::to_string(random_() % instance.capacity);
    if (instance.device_usage.erase(slot) == 0) {
      instance.device_usage[slot] = "C:" + std::to_string(random_() % 8) + ":node-a";
    }
    revisions_[index] = store_.update(instance, revisions_[index]);
  }

  // A fresh directory, removed once the store in it is closed (the store,
  // declared after it, goes first).
  Options options_;
  dowser::test::TempDir scratch_{"dowser-store-bench", options_.base};
  const fs::path& directory_ = scratch_.path();
  FileInstanceStore store_;
  std::mt19937 random_;
  uint64_t epoch_;
  size_t journal_used_ = kJournalHeader;  // as the store lays the journal out
  std::vector<Instance> instances_;
  std::vector<uint64_t> revisions_;
};

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app("Times every write to the file Instance store, checkpoints included.");
  app.add_option("--instances", options.instances, "Instances created first")
      ->check(CLI::PositiveNumber);
  app.add_option("--updates", options.updates, "claims and releases after that");
  app.add_option("--journal-kib", options.journal_kib, "journal capacity in KiB")
      ->check(CLI::PositiveNumber);
  app.add_option("--base", options.base, "where the store directory is made (e.g. /dev/shm)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--seed", options.seed, "seed of the random claims");
  app.add_flag("--watch", options.watch, "keep a watch running, as dowserd does");
  app.add_option("--new-instance-every-us", options.new_instance_every_us,
                 "meanwhile, create a new Instance this often, its sync handed to the store's "
                 "thread as dowserd does (0: none)");
  app.add_flag("--flushed-after", options.flushed_after,
               "write each update as an Allocate's claims: on the disk, flushed by the store's "
               "thread after it returns");
  CLI11_PARSE(app, argc, argv);
  try {
    Bench(options).run();
  } catch (const std::exception& error) {
    std::cerr << "store_checkpoint_bench: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
