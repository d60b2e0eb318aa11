// Routes spdlog's default logger into a string, so that a test can check what
// was reported. Link spdlog.
#pragma once

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <mutex>
#include <string>

namespace dowser::test {

// Keeps every line logged to it. text() takes the sink's own lock: the code
// under test logs from its threads while the test reads.
class StringSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::string text() {
    const std::lock_guard lock(mutex_);
    return text_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(message, formatted);
    text_.append(formatted.data(), formatted.size());
  }
  void flush_() override {}

 private:
  std::string text_;
};

// Routes spdlog's default logger into a string for the life of the object.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) { spdlog::set_default_logger(logger_); }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  std::string text() const { return sink_->text(); }

 private:
  std::shared_ptr<StringSink> sink_ = std::make_shared<StringSink>();
  // Held until the capture goes, not only while it is the default logger.
  std::shared_ptr<spdlog::logger> logger_ = std::make_shared<spdlog::logger>("capture", sink_);
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace dowser::test
