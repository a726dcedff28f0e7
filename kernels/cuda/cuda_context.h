// Per-device CUDA state shared by every kernel family: the one compute stream of each device
// and a guard that switches the current device for a scope.
//
// Every kernel of the CUDA backend runs on compute_stream(current device), a non-blocking
// stream created on first use; work is ordered by that stream alone (no legacy default stream,
// no device-wide syncs between kernels). The host waits only where it reads results
// (device-to-host copies, Backend::synchronize). The current device is the one this process
// trains on: the Trainer sets it once (one process per GPU); tensors on another device are
// used after cuda::DeviceGuard switches to it.
#pragma once
#include <cuda_runtime.h>

#include <new>

namespace tandem::cuda {

// The compute stream of `device` (created on first use, lives as long as the process).
cudaStream_t compute_stream(int device);
// The compute stream of the calling thread's current device.
cudaStream_t current_stream();
int current_device();

class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  // For destructors and release paths, which must not throw: a failed switch (a sticky device
  // error) is ignored, and the scope runs on whatever device is current.
  DeviceGuard(int device, std::nothrow_t) noexcept;
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace tandem::cuda
