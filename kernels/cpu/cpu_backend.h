// The CPU reference backend (the packed float32 GEMM of kernels/cpu/gemm, Eigen for float64
// GEMM and vectorized math, the thread pool of thread_pool.h across the machine's cores). Every kernel of the list (kernels/kernel_list.def) is implemented here, one file per
// family of the list, each the twin of kernels/cuda/<family>_cuda.cu: memory_cpu.cpp,
// elementwise_copy_cpu.cpp, elementwise_cpu.cpp, elementwise_binary_cpu.cpp, reduce_cpu.cpp,
// gemm_cpu.cpp, linear_cpu.cpp, softmax_loss_cpu.cpp, conv_pool_cpu.cpp, norm_cpu.cpp,
// random_embedding_cpu.cpp, optim_cpu.cpp, compress_min_max_uint8_cpu.cpp, attention_cpu.cpp.
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
