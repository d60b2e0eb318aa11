#include "metrics.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace dowser::metrics {
namespace {

bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool name_char(char c) { return name_start(c) || std::isdigit(static_cast<unsigned char>(c)); }

void check_metric_name(const std::string& name) {
  // [a-zA-Z_:][a-zA-Z0-9_:]*
  bool ok = !name.empty() && (name_start(name[0]) || name[0] == ':') &&
            std::all_of(name.begin(), name.end(), [](char c) { return name_char(c) || c == ':'; });
  if (!ok) throw std::invalid_argument("invalid metric name '" + name + "'");
}

void check_label_name(const std::string& label) {
  // [a-zA-Z_][a-zA-Z0-9_]*, and names starting with __ are reserved.
  bool ok = !label.empty() && name_start(label[0]) &&
            std::all_of(label.begin(), label.end(), name_char) && label.rfind("__", 0) != 0 &&
            label != "le";
  if (!ok) throw std::invalid_argument("invalid label name '" + label + "'");
}

void append_escaped(std::string& out, std::string_view text, bool quote) {
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

std::string_view type_name(Type type) {
  switch (type) {
    case Type::counter:
      return "counter";
    case Type::gauge:
      return "gauge";
    case Type::histogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return error == std::errc() ? std::string(buffer, end) : "NaN";
}

// ---- Histogram ---------------------------------------------------------------------

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {
  if (!std::is_sorted(bounds_.begin(), bounds_.end()) ||
      std::adjacent_find(bounds_.begin(), bounds_.end()) != bounds_.end())
    throw std::invalid_argument("histogram bounds must be strictly ascending");
}

void Histogram::observe(double value) noexcept {
  // The first bound >= value: Prometheus buckets are "less than or equal".
  auto index = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  buckets_[static_cast<size_t>(index)].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::bucket_counts() const {
  std::vector<uint64_t> counts(bounds_.size() + 1);
  for (size_t i = 0; i < counts.size(); ++i)
    counts[i] = buckets_[i].load(std::memory_order_relaxed);
  return counts;
}

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

// ---- families ----------------------------------------------------------------------

FamilyBase::FamilyBase(std::string name, std::string help, Type type,
                       std::vector<std::string> label_names)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)) {
  check_metric_name(name_);
  for (const auto& label : label_names_) check_label_name(label);
}

void FamilyBase::check_arity(const LabelValues& values) const {
  if (values.size() != label_names_.size()) {
    throw std::invalid_argument("metric " + name_ + " takes " +
                                std::to_string(label_names_.size()) + " label values, not " +
                                std::to_string(values.size()));
  }
}

void FamilyBase::write(std::string& out) const {
  out += "# HELP ";
  out += name_;
  out += ' ';
  append_escaped(out, help_, false);
  out += "\n# TYPE ";
  out += name_;
  out += ' ';
  out += type_name(type_);
  out += '\n';
  write_samples(out);
}

void FamilyBase::write_sample(std::string& out, std::string_view suffix, const LabelValues& values,
                              std::string_view value, std::string_view extra_label,
                              std::string_view extra_value) const {
  out += name_;
  out += suffix;
  bool any = !values.empty() || !extra_label.empty();
  if (any) out += '{';
  auto label = [&out, first = true](std::string_view name, std::string_view text) mutable {
    if (!first) out += ',';
    first = false;
    out += name;
    out += "=\"";
    append_escaped(out, text, true);
    out += '"';
  };
  for (size_t i = 0; i < values.size(); ++i) label(label_names_[i], values[i]);
  if (!extra_label.empty()) label(extra_label, extra_value);
  if (any) out += '}';
  out += ' ';
  out += value;
  out += '\n';
}

template <>
void Family<Counter>::write_samples(std::string& out) const {
  std::lock_guard lock(mutex_);
  for (const auto& [labels, counter] : children_)
    write_sample(out, "", labels, std::to_string(counter->value()));
}

template <>
void Family<Gauge>::write_samples(std::string& out) const {
  std::lock_guard lock(mutex_);
  for (const auto& [labels, gauge] : children_)
    write_sample(out, "", labels, format_value(gauge->value()));
}

template <>
void Family<Histogram>::write_samples(std::string& out) const {
  std::lock_guard lock(mutex_);
  for (const auto& [labels, histogram] : children_) {
    auto counts = histogram->bucket_counts();
    uint64_t cumulative = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      cumulative += counts[i];
      std::string bound =
          i < histogram->bounds().size() ? format_value(histogram->bounds()[i]) : "+Inf";
      write_sample(out, "_bucket", labels, std::to_string(cumulative), "le", bound);
    }
    write_sample(out, "_sum", labels, format_value(histogram->sum()));
    // The buckets' total, so _count always equals the +Inf bucket.
    write_sample(out, "_count", labels, std::to_string(cumulative));
  }
}

// A label-less value computed at scrape time.
class CallbackFamily : public FamilyBase {
 public:
  CallbackFamily(std::string name, std::string help, Type type, std::function<double()> read)
      : FamilyBase(std::move(name), std::move(help), type, {}), read_(std::move(read)) {}

 protected:
  void write_samples(std::string& out) const override {
    write_sample(out, "", {}, format_value(read_()));
  }

 private:
  std::function<double()> read_;
};

// ---- Registry ----------------------------------------------------------------------

template <typename Metric>
Family<Metric>& Registry::add(const std::string& name, const std::string& help, Type type,
                              std::vector<std::string> label_names,
                              typename Family<Metric>::Factory factory) {
  std::lock_guard lock(mutex_);
  if (auto it = families_.find(name); it != families_.end()) {
    auto* existing = dynamic_cast<Family<Metric>*>(it->second.get());
    if (!existing || existing->type() != type || existing->label_names() != label_names)
      throw std::invalid_argument("metric " + name + " is already registered differently");
    return *existing;
  }
  auto family = std::make_unique<Family<Metric>>(name, help, type, std::move(label_names),
                                                 std::move(factory));
  auto& result = *family;
  families_.emplace(name, std::move(family));
  return result;
}

Family<Counter>& Registry::counter(const std::string& name, const std::string& help,
                                   std::vector<std::string> label_names) {
  return add<Counter>(name, help, Type::counter, std::move(label_names),
                      [] { return std::make_unique<Counter>(); });
}

Family<Gauge>& Registry::gauge(const std::string& name, const std::string& help,
                               std::vector<std::string> label_names) {
  return add<Gauge>(name, help, Type::gauge, std::move(label_names),
                    [] { return std::make_unique<Gauge>(); });
}

Family<Histogram>& Registry::histogram(const std::string& name, const std::string& help,
                                       std::vector<double> bounds,
                                       std::vector<std::string> label_names) {
  Histogram probe(bounds);  // checks the bounds now, not at first use
  return add<Histogram>(
      name, help, Type::histogram, std::move(label_names),
      [bounds = std::move(bounds)] { return std::make_unique<Histogram>(bounds); });
}

void Registry::callback(const std::string& name, const std::string& help, Type type,
                        std::function<double()> read) {
  if (type == Type::histogram)
    throw std::invalid_argument("a callback metric cannot be a histogram");
  auto family = std::make_unique<CallbackFamily>(name, help, type, std::move(read));
  std::lock_guard lock(mutex_);
  if (!families_.emplace(name, std::move(family)).second)
    throw std::invalid_argument("metric " + name + " is already registered");
}

std::string Registry::expose() const {
  std::string out;
  std::lock_guard lock(mutex_);
  for (const auto& [name, family] : families_) family->write(out);
  return out;
}

}  // namespace dowser::metrics
