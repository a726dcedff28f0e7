// The CUDA backend's class: the same kernel methods as the CPU reference (kernels/cpu), each
// family in its own file: memory_cuda.cu (memory, copies, fill), elementwise_cuda.cu (casts,
// unary, binary, where), reduce_cuda.cu, softmax_loss_cuda.cu (softmax, NLL rows),
// gemm_cuda.cu (cuBLASLt), linear_cuda.cu (linear forward with cuBLASLt's bias
// epilogue), conv_pool_cuda.cu (cuDNN conv, pooling), norm_cuda.cu,
// random_embedding_cuda.cu (Philox fill, dropout, embedding), optim_cuda.cu (fused updates),
// compress_min_max_uint8_cuda.cu (8-bit min/max block compression).
// Kernels run on cuda::current_stream() (kernels/cuda/cuda_context.h).
#pragma once
#include "kernels/backend.h"

namespace tandem {

class CudaBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::CUDA; }
  const char* name() const override { return "cuda"; }
#define TANDEM_BACKEND_MEMORY(ret, name, params, args) ret name params override;
#define TANDEM_KERNEL(name, params, args) void name params override;
#include "kernels/kernel_list.def"
};

}  // namespace tandem
