// device_query for CUDA builds: the CUDA runtime API for counts, probes and memory, and NVML
// (loaded with dlopen, so the build does not need it) for utilization.
#include "kernels/cuda/device_query.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdlib>

#include "base/error.h"
#include "kernels/cuda/caching_allocator.h"

namespace tandem::cuda {

namespace {

std::string runtime_error_text(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

void check(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the non-sticky error so later calls start clean
    throw DeviceError(what + " failed (" + runtime_error_text(err) + ")");
  }
}

// NVML through dlopen: the few entry points we need, with their stable C signatures. NVML
// numbers devices without CUDA_VISIBLE_DEVICES, so devices are matched by PCI bus id.
struct Nvml {
  using InitFn = int (*)();
  using HandleByPciFn = int (*)(const char*, void**);
  struct Utilization { unsigned int gpu, memory; };
  using UtilizationFn = int (*)(void*, Utilization*);

  bool ok = false;
  HandleByPciFn handle_by_pci = nullptr;
  UtilizationFn utilization = nullptr;

  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib) return;
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
    handle_by_pci = reinterpret_cast<HandleByPciFn>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    utilization = reinterpret_cast<UtilizationFn>(dlsym(lib, "nvmlDeviceGetUtilizationRates"));
    ok = init && handle_by_pci && utilization && init() == 0;
  }
  static const Nvml& instance() {
    static const Nvml nvml;  // loaded once; never unloaded (NVML dislikes re-init)
    return nvml;
  }
};

}  // namespace

bool built_with_cuda() { return true; }

int visible_device_count() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

std::string device_count_note() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return "the CUDA runtime found no usable device (" + runtime_error_text(err) + ")";
  }
  std::string note = std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s") + " visible";
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    note += std::string(" (CUDA_VISIBLE_DEVICES=") + visible + ")";
  }
  return note;
}

DeviceProbe probe_device(int index) {
  DeviceProbe probe;
  int previous = 0;
  cudaGetDevice(&previous);
  cudaError_t err = cudaSetDevice(index);
  void* buffer = nullptr;
  // cudaMalloc forces context creation, which is what fails on an exclusive-mode device held
  // by someone else; a 1 MiB allocation also catches a device whose memory is exhausted.
  if (err == cudaSuccess) err = cudaMalloc(&buffer, 1 << 20);
  if (err == cudaSuccess) {
    cudaFree(buffer);
    probe.usable = true;
  } else {
    probe.reason = runtime_error_text(err);
    cudaGetLastError();
  }
  // No cudaDeviceReset here: it would destroy the primary context under everything this process
  // already made on the device (the compute stream, library handles, cached allocations, pinned
  // buffers). The context a probe creates stays; on an exclusive-mode device that is the price of
  // asking, and training uses the device it probed.
  cudaGetLastError();
  cudaSetDevice(previous);
  return probe;
}

DeviceMemoryInfo query_device_memory(int index) {
  DeviceMemoryInfo info;
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties(" + std::to_string(index) + ")");
  info.name = prop.name;
  int previous = 0;
  check(cudaGetDevice(&previous), "cudaGetDevice");
  check(cudaSetDevice(index), "cudaSetDevice(" + std::to_string(index) + ")");
  cudaError_t err = cudaMemGetInfo(&info.free_bytes, &info.total_bytes);
  cudaSetDevice(previous);
  check(err, "cudaMemGetInfo on device " + std::to_string(index));

  const Nvml& nvml = Nvml::instance();
  char bus_id[32] = {0};
  if (nvml.ok && cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), index) == cudaSuccess) {
    void* handle = nullptr;
    Nvml::Utilization util{};
    if (nvml.handle_by_pci(bus_id, &handle) == 0 && nvml.utilization(handle, &util) == 0) {
      info.utilization_percent = static_cast<int>(util.gpu);
      info.memory_utilization_percent = static_cast<int>(util.memory);
    }
  }
  cudaGetLastError();
  return info;
}

std::map<std::string, double> allocator_memory_stats(int index) {
  if (!allocator_started()) return {};
  const AllocatorStats s = allocator_stats(index);
  return {{"allocated_bytes", double(s.allocated_bytes)},
          {"peak_allocated_bytes", double(s.peak_allocated_bytes)},
          {"reserved_bytes", double(s.reserved_bytes)},
          {"peak_reserved_bytes", double(s.peak_reserved_bytes)},
          {"allocation_requests", double(s.requests)},
          {"cuda_malloc_calls", double(s.driver_allocations)},
          {"cache_flushes", double(s.cache_flushes)}};
}

void set_current_device(int index) {
  check(cudaSetDevice(index), "cudaSetDevice(" + std::to_string(index) + ")");
}

}  // namespace tandem::cuda
