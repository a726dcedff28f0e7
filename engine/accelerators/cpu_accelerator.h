// CPU: `devices` is the number of processes (each one CPU "device"), so devices=4 with
// strategy=ddp means four processes on this node, each seeing "cpu".
#pragma once
#include <chrono>

#include "engine/accelerators/accelerator.h"

namespace tandem {

class CPUAccelerator : public Accelerator {
 public:
  bool computes_on_host() const override { return true; }
  CPUAccelerator();
  std::string name() const override { return "cpu"; }
  // One 0 per process: devices=3 gives {0, 0, 0}.
  std::vector<int> parse_devices(const DevicesSpec& devices) const override;
  int auto_device_count() const override { return 1; }
  // Under a launcher, devices=auto means one CPU device per launched process.
  std::optional<std::vector<int>> auto_devices_as_launched(int processes_per_node) const override {
    return std::vector<int>(static_cast<size_t>(processes_per_node), 0);
  }
  bool is_available() const override { return true; }
  std::string availability_note() const override { return "the CPU is always available"; }
  // resident_memory_bytes, peak_resident_memory_bytes, cpu_time_seconds, and cpu_percent (this
  // process's CPU time over wall time since the previous call, so 200 means two busy cores).
  DeviceStats get_device_stats(const AcceleratorDevice& device) const override;
  std::optional<Device> tensor_device(const AcceleratorDevice&) const override { return Device::cpu(); }

 private:
  mutable std::chrono::steady_clock::time_point last_wall_;
  mutable double last_cpu_seconds_ = 0.0;
};

}  // namespace tandem
