// backend_for: the one place that maps a device type to its kernels.
#include <atomic>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"

namespace tandem {

Backend& backend_for(DeviceType type) {
  return type == DeviceType::CPU ? static_cast<Backend&>(cpu_backend()) : cuda_backend();
}

bool cuda_compiled() { return TANDEM_WITH_CUDA; }

namespace {
std::atomic<bool> g_allow_tf32{false};
}
void set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool allow_tf32() { return g_allow_tf32.load(); }

}  // namespace tandem
