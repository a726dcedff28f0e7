// The CPU reference backend: the packed float32 GEMM of kernels/cpu/gemm, Eigen for float64 GEMM
// and vectorized math, OpenMP across the machine's cores. Every kernel of the list
// (kernels/kernel_list.def) is implemented here; the files in kernels/cpu split them by family
// (X_cpu.cpp beside kernels/cuda/X_cuda.cu).
#pragma once
#include "kernels/backend.h"
#include "kernels/cpu/dispatch_cpu.h"

namespace tandem {

class CpuBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::CPU; }
  const char* name() const override { return "cpu"; }
#define TANDEM_BACKEND_MEMORY(ret, name, params, args) ret name params override;
#define TANDEM_KERNEL(name, params, args) void name params override;
#include "kernels/kernel_list.def"
};

CpuBackend& cpu_backend();

}  // namespace tandem
