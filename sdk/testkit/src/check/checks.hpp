// The conformance checks of dowser-handler-check. Each check runs in its own
// forked child, which loads the handler itself: this process never loads it,
// so a handler that crashes or hangs cannot take the checker down.
#pragma once

#include <dowser/handler.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace dowser::check {

struct Settings {
  std::filesystem::path handler_file;
  DiscoverRequest request;
  std::chrono::milliseconds duration{1000};       // how long discovery runs
  std::chrono::milliseconds stop_timeout{2000};   // the longest stop_discovery may take
  std::chrono::milliseconds start_timeout{1000};  // the longest start_discovery may take (T3)
};

enum class Verdict { passed, failed, skipped };

struct CheckOutcome {
  std::string name;
  Verdict verdict = Verdict::failed;
  std::string detail;  // one line: what was seen
  std::vector<std::string> warnings;
  std::vector<std::string> handler_log;  // what the handler logged, "<level>: <text>"
};

struct Report {
  std::optional<nlohmann::json> handler;  // {name, version, abi, shared}, once loaded
  std::optional<nlohmann::json> devices;  // the latest snapshot, once "discover" passed
  std::vector<CheckOutcome> checks;
  bool passed() const;
};

// Runs every check in order; a check whose prerequisite failed is skipped.
// finished, if set, hears each outcome as it is known (a run can take
// minutes). Must be called while this process is single-threaded (it forks).
Report run_checks(const Settings& settings,
                  const std::function<void(const CheckOutcome&)>& finished = {});

}  // namespace dowser::check
