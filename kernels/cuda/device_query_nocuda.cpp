// device_query for builds without CUDA: there are no devices, and anything that needs one
// says so plainly instead of failing somewhere deeper.
#include "base/error.h"
#include "kernels/cuda/device_query.h"

namespace tandem::cuda {

namespace {
[[noreturn]] void no_cuda(const std::string& what) {
  throw DeviceError(what + ": Tandem was built without CUDA; rebuild with -DTANDEM_CUDA=ON on "
                    "a machine with the CUDA toolkit, or use --trainer.accelerator=cpu");
}
}  // namespace

bool built_with_cuda() { return false; }
int visible_device_count() { return 0; }
std::string device_count_note() { return "Tandem was built without CUDA"; }
DeviceProbe probe_device(int index) { no_cuda("probing CUDA device " + std::to_string(index)); }
DeviceMemoryInfo query_device_memory(int index) {
  no_cuda("querying CUDA device " + std::to_string(index));
}
std::map<std::string, double> allocator_memory_stats(int) { return {}; }
void set_current_device(int index) { no_cuda("selecting CUDA device " + std::to_string(index)); }

}  // namespace tandem::cuda
