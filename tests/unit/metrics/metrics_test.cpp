// The metrics registry: exposition text, labels, histograms, thread safety.
#include "metrics.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <sstream>
#include <thread>

namespace dowser::metrics {
namespace {

using ::testing::HasSubstr;

// The value of the sample line that starts with `prefix ` in text, or NaN.
double sample(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(prefix + " ", 0) == 0) return std::stod(line.substr(prefix.size() + 1));
  return std::numeric_limits<double>::quiet_NaN();
}

TEST(Metrics, CounterWithLabelsIsExposedWithHelpAndType) {
  Registry registry;
  auto& calls = registry.counter("calls_total", "Calls made.", {"kind", "result"});
  calls.with({"instance", "ok"}).inc();
  calls.with({"instance", "ok"}).inc(2);
  calls.with({"configuration", "refused"}).inc();
  EXPECT_EQ(registry.expose(),
            "# HELP calls_total Calls made.\n"
            "# TYPE calls_total counter\n"
            "calls_total{kind=\"configuration\",result=\"refused\"} 1\n"
            "calls_total{kind=\"instance\",result=\"ok\"} 3\n");
}

TEST(Metrics, FamiliesAreSortedByNameAndLabelValuesEscaped) {
  Registry registry;
  registry.gauge("b_gauge", "Second.\nLine two \\ done").with().set(0.25);
  registry.gauge("a_gauge", "First.", {"path"}).with({"C:\\dir \"x\"\nnext"}).set(-3);
  EXPECT_EQ(registry.expose(),
            "# HELP a_gauge First.\n"
            "# TYPE a_gauge gauge\n"
            "a_gauge{path=\"C:\\\\dir \\\"x\\\"\\nnext\"} -3\n"
            "# HELP b_gauge Second.\\nLine two \\\\ done\n"
            "# TYPE b_gauge gauge\n"
            "b_gauge 0.25\n");
}

TEST(Metrics, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Registry registry;
  auto& latency = registry.histogram("latency_seconds", "Latency.", {0.1, 1}, {"kind"});
  auto& h = latency.with({"il"});
  h.observe(0.05);
  h.observe(0.1);  // on a bound: counted in that bucket ("le")
  h.observe(0.5);
  h.observe(7);
  EXPECT_EQ(registry.expose(),
            "# HELP latency_seconds Latency.\n"
            "# TYPE latency_seconds histogram\n"
            "latency_seconds_bucket{kind=\"il\",le=\"0.1\"} 2\n"
            "latency_seconds_bucket{kind=\"il\",le=\"1\"} 3\n"
            "latency_seconds_bucket{kind=\"il\",le=\"+Inf\"} 4\n"
            "latency_seconds_sum{kind=\"il\"} 7.65\n"
            "latency_seconds_count{kind=\"il\"} 4\n");
}

TEST(Metrics, ReplaceSwapsTheWholeSetOfGauges) {
  Registry registry;
  auto& instances = registry.gauge("instances", "Instances.", {"configuration"});
  instances.replace({{{"cams"}, 2}, {{"mics"}, 1}});
  instances.replace({{{"cams"}, 3}});
  auto text = registry.expose();
  EXPECT_EQ(sample(text, "instances{configuration=\"cams\"}"), 3);
  EXPECT_THAT(text, ::testing::Not(HasSubstr("mics")));
}

TEST(Metrics, RegisteringTwiceReturnsTheSameFamilyOrRefusesAMismatch) {
  Registry registry;
  auto& first = registry.counter("x_total", "X.", {"a"});
  EXPECT_EQ(&registry.counter("x_total", "X.", {"a"}), &first);
  EXPECT_THROW(registry.counter("x_total", "X.", {"b"}), std::invalid_argument);
  EXPECT_THROW(registry.gauge("x_total", "X."), std::invalid_argument);
  EXPECT_THROW(registry.callback("x_total", "X.", Type::gauge, [] { return 1.0; }),
               std::invalid_argument);
}

TEST(Metrics, InvalidNamesLabelsAndArityAreRefused) {
  Registry registry;
  EXPECT_THROW(registry.counter("1bad", "."), std::invalid_argument);
  EXPECT_THROW(registry.counter("bad-name", "."), std::invalid_argument);
  EXPECT_THROW(registry.counter("ok", ".", {"__reserved"}), std::invalid_argument);
  EXPECT_THROW(registry.histogram("h", ".", {1, 2}, {"le"}), std::invalid_argument);
  EXPECT_THROW(registry.histogram("h2", ".", {2, 1}), std::invalid_argument);
  auto& labelled = registry.counter("labelled_total", ".", {"a", "b"});
  EXPECT_THROW(labelled.with({"only-one"}), std::invalid_argument);
}

TEST(Metrics, ConcurrentUpdatesAreAllCounted) {
  Registry registry;
  auto& counter = registry.counter("hits_total", "Hits.").with();
  auto& histogram = registry.histogram("h_seconds", "H.", latency_buckets()).with();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        counter.inc();
        histogram.observe(0.002);
      }
    });
  }
  // Scrapes while the threads count must not disturb them.
  for (int i = 0; i < 20; ++i) registry.expose();
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(counter.value(), 40000u);
  auto text = registry.expose();
  EXPECT_EQ(sample(text, "h_seconds_count"), 40000);
  EXPECT_EQ(sample(text, "h_seconds_bucket{le=\"0.0025\"}"), 40000);
  EXPECT_EQ(sample(text, "h_seconds_bucket{le=\"0.001\"}"), 0);
}

TEST(Metrics, ProcessMetricsDescribeThisProcess) {
  Registry registry;
  add_process_metrics(registry);
  std::thread extra([] {});  // at least two threads while scraping
  auto text = registry.expose();
  extra.join();
  EXPECT_GT(sample(text, "process_resident_memory_bytes"), 1e5);
  EXPECT_GE(sample(text, "process_virtual_memory_bytes"),
            sample(text, "process_resident_memory_bytes"));
  EXPECT_GE(sample(text, "process_open_fds"), 3);  // stdin, stdout, stderr at least
  EXPECT_GT(sample(text, "process_max_fds"), sample(text, "process_open_fds"));
  EXPECT_GE(sample(text, "process_threads"), 1);
  EXPECT_GE(sample(text, "process_cpu_seconds_total"), 0);
  EXPECT_GT(sample(text, "process_start_time_seconds"), 1.6e9);
  EXPECT_LE(sample(text, "process_start_time_seconds"),
            static_cast<double>(std::time(nullptr)) + 1);
  EXPECT_THAT(text, HasSubstr("# TYPE process_cpu_seconds_total counter\n"));
}

TEST(Metrics, ValuesUsePrometheusNumberSyntax) {
  EXPECT_EQ(format_value(1), "1");
  EXPECT_EQ(format_value(0.005), "0.005");
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_value(std::numeric_limits<double>::quiet_NaN()), "NaN");
}

}  // namespace
}  // namespace dowser::metrics
