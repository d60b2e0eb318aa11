// Runs work(i) for i in [0, count) on at most max_threads threads, so that
// one slow item (a server that does not answer) does not hold up the rest.
#ifndef DOWSER_HANDLERS_OPCUA_PARALLEL_HPP
#define DOWSER_HANDLERS_OPCUA_PARALLEL_HPP

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace opcua {

// work must not throw; it runs on this thread too.
template <typename Work>
void parallel_for(size_t count, size_t max_threads, const Work& work) {
  std::atomic<size_t> next{0};
  auto drain = [&] {
    for (size_t i = next++; i < count; i = next++) work(i);
  };
  size_t helpers = std::min(count, std::max<size_t>(max_threads, 1)) - (count > 0 ? 1 : 0);
  std::vector<std::jthread> threads;
  threads.reserve(helpers);
  for (size_t t = 0; t < helpers; ++t) threads.emplace_back(drain);
  drain();
}

}  // namespace opcua

#endif  // DOWSER_HANDLERS_OPCUA_PARALLEL_HPP
