// What a CL plugin's list costs to serialize for its ListAndWatch streams:
// dowser's direct encoding (serialized_device_list) against the baseline of
// building the ListAndWatchResponse message on an arena and serializing it
// (how lists were written before), in the same run.
//
//   build/default/bin/list_encoding_bench
#include "device_plugins.hpp"

#include "deviceplugin/v1beta1/api.pb.h"

#include <benchmark/benchmark.h>
#include <google/protobuf/arena.h>

#include <string>
#include <vector>

namespace {

using dowser::capacity::PluginDevice;

// What a CL plugin lists: vdev ids "0", "1", ..., a few Unhealthy.
std::vector<PluginDevice> virtual_devices(int64_t count) {
  std::vector<PluginDevice> devices;
  devices.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) devices.push_back({std::to_string(i), i % 50 != 0});
  return devices;
}

void BM_BuildMessageAndSerialize(benchmark::State& state) {
  const auto devices = virtual_devices(state.range(0));
  for (auto _ : state) {
    google::protobuf::Arena arena;
    auto* list = google::protobuf::Arena::CreateMessage<v1beta1::ListAndWatchResponse>(&arena);
    list->mutable_devices()->Reserve(static_cast<int>(devices.size()));
    for (const auto& device : devices) {
      auto* entry = list->add_devices();
      entry->set_id(device.id);
      entry->set_health(device.healthy ? "Healthy" : "Unhealthy");
    }
    std::string bytes = list->SerializeAsString();
    benchmark::DoNotOptimize(bytes);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_SerializedDeviceList(benchmark::State& state) {
  const auto devices = virtual_devices(state.range(0));
  for (auto _ : state) {
    std::string bytes = dowser::plugins::serialized_device_list(devices);
    benchmark::DoNotOptimize(bytes);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

BENCHMARK(BM_BuildMessageAndSerialize)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SerializedDeviceList)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
