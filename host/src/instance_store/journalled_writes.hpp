// What the file store writes to its journal (StoreJournal), and what it does
// with the records: checkpoints and recovery after a crash. Call everything
// here with the store lock held.
#pragma once

#include <cstdint>
#include <string>

#include "instance_files.hpp"
#include "store_journal.hpp"

namespace dowser::store::detail {

// What a journal record says was written: the document is empty for a removal
// (whose revision is the one removed).
struct JournalledWrite {
  std::string namespace_name;
  std::string name;
  uint64_t revision = 0;
  std::string document;
};

JournalRecord to_record(JournalRecord::Kind kind, const JournalledWrite& write);

// Makes every file the journal covers durable (and the revision counter),
// then empties the journal.
void checkpoint(const InstanceFiles& files, StoreJournal& journal);

// After a crash the files may lack writes the journal holds: redoes them (by
// revision: a file at or past a record's revision is left alone), then
// checkpoints. Harmless while another process uses the store: its files are at
// or past every journalled revision. A write that cannot be redone throws
// StoreError(io), and the journal keeps it for the next try.
void recover(const InstanceFiles& files, StoreJournal& journal);

}  // namespace dowser::store::detail
