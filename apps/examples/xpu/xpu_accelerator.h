// XPUAccelerator: the seeds' fictional custom accelerator, written the way a user would. Its
// pretend driver ("xpulib") has `device_count` devices, an init parameter defaulting to 4.
// Used three ways: by xpu_cli.cpp (a user program that registers it, then runs Tandem's command
// line), by xpu_plugin.cpp (a library the stock binary loads with --plugin=...), and by the unit
// tests in tests/accelerators.
#pragma once
#include <memory>

#include "engine/accelerators/accelerator_registry.h"
#include "engine/accelerators/device_parsing.h"

namespace xpu_example {

class XPUAccelerator : public tandem::Accelerator {
 public:
  explicit XPUAccelerator(const tandem::InitParams& params)
      : device_count_(std::stoi(params.count("device_count") ? params.at("device_count") : "4")) {}

  std::string name() const override { return "xpu"; }
  std::vector<int> parse_devices(const tandem::DevicesSpec& devices) const override {
    // XPUs are indexed like GPUs, so the stock parser (and its errors) fit.
    return tandem::parse_indexed_devices(devices, {"xpu", device_count_, "pretend xpulib devices"});
  }
  int auto_device_count() const override { return device_count_; }
  bool is_available() const override { return device_count_ > 0; }
  std::string availability_note() const override {
    return std::to_string(device_count_) + " XPU devices (xpulib)";
  }
  tandem::DeviceStats get_device_stats(const tandem::AcceleratorDevice& device) const override {
    return {{"xpu_index", static_cast<double>(device.index)}, {"xpu_memory_used_bytes", 0.0}};
  }

 private:
  int device_count_;
};

inline void register_xpu(tandem::AcceleratorRegistry& registry) {
  registry.add("xpu", "XPU Accelerator - optimized for large-scale machine learning (example)",
               [](const tandem::InitParams& p) { return std::make_unique<XPUAccelerator>(p); },
               {{"device_count", "4"}});
}

}  // namespace xpu_example
