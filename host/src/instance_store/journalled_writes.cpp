#include "journalled_writes.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "posix_io.hpp"
#include "revision_counter.hpp"
#include "thread_names.hpp"

namespace dowser::store::detail {
namespace {

std::optional<JournalledWrite> from_record(const JournalRecord& record) {
  const std::string_view payload = record.payload;
  const size_t name_start = payload.find('\0') + 1;
  const size_t revision_start = name_start == 0 ? 0 : payload.find('\0', name_start) + 1;
  const size_t document_start = revision_start == 0 ? 0 : payload.find('\0', revision_start) + 1;
  if (document_start == 0) return std::nullopt;
  JournalledWrite write{std::string(payload.substr(0, name_start - 1)),
                        std::string(payload.substr(name_start, revision_start - name_start - 1)), 0,
                        std::string(payload.substr(document_start))};
  const std::optional<uint64_t> revision =
      parse_revision(payload.substr(revision_start, document_start - revision_start - 1));
  if (!revision || !InstanceFiles::is_valid_name(write.namespace_name) ||
      !InstanceFiles::is_valid_name(write.name)) {
    return std::nullopt;
  }
  write.revision = *revision;
  return write;
}

// The journal's records as writes, skipping (with a warning) any it cannot read.
std::vector<JournalEntry> journalled_writes(StoreJournal& journal) {
  std::vector<JournalEntry> writes;
  for (const JournalRecord& record : journal.records()) {
    if (auto write = from_record(record)) {
      writes.push_back({record.kind, std::move(*write)});
    } else {
      spdlog::warn("instance store: {}: skipping a record that names no Instance",
                   journal.path().string());
    }
  }
  return writes;
}

// The revision of the Instance's file: nullopt if there is none, 0 if it
// cannot be read (torn by a crash); stored revisions start at 1.
std::optional<uint64_t> revision_on_disk(const InstanceFiles& files, const JournalledWrite& write) {
  try {
    const std::optional<StoredInstance> stored = files.read(write.namespace_name, write.name);
    return stored ? std::optional<uint64_t>(stored->revision) : std::nullopt;
  } catch (const StoreError&) {
    return 0;
  }
}

// Whether the file still is as it was before a failed write: a put left it
// neither torn nor at the put's revision, a removal left it in place.
bool left_as_before(const InstanceFiles& files, const JournalEntry& failed) {
  const std::optional<uint64_t> on_disk = revision_on_disk(files, failed.write);
  if (failed.kind == JournalRecord::Kind::remove) return on_disk && *on_disk != 0;
  return on_disk != std::optional<uint64_t>(0) && on_disk != failed.write.revision;
}

// Redoes a journalled write the files lost; true if it changed a file.
bool replay(const InstanceFiles& files, JournalRecord::Kind kind, const JournalledWrite& write) {
  const std::optional<uint64_t> on_disk = revision_on_disk(files, write);
  const std::filesystem::path path = files.instance_file(write.namespace_name, write.name);
  if (kind == JournalRecord::Kind::remove) {
    return on_disk && *on_disk <= write.revision && remove_file(path);
  }
  if (on_disk && *on_disk >= write.revision) return false;
  ensure_directory_durably(files.namespace_directory(write.namespace_name));
  rewrite_file(path, write.document);
  return true;
}

}  // namespace

// Payload: namespace NUL name NUL revision NUL document (names cannot hold NUL).
JournalRecord to_record(JournalRecord::Kind kind, const JournalledWrite& write) {
  std::string payload = write.namespace_name;
  payload += '\0';
  payload += write.name;
  payload += '\0';
  payload += std::to_string(write.revision);
  payload += '\0';
  payload += write.document;
  return {kind, std::move(payload)};
}

void UnsyncedFiles::add(const Key& file) {
  const auto found = sequence_of_.find(file);
  if (found != sequence_of_.end()) {
    by_sequence_.erase(found->second);
    sequence_of_.erase(found);
  }
  sequence_of_.emplace(file, next_sequence_);
  by_sequence_.emplace(next_sequence_++, file);
  namespaces_.insert(file.first);
}

std::optional<UnsyncedFiles::Write> UnsyncedFiles::oldest(uint64_t except) const {
  if (by_sequence_.empty()) return std::nullopt;
  auto found = by_sequence_.begin();
  if (found->first == except && by_sequence_.size() > 1) ++found;
  return Write{found->second, found->first};
}

void UnsyncedFiles::erase_if_last(const Write& write) {
  const auto found = sequence_of_.find(write.file);
  if (found == sequence_of_.end() || found->second != write.sequence) return;
  by_sequence_.erase(found->second);
  sequence_of_.erase(found);
}

void UnsyncedFiles::clear() {
  sequence_of_.clear();
  by_sequence_.clear();
  namespaces_.clear();  // next_sequence_ goes on: a sequence number is never reused
}

JournalledWrites::JournalledWrites(const InstanceFiles& files, size_t journal_capacity,
                                   SyncObserver synced)
    : files_(files), journal_(files.journal_file(), journal_capacity), synced_(std::move(synced)) {
  recover();
  checkpointer_ = std::thread([this] {
    name_this_thread("store-sync");
    run_checkpoints();
  });
}

JournalledWrites::~JournalledWrites() {
  try {
    const StoreWriteLock held = lock();
    settle_deferred();
  } catch (const std::exception& error) {
    spdlog::error("instance store: closing {}: new Instances could not be made durable: {}",
                  files_.root().string(), error.what());
  }
  {
    const std::lock_guard<std::mutex> guard(checkpoint_mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  checkpointer_.join();
}

void JournalledWrites::append(const JournalRecord& record, StoreJournal::Sync when) {
  const bool appended = journal_.append(record, when);
  // Appending caught up with other writers' records first: note them (and a
  // reset by another writer) before anything here counts on unsynced_.
  note_changes(journal_.take_collected_changes());
  if (appended) return;
  spdlog::warn(
      "instance store: the journal {} filled before its checkpoint finished; fsyncing the "
      "{} files it covers at once",
      journal_.path().string(), unsynced_count());
  checkpoint();
  if (!journal_.append(record, when)) {
    throw StoreError(StoreError::Kind::io, "the journal " + journal_.path().string() +
                                               " has no room even after a checkpoint");
  }
}

void JournalledWrites::write(JournalRecord::Kind kind, const JournalledWrite& write,
                             const std::function<void()>& write_file, const Undo& undo,
                             Deferral deferral) {
  const JournalRecord record = to_record(kind, write);
  const StoreJournal::Sync when = sync_of(deferral);
  const bool deferred = when != StoreJournal::Sync::now;
  append(record, when);
  if (!deferred) {
    deferred_made_durable();  // by this append: the journal keeps order
    // Every record is durable now, so a rewritten file may reach the disk.
    if (!torn_.empty()) mend_torn_files();
  }
  const UnsyncedFiles::Key file{write.namespace_name, write.name};
  // Whatever reached the file, even if write_file throws, must be fsynced
  // before the record goes (and, deferred, not before the record is durable).
  const auto written = [&] {
    if (deferred) {
      deferred_files_.push_back(file);
      any_deferred_.store(true);
    } else {
      note_written(file);
    }
  };
  try {
    write_file();
  } catch (...) {
    written();
    undo_failed_write({kind, write}, undo, when);
    throw;
  }
  written();
  checkpoint_step(StoreJournal::kRecordHeaderSize + record.payload.size());
}

void JournalledWrites::undo_failed_write(const JournalEntry& failed, const Undo& undo,
                                         StoreJournal::Sync when) {
  const UnsyncedFiles::Key file{failed.write.namespace_name, failed.write.name};
  const std::string path = files_.instance_file(file.first, file.second).string();
  std::optional<JournalEntry> entry;
  try {
    entry = undo();
    append(to_record(entry->kind, entry->write), when);
  } catch (const std::exception& error) {
    spdlog::error(
        "instance store: a write of {} failed and could not be undone in the journal ({}): a "
        "restart may still make it",
        path, error.what());
    if (revision_on_disk(files_, failed.write) == 0) torn_.insert_or_assign(file, failed);
    return;
  }
  torn_.erase(file);  // an earlier failure's mend is superseded
  if (left_as_before(files_, failed)) return;
  try {
    replay(files_, entry->kind, entry->write);
  } catch (const StoreError&) {
    torn_.insert_or_assign(file, *entry);  // the file is not as before: mend it first
  }
}

void JournalledWrites::mend_torn_files() {
  for (auto torn = torn_.begin(); torn != torn_.end();) {
    const auto& [kind, write] = torn->second;
    try {
      replay(files_, kind, write);
    } catch (const StoreError&) {
      ++torn;  // the disk may still be failing: the next write tries again
      continue;
    }
    spdlog::info("instance store: rewrote {} from the journal: a failed write had left it torn",
                 files_.instance_file(write.namespace_name, write.name).string());
    note_written(torn->first);  // rewritten: fsynced before the journal goes
    torn = torn_.erase(torn);
  }
}

StoreJournal::Sync JournalledWrites::sync_of(Deferral deferral) const {
  if (deferring_thread_.load() != std::this_thread::get_id()) return StoreJournal::Sync::now;
  if (deferring_.load() == InstanceStore::Deferring::flush)
    return journal_.keeps_written_records() ? StoreJournal::Sync::written : StoreJournal::Sync::now;
  return deferral == Deferral::allowed ? StoreJournal::Sync::later : StoreJournal::Sync::now;
}

void JournalledWrites::defer_sync(InstanceStore::Deferring deferring) {
  deferring_.store(deferring);  // before the thread: a write that sees the thread sees this
  deferring_thread_.store(std::this_thread::get_id());
}

void JournalledWrites::sync_deferred() {
  deferring_thread_.store(std::thread::id());
  if (!any_deferred_.load()) return;
  const StoreWriteLock held = lock();
  settle_deferred();
}

void JournalledWrites::sync_deferred_in_background() {
  deferring_thread_.store(std::thread::id());
  if (!any_deferred_.load()) return;
  {
    const std::lock_guard<std::mutex> guard(checkpoint_mutex_);
    deferred_sync_wanted_ = true;
  }
  wake_.notify_all();
}

bool JournalledWrites::deferred_sync_due() {
  const std::lock_guard<std::mutex> guard(checkpoint_mutex_);
  return std::exchange(deferred_sync_wanted_, false);
}

// The next claims' room, flushed with them. Best effort: if the disk is full
// the flush still goes ahead, and an append that needs the room grows the
// journal itself (and fails there, saying so, if it cannot).
void JournalledWrites::grow_journal_ahead() {
  try {
    journal_.grow_ahead();
  } catch (const StoreError& error) {
    spdlog::debug("instance store: the journal was not grown ahead: {}", error.what());
  }
}

void JournalledWrites::settle_deferred_in_background() {
  try {
    uint64_t point = 0;
    uint64_t through = 0;
    {
      const StoreWriteLock held = lock();
      if (deferred_files_.empty()) return;
      grow_journal_ahead();
      point = journal_.flush_point();
      through = deferred_settled_ + deferred_files_.size();
    }
    journal_.flush();
    const StoreWriteLock held = lock();
    journal_.flushed(point);
    deferred_durable_through(through);
  } catch (const std::exception& error) {
    spdlog::warn(
        "instance store: new Instances could not be made durable yet; the next durable write "
        "covers them: {}",
        error.what());
  }
}

void JournalledWrites::deferred_made_durable() {
  deferred_durable_through(deferred_settled_ + deferred_files_.size());
}

void JournalledWrites::deferred_durable_through(uint64_t count) {
  if (count <= deferred_settled_) return;  // settled meanwhile (a checkpoint, a durable write)
  const auto durable =
      deferred_files_.begin() + static_cast<std::ptrdiff_t>(std::min<uint64_t>(
                                    count - deferred_settled_, deferred_files_.size()));
  for (auto file = deferred_files_.begin(); file != durable; ++file) note_written(*file);
  deferred_settled_ += static_cast<uint64_t>(durable - deferred_files_.begin());
  deferred_files_.erase(deferred_files_.begin(), durable);
  any_deferred_.store(!deferred_files_.empty());
}

void JournalledWrites::settle_deferred() {
  if (deferred_files_.empty()) return;
  journal_.sync();
  deferred_made_durable();
}

void JournalledWrites::checkpoint_step(uint64_t record_size) {
  if (journal_.used() < journal_.capacity() / 4 * kStepsFromQuarters) return;
  // This write's file, and enough others that, with no help from the thread,
  // the checkpoint would be done while half the room left (counted in records
  // like this one) is free.
  const uint64_t records_left =
      std::max<uint64_t>(1, (journal_.capacity() - journal_.used()) / record_size);
  const size_t files = 1 + (2 * unsynced_count() + records_left - 1) / records_left;
  try {
    settle_deferred();  // so that the step may fsync their files too
    for (size_t synced = 0; synced < files; ++synced) {
      const std::optional<UnsyncedFiles::Write> oldest = next_to_sync(Syncer::step);
      if (!oldest) break;
      sync(*oldest);
    }
    if (unsynced_count() == 0) finish_checkpoint();
  } catch (const StoreError& error) {
    spdlog::warn("instance store: a checkpoint step failed; the next writes retry it: {}",
                 error.what());
  }
}

size_t JournalledWrites::unsynced_count() {
  const std::lock_guard<std::mutex> guard(checkpoint_mutex_);
  return unsynced_.size();
}

void JournalledWrites::note_changes(const StoreJournal::Changes& changes) {
  if (changes.reset) forget_unsynced();  // another writer checkpointed
  const std::lock_guard<std::mutex> guard(checkpoint_mutex_);
  for (const JournalRecord& record : changes.records) {
    if (auto write = from_record(record)) unsynced_.add({write->namespace_name, write->name});
  }
}

// After the file's write (an fsync that began before it must not count), and
// under lock(), so the journal's fill is this writer's to read.
void JournalledWrites::note_written(const UnsyncedFiles::Key& file) {
  const bool checkpoint_due = journal_.used() >= journal_.capacity() / 4 * kCheckpointFromQuarters;
  {
    const std::lock_guard<std::mutex> guard(checkpoint_mutex_);
    unsynced_.add(file);
    if (!checkpoint_due) return;
    ++checkpoint_requests_;
    if (checkpoint_wanted_) return;
    checkpoint_wanted_ = true;
  }
  wake_.notify_one();
}

void JournalledWrites::forget_unsynced() {
  const std::lock_guard<std::mutex> guard(checkpoint_mutex_);
  unsynced_.clear();
  checkpoint_wanted_ = false;
}

// The checkpoint thread stops taking files once it is stopping or the
// checkpoint was finished by someone else.
std::optional<UnsyncedFiles::Write> JournalledWrites::next_to_sync(Syncer syncer) {
  const std::lock_guard<std::mutex> guard(checkpoint_mutex_);
  std::optional<UnsyncedFiles::Write> next;
  switch (syncer) {
    case Syncer::background:
      if (!stopping_ && checkpoint_wanted_) next = unsynced_.oldest(syncing_in_step_);
      syncing_in_background_ = next ? next->sequence : UnsyncedFiles::kNoSequence;
      break;
    case Syncer::step:
      next = unsynced_.oldest(syncing_in_background_);
      syncing_in_step_ = next ? next->sequence : UnsyncedFiles::kNoSequence;
      break;
    case Syncer::all:
      next = unsynced_.oldest();
      break;
  }
  return next;
}

void JournalledWrites::sync(const UnsyncedFiles::Write& write) {
  const std::filesystem::path path = files_.instance_file(write.file.first, write.file.second);
  observed(path, [&] { return fsync_file_if_exists(path); });
  const std::lock_guard<std::mutex> guard(checkpoint_mutex_);
  unsynced_.erase_if_last(write);
}

void JournalledWrites::finish_checkpoint() {
  if (!torn_.empty()) {
    throw StoreError(
        StoreError::Kind::io,
        "the journal keeps the write of " +
            files_.instance_file(torn_.begin()->first.first, torn_.begin()->first.second).string() +
            ", a failed write left the file torn and it cannot be rewritten yet");
  }
  std::set<std::string> namespaces;
  {
    const std::lock_guard<std::mutex> guard(checkpoint_mutex_);
    namespaces = unsynced_.namespaces();
  }
  for (const std::string& namespace_name : namespaces) {
    const std::filesystem::path directory = files_.namespace_directory(namespace_name);
    // Gone (removed by hand): nothing to make durable. Any other failure to
    // look is told by fsync_directory's StoreError.
    std::error_code unreadable;
    if (std::filesystem::status(directory, unreadable).type() ==
        std::filesystem::file_type::not_found)
      continue;
    observed(directory, [&] {
      fsync_directory(directory);
      return true;
    });
  }
  observed(files_.revision_file(), [&] { return fsync_file_if_exists(files_.revision_file()); });
  observed(journal_.path(), [&] {
    journal_.reset();
    return true;
  });
  forget_unsynced();
}

bool JournalledWrites::observed(const std::filesystem::path& path,
                                const std::function<bool()>& action) const {
  if (synced_) synced_(path, SyncStep::starting);
  const bool done = action();
  if (done && synced_) synced_(path, SyncStep::done);
  return done;
}

void JournalledWrites::checkpoint() {
  settle_deferred();
  while (const std::optional<UnsyncedFiles::Write> oldest = next_to_sync(Syncer::all))
    sync(*oldest);
  finish_checkpoint();
}

void JournalledWrites::run_checkpoints() {
  std::unique_lock<std::mutex> guard(checkpoint_mutex_);
  while (true) {
    wake_.wait(guard, [this] { return stopping_ || checkpoint_wanted_ || deferred_sync_wanted_; });
    if (stopping_) return;  // the destructor settles what is deferred
    if (std::exchange(deferred_sync_wanted_, false)) {
      guard.unlock();
      settle_deferred_in_background();
      guard.lock();
      continue;
    }
    const uint64_t requests_before = checkpoint_requests_;
    guard.unlock();
    try {
      checkpoint_in_background();
    } catch (const std::exception& error) {
      guard.lock();
      // Still wanted unless a reset (another writer's checkpoint) did the job
      // meanwhile; tried again now only if a write asked while this one ran.
      checkpoint_wanted_ = checkpoint_wanted_ && checkpoint_requests_ != requests_before;
      const bool again = checkpoint_wanted_;
      guard.unlock();
      spdlog::warn("instance store: a checkpoint failed; {}: {}",
                   again ? "trying again, writes came meanwhile" : "the next write retries it",
                   error.what());
      guard.lock();
      continue;
    }
    guard.lock();
  }
}

// Fsyncs the unsynced files without the lock, then finishes under it if no
// write came meanwhile; else goes on with the files written meanwhile.
void JournalledWrites::checkpoint_in_background() {
  while (true) {
    while (const std::optional<UnsyncedFiles::Write> oldest = next_to_sync(Syncer::background)) {
      sync(*oldest);
      // An Allocate's flush does not wait for the round (thousands of files).
      if (deferred_sync_due()) settle_deferred_in_background();
    }
    const StoreWriteLock held = lock();
    note_changes(journal_.take_changes());
    settle_deferred();  // a deferral that is still open must not hold the checkpoint up
    if (!torn_.empty()) mend_torn_files();  // what it rewrites is fsynced in the next round
    {
      const std::lock_guard<std::mutex> guard(checkpoint_mutex_);
      if (stopping_ || !checkpoint_wanted_) return;  // stopping, or finished by someone else
      if (!unsynced_.empty()) continue;
    }
    finish_checkpoint();
    return;
  }
}

void JournalledWrites::recover() {
  const auto writes = journalled_writes(journal_);
  if (writes.empty()) return;
  // Only each Instance's last write says what its file must hold: an earlier
  // one is no loss (an Instance created, then removed, has no file).
  std::map<UnsyncedFiles::Key, size_t> last_write;
  for (size_t i = 0; i < writes.size(); ++i)
    last_write[{writes[i].write.namespace_name, writes[i].write.name}] = i;
  size_t repaired = 0;
  uint64_t highest_revision = 0;
  for (size_t i = 0; i < writes.size(); ++i) {
    const auto& [kind, write] = writes[i];
    highest_revision = std::max(highest_revision, write.revision);
    const UnsyncedFiles::Key file{write.namespace_name, write.name};
    if (last_write.at(file) == i && replay(files_, kind, write)) ++repaired;
    unsynced_.add(file);
  }
  next_revision(files_, highest_revision);  // the counter may have lost its last writes
  checkpoint();
  if (repaired > 0) {
    spdlog::warn(
        "instance store: {}: {} Instance file(s) had lost their last journalled write ({} "
        "Instances in the journal); redone",
        files_.root().string(), repaired, last_write.size());
  }
}

}  // namespace dowser::store::detail
