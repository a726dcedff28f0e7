// Built only without CUDA: asking for a CUDA tensor says how to get one.
#include "base/error.h"
#include "kernels/cuda/cuda_backend.h"

namespace tandem {

Backend& cuda_backend() {
  throw DeviceError(
      "Tandem was built without CUDA, so CUDA devices are unavailable; use accelerator=cpu, or rebuild "
      "with the CUDA toolkit installed (cmake -DTANDEM_CUDA=ON)");
}

}  // namespace tandem
