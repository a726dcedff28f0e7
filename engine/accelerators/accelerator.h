// Accelerator: what Tandem needs to know about one kind of hardware (CPU, CUDA, or a
// user-registered one such as an XPU): how many devices there are, how a `devices` value maps
// onto them, whether the hardware can be used at all, and per-device statistics for loggers.
//
// It does no computation. Strategies decide how many processes run and on which device; the
// accelerator only answers questions about the hardware, which keeps planning (`tandem plan`)
// free of side effects.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/device.h"
#include "engine/accelerators/devices_spec.h"

namespace tandem {

// One device as the accelerator names it: {"cuda", 1} prints as "cuda:1", {"cpu", 0} as "cpu".
// A plain struct rather than tensor::Device, because registered accelerators have types the
// tensor layer does not know.
struct AcceleratorDevice {
  std::string type;
  int index = 0;
  std::string str() const { return type == "cpu" ? "cpu" : type + ":" + std::to_string(index); }
  bool operator==(const AcceleratorDevice& o) const { return type == o.type && index == o.index; }
};

// Statistics for loggers, by name (e.g. "memory_used_bytes"). Numbers only, so loggers can
// reduce them across ranks.
using DeviceStats = std::map<std::string, double>;

class Accelerator {
 public:
  virtual ~Accelerator() = default;

  // The registry name this accelerator answers to ("cpu", "cuda", "xpu").
  virtual std::string name() const = 0;

  // Interprets a `devices` value for this hardware. For indexed hardware it returns the device
  // indices; for CPU it returns one 0 per process. Throws ConfigError for invalid values.
  virtual std::vector<int> parse_devices(const DevicesSpec& devices) const = 0;

  // Turns parsed indices into device objects, in the same order.
  virtual std::vector<AcceleratorDevice> get_parallel_devices(const std::vector<int>& indices) const;

  // The number of devices `devices="auto"` means.
  virtual int auto_device_count() const = 0;

  // devices="auto" in a job whose launcher started `processes_per_node` processes on each node:
  // the parsed form, when the hardware counts devices as processes (CPU); nullopt keeps
  // parse_devices("auto").
  virtual std::optional<std::vector<int>> auto_devices_as_launched(int /*processes_per_node*/) const {
    return std::nullopt;
  }
  // auto_select_gpus: the first n devices (-1: every one) that are free now; nullopt when the
  // hardware has no notion of busy devices (the option then changes nothing).
  virtual std::optional<std::vector<int>> find_usable_devices(int /*n*/) const { return std::nullopt; }
  // A note for the log about the selected indices (CUDA: what CUDA_VISIBLE_DEVICES maps them to).
  virtual std::optional<std::string> devices_note(const std::vector<int>& /*indices*/) const { return std::nullopt; }

  // Whether this hardware can be used by this process at all.
  virtual bool is_available() const = 0;
  // True when the accelerator computes on the host CPU: there half precision is bfloat16 only
  // (16-mixed falls back to bf16-mixed) and float64 training is allowed.
  virtual bool computes_on_host() const { return false; }
  // True when a cluster scheduler allocates these devices as GPUs (Slurm's --gpus-per-node,
  // --gpus-per-task, SLURM_GPUS_ON_NODE), so the allocation is checked against the flags.
  virtual bool allocated_as_gpus() const { return false; }

  // One line saying why the accelerator is (un)available, for the "auto" log line and errors:
  // e.g. "2 CUDA devices visible" or "Tandem was built without CUDA".
  virtual std::string availability_note() const { return is_available() ? "available" : "not available"; }

  // Optional per-device statistics; empty when the hardware reports none.
  virtual DeviceStats get_device_stats(const AcceleratorDevice& /*device*/) const { return {}; }

  // The tensor device that holds this device's data, or nullopt when Tandem has no kernel
  // backend for this hardware (it can be planned, not trained on).
  virtual std::optional<Device> tensor_device(const AcceleratorDevice& /*device*/) const { return std::nullopt; }

  // Called before training with the device the calling thread drives: once per process, and
  // by dp's worker threads for their own devices.
  virtual void setup_device(const AcceleratorDevice& /*device*/) {}

  // Called once per process after training; releases what setup_device acquired.
  virtual void teardown() {}
};

}  // namespace tandem
