// How dowser-handler-check prints its report: a readable text form (device
// table, then one line per check) or one JSON document.
#pragma once

#include "checks.hpp"

#include <filesystem>
#include <ostream>

namespace dowser::check {

// Devices as an aligned table, then "PASS|FAIL|SKIP|WARN <check>: <detail>"
// lines, one per check (and per warning), then a summary line. What the
// handler logged follows a failed check ("LOG  <check>: <level>: <text>"),
// and every check with show_log.
void print_text(std::ostream& out, const std::filesystem::path& handler_file, const Report& report,
                bool show_log);

// {handler:{name,version,abi,shared}|null, devices:[...],
//  checks:[{name,passed,skipped,detail,warnings,log}], passed}
void print_json(std::ostream& out, const Report& report);

// "PASS", "FAIL" or "SKIP", as the text report begins a check's line.
const char* verdict_word(Verdict verdict);

}  // namespace dowser::check
