#include "state_log.hpp"

namespace opcua {

void StateLog::failed(const std::string& subject, const std::string& problem) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = problems_.try_emplace(subject, problem);
  if (!inserted && it->second == problem) return;
  it->second = problem;
  sink_(dowser::LogLevel::warn, subject + ": " + problem);
}

void StateLog::ok(const std::string& subject) {
  std::lock_guard lock(mutex_);
  if (problems_.erase(subject) == 0) return;
  sink_(dowser::LogLevel::info, subject + ": answers again");
}

}  // namespace opcua
