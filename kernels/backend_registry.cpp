// backend_for: the one place that maps a device type to its kernels.
#include <atomic>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"

namespace tandem {

namespace {
std::atomic<Backend*> g_cpu_override{nullptr}, g_cuda_override{nullptr};
std::atomic<Backend*>& override_slot(DeviceType type) {
  return type == DeviceType::CPU ? g_cpu_override : g_cuda_override;
}
}  // namespace

Backend& backend_for(DeviceType type) {
  if (Backend* replaced = override_slot(type).load(std::memory_order_acquire)) return *replaced;
  return type == DeviceType::CPU ? static_cast<Backend&>(cpu_backend()) : cuda_backend();
}

Backend* override_backend_for(DeviceType type, Backend* backend) {
  return override_slot(type).exchange(backend, std::memory_order_acq_rel);
}

bool cuda_compiled() { return TANDEM_WITH_CUDA; }

namespace {
std::atomic<bool> g_allow_tf32{false};
}
void set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool allow_tf32() { return g_allow_tf32.load(); }

}  // namespace tandem
