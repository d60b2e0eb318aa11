// What a metrics scrape pays, on the core thread, to count every slot of the
// Instances here (dowser_slots, the status API's slots): a decode of each
// Instance's deviceUsage, against the baseline of the Instance count per
// Configuration the scrape made before, over the same cache in one run.
//
//   build/default/bin/slot_tally_bench
#include "capacity_manager.hpp"

#include <benchmark/benchmark.h>

#include <map>
#include <string>

namespace {

using dowser::capacity::InstanceKey;
using dowser::store::StoredInstance;

// Instances of capacity 4: one slot held by this node's IL plugin, one by
// its CL plugin, two free, as a busy node's cache holds them.
std::map<InstanceKey, StoredInstance> cache_of(int64_t count) {
  std::map<InstanceKey, StoredInstance> cache;
  for (int64_t i = 0; i < count; ++i) {
    StoredInstance stored;
    auto& instance = stored.instance;
    instance.namespace_name = "default";
    instance.name = "cams-" + std::to_string(100000 + i);
    instance.configuration_name = "cams";
    instance.capacity = 4;
    instance.device_usage = {{instance.name + "-0", "node-a"},
                             {instance.name + "-1", "C:" + std::to_string(i) + ":node-a"},
                             {instance.name + "-2", ""},
                             {instance.name + "-3", ""}};
    cache.emplace(InstanceKey{instance.namespace_name, instance.name}, std::move(stored));
  }
  return cache;
}

void BM_CountInstances(benchmark::State& state) {
  const auto cache = cache_of(state.range(0));
  for (auto _ : state) {
    std::map<std::string, uint64_t> counts;
    for (const auto& [key, stored] : cache) ++counts[stored.instance.configuration_name];
    benchmark::DoNotOptimize(counts);
  }
}

void BM_TallySlots(benchmark::State& state) {
  const auto cache = cache_of(state.range(0));
  for (auto _ : state) {
    std::map<std::string, dowser::capacity::SlotTally> tallies;
    for (const auto& [key, stored] : cache) {
      tallies[stored.instance.configuration_name].add(
          dowser::capacity::InstanceSlots::decode(stored.instance), "node-a");
    }
    benchmark::DoNotOptimize(tallies);
  }
}

BENCHMARK(BM_CountInstances)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TallySlots)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
