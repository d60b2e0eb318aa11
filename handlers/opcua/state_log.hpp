// Logs what goes wrong with a URL or a server once per change of state, not
// once per scan: a dead URL scanned every 10 s logs one line until it
// answers again (or fails differently).
#ifndef DOWSER_HANDLERS_OPCUA_STATE_LOG_HPP
#define DOWSER_HANDLERS_OPCUA_STATE_LOG_HPP

#include <dowser/handler.hpp>

#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace opcua {

class StateLog {
 public:
  using Sink = std::function<void(dowser::LogLevel, const std::string&)>;
  explicit StateLog(Sink sink) : sink_(std::move(sink)) {}

  // Thread-safe. `subject` is a URL; `problem` says what is wrong with it.
  void failed(const std::string& subject, const std::string& problem);
  void ok(const std::string& subject);

 private:
  Sink sink_;
  std::mutex mutex_;
  std::map<std::string, std::string> problems_;  // subject -> the problem last logged
};

}  // namespace opcua

#endif  // DOWSER_HANDLERS_OPCUA_STATE_LOG_HPP
