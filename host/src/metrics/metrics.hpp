// Metrics: a small registry of counters, gauges and histograms with the
// Prometheus text exposition format (version 0.0.4), plus the standard
// process metrics. Updating a metric is one atomic operation and safe from
// any thread; callers keep the reference that with() returns so hot paths
// never look up labels.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace dowser::metrics {

// Label values, in the order of the family's label names.
using LabelValues = std::vector<std::string>;

enum class Type { counter, gauge, histogram };

class Counter {
 public:
  void inc(uint64_t by = 1) noexcept { value_.fetch_add(by, std::memory_order_relaxed); }
  uint64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

class Gauge {
 public:
  void set(double value) noexcept { value_.store(value, std::memory_order_relaxed); }
  void add(double by) noexcept { value_.fetch_add(by, std::memory_order_relaxed); }
  double value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Observations counted into fixed buckets (upper bounds, ascending). A
// scrape racing an observe may see the count one ahead of the buckets;
// Prometheus tolerates that.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value) noexcept;
  const std::vector<double>& bounds() const noexcept { return bounds_; }
  // Per bucket (not cumulative), the last one being +Inf.
  std::vector<uint64_t> bucket_counts() const;
  uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }
  double sum() const noexcept { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

// Buckets for latencies from a millisecond to a minute, in seconds.
std::vector<double> latency_buckets();

class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, Type type, std::vector<std::string> label_names);
  virtual ~FamilyBase() = default;
  const std::string& name() const noexcept { return name_; }
  Type type() const noexcept { return type_; }
  const std::vector<std::string>& label_names() const noexcept { return label_names_; }
  // Appends HELP, TYPE and every sample.
  void write(std::string& out) const;

 protected:
  void check_arity(const LabelValues& values) const;
  virtual void write_samples(std::string& out) const = 0;
  // `name{labels,extra} value\n`
  void write_sample(std::string& out, std::string_view suffix, const LabelValues& values,
                    std::string_view value, std::string_view extra_label = {},
                    std::string_view extra_value = {}) const;

 private:
  std::string name_;
  std::string help_;
  Type type_;
  std::vector<std::string> label_names_;
};

// One metric per combination of label values, made on first use.
template <typename Metric>
class Family : public FamilyBase {
 public:
  using Factory = std::function<std::unique_ptr<Metric>()>;
  Family(std::string name, std::string help, Type type, std::vector<std::string> label_names,
         Factory factory)
      : FamilyBase(std::move(name), std::move(help), type, std::move(label_names)),
        factory_(std::move(factory)) {}

  // The metric for these label values. The reference stays valid until
  // replace() or remove() drops it.
  Metric& with(const LabelValues& values = {}) {
    check_arity(values);
    std::lock_guard lock(mutex_);
    auto& slot = children_[values];
    if (!slot) slot = factory_();
    return *slot;
  }

  void remove(const LabelValues& values) {
    std::lock_guard lock(mutex_);
    children_.erase(values);
  }

  // Makes these the only children (state recomputed wholesale, e.g. gauges
  // per Configuration): a scrape sees the old set or the new one, never a mix.
  void replace(const std::vector<std::pair<LabelValues, double>>& values) requires
      std::is_same_v<Metric, Gauge> {
    std::map<LabelValues, std::unique_ptr<Metric>> next;
    for (const auto& [labels, value] : values) {
      check_arity(labels);
      auto& slot = next[labels];
      if (!slot) slot = factory_();
      slot->set(value);
    }
    std::lock_guard lock(mutex_);
    children_.swap(next);
  }

 protected:
  void write_samples(std::string& out) const override;

 private:
  Factory factory_;
  mutable std::mutex mutex_;
  std::map<LabelValues, std::unique_ptr<Metric>> children_;
};

template <>
void Family<Counter>::write_samples(std::string& out) const;
template <>
void Family<Gauge>::write_samples(std::string& out) const;
template <>
void Family<Histogram>::write_samples(std::string& out) const;

class Registry {
 public:
  // Registering a name twice returns the first family when type and labels
  // match, and throws std::invalid_argument otherwise (also for names and
  // label names Prometheus would refuse).
  Family<Counter>& counter(const std::string& name, const std::string& help,
                           std::vector<std::string> label_names = {});
  Family<Gauge>& gauge(const std::string& name, const std::string& help,
                       std::vector<std::string> label_names = {});
  Family<Histogram>& histogram(const std::string& name, const std::string& help,
                               std::vector<double> bounds,
                               std::vector<std::string> label_names = {});
  // A label-less value read at every scrape (from the scraping thread).
  void callback(const std::string& name, const std::string& help, Type type,
                std::function<double()> read);

  // Every family, sorted by name, in the Prometheus text format.
  std::string expose() const;

 private:
  template <typename Metric>
  Family<Metric>& add(const std::string& name, const std::string& help, Type type,
                      std::vector<std::string> label_names,
                      typename Family<Metric>::Factory factory);

  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<FamilyBase>> families_;
};

// process_cpu_seconds_total, process_resident_memory_bytes,
// process_virtual_memory_bytes, process_open_fds, process_max_fds,
// process_threads and process_start_time_seconds, read from /proc at scrape.
void add_process_metrics(Registry& registry);

// The content type of expose()'s output.
inline constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

// Prometheus number syntax: shortest round-trip form, +Inf, -Inf, NaN.
std::string format_value(double value);

}  // namespace dowser::metrics
