#include "engine/accelerators/cuda_accelerator.h"

#include <cstdlib>
#include <optional>
#include <set>

#include "base/error.h"
#include "engine/accelerators/device_parsing.h"
#include "kernels/cuda/device_query.h"

namespace tandem {

namespace {

constexpr const char* kSimulateVar = "TANDEM_SIMULATE_CUDA_DEVICES";
constexpr const char* kSimulateBusyVar = "TANDEM_SIMULATE_BUSY_CUDA_DEVICES";

// The entries of CUDA_VISIBLE_DEVICES (indices or UUIDs), trimmed; nullopt when it is unset.
std::optional<std::vector<std::string>> visible_devices_entries() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!visible) return std::nullopt;
  std::vector<std::string> entries = split_trimmed(visible, ',');
  if (entries.size() == 1 && entries[0].empty()) entries.clear();  // "" hides every GPU
  return entries;
}

// How many of `physical` simulated GPUs CUDA_VISIBLE_DEVICES leaves visible, the way the
// CUDA runtime reads it: entries in order, up to the first that is not an index of the
// machine (or repeats one); an empty value hides them all. Simulation takes indices only.
int simulated_visible_count(int physical) {
  const auto entries = visible_devices_entries();
  if (!entries) return physical;
  std::set<int> seen;
  for (const auto& entry : *entries) {
    int index = 0;
    if (!parse_int_strict(entry, &index) || index < 0 || index >= physical || !seen.insert(index).second) break;
  }
  return static_cast<int>(seen.size());
}

std::string machine_note() {
  std::string note;
  if (const char* count = std::getenv(kSimulateVar)) {
    note = std::string("simulated by ") + kSimulateVar + "=" + count;
  } else if (!cuda::built_with_cuda()) {
    note = "Tandem was built without CUDA";
  }
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    note += std::string(note.empty() ? "" : "; ") + "indices are relative to CUDA_VISIBLE_DEVICES=" + visible;
  }
  return note;
}

}  // namespace

CudaSimulation cuda_simulation_from_env() {
  CudaSimulation sim;
  if (const char* count = std::getenv(kSimulateVar)) {
    int physical = 0;
    if (!parse_int_strict(count, &physical) || physical < 0) {
      throw ConfigError(std::string(kSimulateVar) + "=" + count + " is not a device count; set "
                        "it to an integer >= 0 (e.g. 4), or unset it to see the real GPUs");
    }
    sim.device_count = simulated_visible_count(physical);
    sim.active = true;
  }
  if (const char* busy = std::getenv(kSimulateBusyVar)) {
    sim.active = true;
    for (const auto& part : split_trimmed(busy, ',')) {
      if (part.empty()) continue;
      int index = 0;
      if (!parse_int_strict(part, &index) || index < 0) {
        throw ConfigError(std::string(kSimulateBusyVar) + "=" + busy + ": '" + part + "' is not "
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

std::optional<std::string> cuda_visible_devices_note(const std::vector<int>& indices) {
  const auto entries = visible_devices_entries();
  if (!entries) return std::nullopt;
  std::string note = std::string("CUDA_VISIBLE_DEVICES=") + std::getenv("CUDA_VISIBLE_DEVICES") + ": ";
  for (size_t i = 0; i < indices.size(); ++i) {
    const auto visible = static_cast<size_t>(indices[i]);
    note += (i ? ", " : "") + std::string("cuda:") + std::to_string(indices[i]) + " is the machine's GPU " +
            (visible < entries->size() ? (*entries)[visible] : "?");
  }
  return note;
}

std::vector<int> CUDAAccelerator::parse_devices(const DevicesSpec& devices) const {
  return parse_indexed_devices(devices, IndexedDeviceContext{"cuda", cuda_device_count(), machine_note()});
}

std::string CUDAAccelerator::availability_note() const {
  const CudaSimulation sim = cuda_simulation_from_env();
  if (sim.device_count >= 0) {
    std::string note = std::to_string(sim.device_count) + " simulated CUDA device" +
                       (sim.device_count == 1 ? "" : "s") + " (" + kSimulateVar;
    if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
      note += std::string(", CUDA_VISIBLE_DEVICES=") + visible;
    }
    return note + ")";
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
  for (const auto& [k, v] : cuda::allocator_memory_stats(device.index)) stats[k] = v;
  return stats;
}

std::optional<std::vector<int>> CUDAAccelerator::find_usable_devices(int n) const { return find_usable_cuda_devices(n); }

std::optional<std::string> CUDAAccelerator::devices_note(const std::vector<int>& indices) const {
  return cuda_visible_devices_note(indices);
}

void CUDAAccelerator::setup_device(const AcceleratorDevice& device) {
  refuse_training_when_simulating("train on " + device.str());
  cuda::set_current_device(device.index);
}

void refuse_training_when_simulating(const std::string& what) {
  if (!cuda_simulation_from_env().active) return;
  std::string set;
  for (const char* var : {kSimulateVar, kSimulateBusyVar}) {
    if (const char* value = std::getenv(var)) set += (set.empty() ? "" : " and ") + std::string(var) + "=" + value;
  }
  const bool both = set.find(" and ") != std::string::npos;
  throw ConfigError("refusing to " + what + ": " + set + (both ? " are" : " is") + " set, and simulated "
                    "GPUs can only be planned (tandem plan), not trained on; unset " + (both ? "them" : "it") +
                    " to train");
}

std::vector<int> find_usable_cuda_devices(int n) {
  if (n == 0 || n < -1) {
    throw ConfigError("find_usable_cuda_devices(" + std::to_string(n) + "): n must be a number "
                      "of devices > 0, or -1 for every usable device");
  }
  const CudaSimulation sim = cuda_simulation_from_env();
  const int count = sim.device_count >= 0 ? sim.device_count : cuda::visible_device_count();
  const std::string machine = CUDAAccelerator().availability_note();
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

}  // namespace tandem
