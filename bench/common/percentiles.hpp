// Latency percentiles as the store benchmarks print them: one line per set of
// samples, in microseconds.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace dowser::bench {

// The q-quantile (0 to 1) of sorted samples; 0 if there are none.
inline double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1,
                         static_cast<size_t>(q * static_cast<double>(sorted.size())))];
}

inline void print_percentiles(const std::string& what, std::vector<double> micros) {
  std::sort(micros.begin(), micros.end());
  std::printf("%-23s n=%-6zu p50 %5.0f  p90 %5.0f  p99 %6.0f  p99.9 %6.0f  max %7.0f us\n",
              what.c_str(), micros.size(), percentile(micros, 0.5), percentile(micros, 0.9),
              percentile(micros, 0.99), percentile(micros, 0.999),
              micros.empty() ? 0.0 : micros.back());
}

}  // namespace dowser::bench
