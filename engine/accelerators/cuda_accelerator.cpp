#include "engine/accelerators/cuda_accelerator.h"

#include <cstdlib>
#include <mutex>

#include "engine/accelerators/device_parsing.h"
#include "engine/core/error.h"
#include "kernels/cuda/device_query.h"

namespace tandem {

namespace {

constexpr const char* kSimulateVar = "TANDEM_SIMULATE_CUDA_DEVICES";
constexpr const char* kSimulateBusyVar = "TANDEM_SIMULATE_BUSY_CUDA_DEVICES";

std::mutex g_provider_mutex;
CudaAllocatorStatsProvider g_allocator_stats;

std::string machine_note() {
  const CudaSimulation sim = cuda_simulation_from_env();
  if (sim.device_count >= 0) return std::string("simulated by ") + kSimulateVar;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    return std::string("indices are relative to CUDA_VISIBLE_DEVICES=") + visible;
  }
  return cuda::built_with_cuda() ? "" : "Tandem was built without CUDA";
}

}  // namespace

CudaSimulation cuda_simulation_from_env() {
  CudaSimulation sim;
  if (const char* count = std::getenv(kSimulateVar)) {
    if (!parse_int_strict(count, &sim.device_count) || sim.device_count < 0) {
      throw ConfigError(std::string(kSimulateVar) + "=" + count + " is not a device count; set "
                        "it to an integer >= 0 (e.g. 4), or unset it to see the real GPUs");
    }
    sim.active = true;
  }
  if (const char* busy = std::getenv(kSimulateBusyVar)) {
    sim.active = true;
    std::string text = busy;
    size_t start = 0;
    while (start <= text.size()) {
      size_t comma = text.find(',', start);
      if (comma == std::string::npos) comma = text.size();
      std::string part = text.substr(start, comma - start);
      start = comma + 1;
      if (part.find_first_not_of(" \t") == std::string::npos) continue;
      int index = 0;
      if (!parse_int_strict(part, &index) || index < 0) {
        throw ConfigError(std::string(kSimulateBusyVar) + "=" + text + ": '" + part + "' is not "
                          "a device index; use a comma-separated list like 1,3");
      }
      sim.busy.insert(index);
    }
  }
  return sim;
}

int cuda_device_count() {
  const CudaSimulation sim = cuda_simulation_from_env();
  return sim.device_count >= 0 ? sim.device_count : cuda::visible_device_count();
}

std::vector<int> CUDAAccelerator::parse_devices(const DevicesSpec& devices) const {
  return parse_indexed_devices(devices, IndexedDeviceContext{"cuda", cuda_device_count(), machine_note()});
}

std::string CUDAAccelerator::availability_note() const {
  const CudaSimulation sim = cuda_simulation_from_env();
  if (sim.device_count >= 0) {
    return std::to_string(sim.device_count) + " simulated CUDA device" +
           (sim.device_count == 1 ? "" : "s") + " (" + kSimulateVar + ")";
  }
  return cuda::device_count_note();
}

DeviceStats CUDAAccelerator::get_device_stats(const AcceleratorDevice& device) const {
  if (cuda_simulation_from_env().device_count >= 0) return {{"simulated", 1.0}};
  const cuda::DeviceMemoryInfo info = cuda::query_device_memory(device.index);
  DeviceStats stats{{"memory_total_bytes", static_cast<double>(info.total_bytes)},
                    {"memory_free_bytes", static_cast<double>(info.free_bytes)},
                    {"memory_used_bytes", static_cast<double>(info.total_bytes - info.free_bytes)}};
  if (info.utilization_percent >= 0) stats["utilization_percent"] = info.utilization_percent;
  if (info.memory_utilization_percent >= 0) {
    stats["memory_utilization_percent"] = info.memory_utilization_percent;
  }
  std::lock_guard<std::mutex> lock(g_provider_mutex);
  if (g_allocator_stats) {
    for (const auto& [k, v] : g_allocator_stats(device.index)) stats[k] = v;
  }
  return stats;
}

void CUDAAccelerator::setup_device(const AcceleratorDevice& device) {
  if (cuda_simulation_from_env().active) {
    throw ConfigError(std::string("refusing to train on ") + device.str() + ": " + kSimulateVar +
                      " or " + kSimulateBusyVar + " is set, and simulated GPUs can only be "
                      "planned, not trained on; unset them to train on the real devices");
  }
  cuda::set_current_device(device.index);
}

std::vector<int> find_usable_cuda_devices(int n) {
  if (n == 0 || n < -1) {
    throw ConfigError("find_usable_cuda_devices(" + std::to_string(n) + "): n must be a number "
                      "of devices > 0, or -1 for every usable device");
  }
  const CudaSimulation sim = cuda_simulation_from_env();
  const int count = sim.device_count >= 0 ? sim.device_count : cuda::visible_device_count();
  const std::string machine = sim.device_count >= 0
      ? std::to_string(count) + " simulated CUDA devices"
      : cuda::device_count_note();
  if (count == 0 || n > count) {
    throw ConfigError("find_usable_cuda_devices(" + std::to_string(n) + "): this machine has " +
                      machine + "; ask for at most " + std::to_string(count) +
                      (count == 0 ? " (use --trainer.accelerator=cpu)" : ""));
  }
  for (int b : sim.busy) {
    if (b >= count) {
      throw ConfigError(std::string(kSimulateBusyVar) + " names device " + std::to_string(b) +
                        " but there are only " + std::to_string(count) + " devices");
    }
  }
  std::vector<int> usable;
  std::string occupied;
  for (int i = 0; i < count && (n == -1 || static_cast<int>(usable.size()) < n); ++i) {
    cuda::DeviceProbe probe;
    if (sim.busy.count(i)) {
      probe.reason = std::string("marked busy by ") + kSimulateBusyVar;
    } else if (sim.device_count >= 0) {
      probe.usable = true;  // a simulated device that is not marked busy is free
    } else {
      probe = cuda::probe_device(i);
    }
    if (probe.usable) {
      usable.push_back(i);
    } else {
      occupied += (occupied.empty() ? "" : "; ") + std::to_string(i) + " (" + probe.reason + ")";
    }
  }
  const int wanted = n == -1 ? 1 : n;
  if (static_cast<int>(usable.size()) < wanted) {
    throw DeviceError("find_usable_cuda_devices(" + std::to_string(n) + "): only " +
                      std::to_string(usable.size()) + " of " + std::to_string(count) +
                      " CUDA devices can be used now; occupied: " + occupied +
                      ". Wait for them to be freed, ask for fewer devices, or pick free ones with "
                      "--trainer.devices");
  }
  return usable;
}

void set_cuda_allocator_stats_provider(CudaAllocatorStatsProvider provider) {
  std::lock_guard<std::mutex> lock(g_provider_mutex);
  g_allocator_stats = std::move(provider);
}

}  // namespace tandem
