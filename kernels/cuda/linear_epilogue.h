// Test hooks of CudaBackend::linear_forward (linear_cuda.cu), which adds a linear
// layer's bias inside the GEMM through cuBLASLt's bias epilogue when it can and otherwise runs
// the unfused linear_forward_by_gemm (bias copy, then GEMM with beta = 1). Both give the same values
// to rounding; the tests use these hooks to run each path on purpose and to see which one ran.
// CUDA builds only (the definitions live in a .cu file).
#pragma once
#include <cstdint>

namespace tandem::cuda {

// On by default; off forces the unfused path for every later call (process-wide).
void set_linear_bias_epilogue_enabled(bool enabled);
bool linear_bias_epilogue_enabled();

// How many linear_forward calls with a bias took each path since the process started.
struct LinearBiasPathCounts {
  int64_t fused = 0, unfused = 0;
};
LinearBiasPathCounts linear_bias_path_counts();

}  // namespace tandem::cuda
