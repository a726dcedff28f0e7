// The CUDA backend's entry point. In a build without CUDA (cuda_backend_nocuda.cpp) it throws
// DeviceError saying so; with CUDA (cuda_backend.cu) it returns the backend whose kernels live
// in kernels/cuda.
#pragma once
#include "kernels/backend.h"

namespace tandem {
Backend& cuda_backend();
}  // namespace tandem
