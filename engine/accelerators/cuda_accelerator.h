// CUDA: devices are GPU indices relative to CUDA_VISIBLE_DEVICES, parsed per the devices table
// (device_parsing.h). "gpu" is an alias of "cuda".
//
// Simulated GPUs, for tests and dry runs on machines without them:
//   TANDEM_SIMULATE_CUDA_DEVICES=N        the machine has N CUDA devices (even without CUDA);
//                                         CUDA_VISIBLE_DEVICES selects and renumbers them as
//                                         the runtime would (indices only, no UUIDs)
//   TANDEM_SIMULATE_BUSY_CUDA_DEVICES=1,3 find_usable_cuda_devices treats visible devices 1 and
//                                         3 as occupied (real or simulated ones)
// With either set, training refuses to start (refuse_training_when_simulating): a plan is all
// they are good for.
#pragma once
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/accelerators/accelerator.h"

namespace tandem {

struct CudaSimulation {
  bool active = false;      // TANDEM_SIMULATE_CUDA_DEVICES or _BUSY_ is set
  int device_count = -1;    // -1: not simulated, ask the runtime
  std::set<int> busy;       // indices to report as occupied
};

// Reads the two variables; throws ConfigError naming the variable when a value is malformed.
CudaSimulation cuda_simulation_from_env();

// Visible CUDA devices: the simulated count when set, else the runtime's.
int cuda_device_count();

// With CUDA_VISIBLE_DEVICES set, which of the machine's GPUs the visible indices are, e.g.
// "CUDA_VISIBLE_DEVICES=2,3: cuda:1 is the machine's GPU 3"; nullopt when it is unset.
std::optional<std::string> cuda_visible_devices_note(const std::vector<int>& indices);

// Throws ConfigError ("refusing to <what>: ...") when either simulation variable is set.
// The Trainer calls it before anything else, and CUDAAccelerator::setup_device again.
void refuse_training_when_simulating(const std::string& what);

class CUDAAccelerator : public Accelerator {
 public:
  std::string name() const override { return "cuda"; }
  bool allocated_as_gpus() const override { return true; }
  std::vector<int> parse_devices(const DevicesSpec& devices) const override;
  int auto_device_count() const override { return cuda_device_count(); }
  bool is_available() const override { return cuda_device_count() > 0; }
  std::string availability_note() const override;
  // memory_total_bytes, memory_free_bytes, memory_used_bytes (whole device, all processes),
  // utilization_percent when NVML reports it, and the caching allocator's counters
  // (cuda::allocator_memory_stats: memory allocated and reserved by Tandem) once it has started.
  DeviceStats get_device_stats(const AcceleratorDevice& device) const override;
  std::optional<Device> tensor_device(const AcceleratorDevice& device) const override { return Device::cuda(device.index); }
  // find_usable_cuda_devices and cuda_visible_devices_note, below.
  std::optional<std::vector<int>> find_usable_devices(int n) const override;
  std::optional<std::string> devices_note(const std::vector<int>& indices) const override;
  void setup_device(const AcceleratorDevice& device) override;
};

// The first n CUDA devices that can be used right now, probed by creating a context and
// allocating on each (what fails on a GPU another process holds in exclusive compute mode).
// n = -1 returns every usable device. Throws ConfigError when n is not > 0 or -1, or the machine
// has fewer than n devices; DeviceError when fewer than n are free (naming the occupied ones).
std::vector<int> find_usable_cuda_devices(int n);

}  // namespace tandem
