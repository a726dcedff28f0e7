// Row softmax / log_softmax kernels, forward and backward, over x [rows, cols] contiguous.
// One fused kernel per row: max, sum of exp, write. The arithmetic is the CPU reference's
// (kernels/cpu/softmax_loss_cpu.cpp) in the accumulation type (float for float32/half/bfloat16,
// double for float64):
//   m   = max over the row, ignoring NaN (std::max(m, v) keeps m when v is NaN); an all -inf
//         row uses m = 0 (its outputs then come out NaN, as on the CPU);
//   s   = sum exp(x - m);  softmax y = exp(x - m) * (1 / s);  log_softmax y = x - (m + log s).
//   backward: log:  gx = gy - exp(y) * sum(gy);  softmax: gx = y * (gy - sum(gy * y)).
// Two layouts:
//   warp kernels (cols <= 32 * kPerLane, kPerLane <= 32): a warp per row, the row held in
//     registers (kPerLane elements per lane), so x is read once; warp-wide butterfly
//     reductions give every lane the same max and sum.
//   block kernels (longer rows): a block per row, three strided passes over the row (the
//     re-reads mostly hit L2).
#pragma once
#include <math_constants.h>

#include <cstdint>

#include "kernels/cuda/kernel_utils.cuh"

namespace tandem::cuda::softmax_detail {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kThreads = 256;  // block size of every softmax kernel
constexpr int kWarpsPerBlock = kThreads / 32;

__device__ __forceinline__ float exp_acc(float v) { return expf(v); }
__device__ __forceinline__ double exp_acc(double v) { return exp(v); }
__device__ __forceinline__ float log_acc(float v) { return logf(v); }
__device__ __forceinline__ double log_acc(double v) { return log(v); }
template <typename A> __device__ __forceinline__ A neg_inf();
template <> __device__ __forceinline__ float neg_inf<float>() { return -CUDART_INF_F; }
template <> __device__ __forceinline__ double neg_inf<double>() { return -CUDART_INF; }

// The CPU's std::max(m, v): v replaces m only when strictly greater, so NaN never enters.
template <typename A> __device__ __forceinline__ A max_ignoring_nan(A m, A v) { return m < v ? v : m; }

// Butterfly reductions: every lane ends with the same value (a + b == b + a exactly, so the
// lanes' different pairings give bit-identical sums).
template <typename A> __device__ __forceinline__ A warp_allreduce_max(A v) {
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) v = max_ignoring_nan(v, __shfl_xor_sync(kFullMask, v, mask));
  return v;
}
template <typename A> __device__ __forceinline__ A warp_allreduce_sum(A v) {
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) v += __shfl_xor_sync(kFullMask, v, mask);
  return v;
}

// Block-wide NaN-ignoring max (blockDim.x == kThreads); every thread gets the result. Starts
// with a barrier so `scratch` (32 values) can be reused right after a previous block reduction.
template <typename A> __device__ __forceinline__ A block_allreduce_max(A v, A* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_allreduce_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  A m = scratch[0];
#pragma unroll
  for (int w = 1; w < kWarpsPerBlock; ++w) m = max_ignoring_nan(m, scratch[w]);
  return m;
}

// The row maximum as the CPU uses it: -inf (an all -inf row) becomes 0.
template <typename A> __device__ __forceinline__ A finite_shift(A m) { return m == neg_inf<A>() ? A(0) : m; }

// ---------------------------------------------------------------- forward
template <typename T, int kPerLane>
__global__ void __launch_bounds__(kThreads)
softmax_warp_kernel(const T* x, T* y, int64_t rows, int cols, bool log) {
  using A = acc_t<T>;
  const int lane = threadIdx.x & 31;
  for (int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; row < rows;
       row += int64_t(gridDim.x) * kWarpsPerBlock) {  // warp-uniform
    const T* in = x + row * cols;
    T* out = y + row * cols;
    A v[kPerLane];
    A m = neg_inf<A>();
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int j = lane + 32 * k;
      v[k] = j < cols ? to_acc(in[j]) : neg_inf<A>();
      m = max_ignoring_nan(m, v[k]);
    }
    m = finite_shift(warp_allreduce_max(m));
    A s = 0;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      if (lane + 32 * k < cols) {
        const A e = exp_acc(v[k] - m);
        if (!log) v[k] = e;
        s += e;
      }
    }
    s = warp_allreduce_sum(s);
    const A shift = m + log_acc(s), inv = A(1) / s;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int j = lane + 32 * k;
      if (j < cols) out[j] = from_acc<T>(log ? v[k] - shift : v[k] * inv);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
softmax_block_kernel(const T* x, T* y, int64_t rows, int64_t cols, bool log) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {  // block-uniform
    const T* in = x + row * cols;
    T* out = y + row * cols;
    A m = neg_inf<A>();
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) m = max_ignoring_nan(m, to_acc(in[j]));
    m = finite_shift(block_allreduce_max(m, scratch));
    A s = 0;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) s += exp_acc(to_acc(in[j]) - m);
    s = block_sum(s, scratch);
    const A shift = m + log_acc(s), inv = A(1) / s;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
      const A v = to_acc(in[j]);
      out[j] = from_acc<T>(log ? v - shift : exp_acc(v - m) * inv);
    }
  }
}

// ---------------------------------------------------------------- backward
template <typename T, int kPerLane>
__global__ void __launch_bounds__(kThreads)
softmax_backward_warp_kernel(const T* y, const T* gy, T* gx, int64_t rows, int cols, bool log) {
  using A = acc_t<T>;
  const int lane = threadIdx.x & 31;
  for (int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; row < rows;
       row += int64_t(gridDim.x) * kWarpsPerBlock) {  // warp-uniform
    const int64_t base = row * cols;
    A yv[kPerLane], gv[kPerLane];
    A s = 0;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int j = lane + 32 * k;
      yv[k] = j < cols ? to_acc(y[base + j]) : A(0);
      gv[k] = j < cols ? to_acc(gy[base + j]) : A(0);
      s += log ? gv[k] : gv[k] * yv[k];
    }
    s = warp_allreduce_sum(s);
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int j = lane + 32 * k;
      if (j < cols) gx[base + j] = from_acc<T>(log ? gv[k] - exp_acc(yv[k]) * s : yv[k] * (gv[k] - s));
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
softmax_backward_block_kernel(const T* y, const T* gy, T* gx, int64_t rows, int64_t cols, bool log) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {  // block-uniform
    const int64_t base = row * cols;
    A s = 0;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
      const A g = to_acc(gy[base + j]);
      s += log ? g : g * to_acc(y[base + j]);
    }
    s = block_sum(s, scratch);
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
      const A yv = to_acc(y[base + j]), g = to_acc(gy[base + j]);
      gx[base + j] = from_acc<T>(log ? g - exp_acc(yv) * s : yv * (g - s));
    }
  }
}

}  // namespace tandem::cuda::softmax_detail
