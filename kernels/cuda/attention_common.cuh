// What the CUDA attention kernels share (attention_cuda.cu, the CUDA-core kernels for every dtype
// and head size; attention_tensor_core.cu, the tensor-core kernels for half types): the operand
// layout and the problem as the kernels see it, with the causal and dropout rules that make both
// agree with the CPU (kernels/backend.h, AttentionParams).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "base/philox.h"
#include "kernels/backend.h"
#include "kernels/tensor_view.h"

namespace tandem::cuda::attention {

// Strides (in elements) of one [B, H, T, D] operand's first three dims.
struct Layout {
  int64_t b, h, t;
};
inline Layout layout_of(const TensorView& x) { return {x.strides[0], x.strides[1], x.strides[2]}; }

struct Problem {
  int B, H, Tq, Tk, D;
  bool causal;
  double scale, dropout_p;
  uint64_t seed, offset;
  __device__ __forceinline__ int visible(int i) const {
    return causal ? min(Tk, i + (Tk - Tq) + 1) : Tk;
  }
  // 1/(1-p) for a kept probability, 0 for a dropped one (1 without dropout).
  template <typename A>
  __device__ __forceinline__ A dropout_factor(int bh, int i, int j) const {
    if (dropout_p <= 0.0) return A(1);
    const uint64_t index = (uint64_t(bh) * uint64_t(Tq) + uint64_t(i)) * uint64_t(Tk) + uint64_t(j);
    const bool keep = philox::uniform01(philox::bits(seed, offset, index)) >= float(dropout_p);
    return keep && dropout_p < 1.0 ? A(1.0 / (1.0 - dropout_p)) : A(0);
  }
};

inline Problem problem_of(const TensorView& q, const TensorView& k, const AttentionParams& p) {
  return {int(q.shape[0]), int(q.shape[1]), int(q.shape[2]), int(k.shape[2]), int(q.shape[3]),
          p.causal,        p.scale,         p.dropout_p,     p.seed,          p.offset};
}

}  // namespace tandem::cuda::attention
