// The CUDA backend's class: every kernel of the list (kernels/kernel_list.def), one file per
// family of the list, each the twin of kernels/cpu/<family>_cpu.cpp: memory_cuda.cu (memory,
// copies, fill), elementwise_copy_cuda.cu (strided copies and casts), elementwise_cuda.cu
// (unary), elementwise_binary_cuda.cu (binary, where), reduce_cuda.cu, gemm_cuda.cu (cuBLASLt),
// linear_cuda.cu (linear forward with cuBLASLt's bias epilogue), softmax_loss_cuda.cu (softmax,
// NLL rows), conv_pool_cuda.cu (cuDNN conv, pooling), norm_cuda.cu (batch and layer norm),
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
