// backend_for: the one place that maps a device type to its kernels.
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"

namespace tandem {

Backend& backend_for(DeviceType type) {
  return type == DeviceType::CPU ? static_cast<Backend&>(cpu_backend()) : cuda_backend();
}

bool cuda_compiled() { return TANDEM_WITH_CUDA; }

}  // namespace tandem
