#include "engine/accelerators/cpu_accelerator.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "engine/accelerators/device_parsing.h"

namespace tandem {

namespace {

double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace

CPUAccelerator::CPUAccelerator()
    : last_wall_(std::chrono::steady_clock::now()), last_cpu_seconds_(process_cpu_seconds()) {}

std::vector<int> CPUAccelerator::parse_devices(const DevicesSpec& devices) const {
  return std::vector<int>(static_cast<size_t>(parse_cpu_process_count(devices)), 0);
}

DeviceStats CPUAccelerator::get_device_stats(const AcceleratorDevice& /*device*/) const {
  DeviceStats stats;
  // /proc/self/statm: size resident shared ... in pages.
  std::ifstream statm("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  double resident = 0;
  if (statm >> pages_total >> pages_resident) {
    resident = static_cast<double>(pages_resident) * sysconf(_SC_PAGESIZE);
    stats["resident_memory_bytes"] = resident;
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  // ru_maxrss is in KiB on Linux, and the kernel updates it lazily, so it can trail the
  // current resident size for a moment; a peak is never below the present.
  stats["peak_resident_memory_bytes"] = std::max(resident, static_cast<double>(usage.ru_maxrss) * 1024.0);

  const auto now = std::chrono::steady_clock::now();
  const double cpu = process_cpu_seconds();
  const double wall = std::chrono::duration<double>(now - last_wall_).count();
  stats["cpu_time_seconds"] = cpu;
  stats["cpu_percent"] = wall > 0 ? 100.0 * (cpu - last_cpu_seconds_) / wall : 0.0;
  last_wall_ = now;
  last_cpu_seconds_ = cpu;
  return stats;
}

}  // namespace tandem
