// The few CUDA runtime questions the accelerator layer asks: how many devices are visible,
// can one actually be used right now, and how full is it.
//
// Two implementations: device_query.cpp (CUDA builds, CUDA runtime API) and
// device_query_nocuda.cpp (builds without CUDA: no devices, and every call that needs a GPU
// throws DeviceError saying Tandem was built without CUDA). Simulated GPUs for tests
// (TANDEM_SIMULATE_CUDA_DEVICES) live in the accelerator layer, not here: this file always
// talks to the real hardware.
#pragma once
#include <cstddef>
#include <map>
#include <string>

namespace tandem::cuda {

// True when this build has the CUDA backend.
bool built_with_cuda();

// Devices visible to this process (after CUDA_VISIBLE_DEVICES). 0 when built without CUDA,
// when no driver is installed, or when the runtime reports an error; never throws.
int visible_device_count();

// Why visible_device_count() is what it is, in words: "2 devices", "no CUDA driver (...)",
// "Tandem was built without CUDA".
std::string device_count_note();

// The result of trying to use one device now.
struct DeviceProbe {
  bool usable = false;
  std::string reason;  // empty when usable; the runtime's error otherwise
};

// Creates a context on `index` (if there is none yet) and allocates a small buffer, which fails
// on a device another process holds in exclusive compute mode. The context is not reset
// afterwards: that would destroy what this process already holds on the device. Throws
// DeviceError when built without CUDA.
DeviceProbe probe_device(int index);

struct DeviceMemoryInfo {
  std::string name;            // "NVIDIA H100 80GB HBM3"
  size_t total_bytes = 0;
  size_t free_bytes = 0;       // as the driver reports, all processes together
  int utilization_percent = -1;         // from NVML when present, else -1
  int memory_utilization_percent = -1;  // likewise
};

// Memory and utilization of one device. Creates a context on it (cudaMemGetInfo needs one), so
// call it on the device this process uses. Throws DeviceError when built without CUDA or when
// the runtime fails.
DeviceMemoryInfo query_device_memory(int index);

// Tandem's own memory on `index` as the caching allocator counts it, by name: allocated_bytes,
// peak_allocated_bytes, reserved_bytes, peak_reserved_bytes, allocation_requests,
// cuda_malloc_calls, cache_flushes. Empty until the allocator has served its first device, and
// in builds without CUDA.
std::map<std::string, double> allocator_memory_stats(int index);

// Makes `index` the current device of the calling thread. Throws DeviceError on failure.
void set_current_device(int index);

}  // namespace tandem::cuda
