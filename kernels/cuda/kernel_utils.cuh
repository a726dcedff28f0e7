// Device-side building blocks shared by the CUDA kernel families (kernels/cuda/*_cuda.cu):
//   - dtype dispatch: cuda::dispatch_float / dispatch_all run a host lambda with T bound to the
//     device element type (float, double, __half, __nv_bfloat16; plus int32, int64, uint8);
//   - accumulation types: half and bfloat16 load as float (acc_t<T>), compute in float and
//     round once on store (from_acc<T>), as PyTorch's CUDA kernels do;
//   - launch shapes: grid_for(n) for grid-stride loops;
//   - StridedIndexer<K>: element offsets of K operands sharing one logical shape, after merging
//     dims that are contiguous for all of them (the CPU's strided_cpu.h rule), up to 8 dims;
//   - deterministic warp/block sums: a fixed shuffle tree, so a result never depends on timing
//     (no float atomics in anything a test compares).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/tensor_view.h"

namespace tandem::cuda {

// ---------------------------------------------------------------- types and dispatch
template <typename T> struct TypeTag { using type = T; };
#define TANDEM_CUDA_TYPE(tag) typename decltype(tag)::type

template <typename T> struct AccType { using type = T; };
template <> struct AccType<float> { using type = float; };
template <> struct AccType<__half> { using type = float; };
template <> struct AccType<__nv_bfloat16> { using type = float; };
template <typename T> using acc_t = typename AccType<T>::type;

__device__ __forceinline__ float to_acc(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_acc(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T to_acc(T v) { return v; }

template <typename T> struct FromAcc {
  template <typename A> __device__ __forceinline__ static T apply(A v) { return static_cast<T>(v); }
};
template <> struct FromAcc<__half> {
  template <typename A> __device__ __forceinline__ static __half apply(A v) { return __float2half_rn(float(v)); }
};
template <> struct FromAcc<__nv_bfloat16> {
  template <typename A> __device__ __forceinline__ static __nv_bfloat16 apply(A v) {
    return __float2bfloat16_rn(float(v));
  }
};
template <typename T, typename A> __device__ __forceinline__ T from_acc(A v) { return FromAcc<T>::apply(v); }

// Runs body(TypeTag<T>{}) with T = float, double, __half or __nv_bfloat16; DTypeError otherwise.
template <typename F>
decltype(auto) dispatch_float(DType dtype, const char* kernel, F&& body) {
  switch (dtype) {
    case DType::Float32: return body(TypeTag<float>{});
    case DType::Float64: return body(TypeTag<double>{});
    case DType::Float16: return body(TypeTag<__half>{});
    case DType::BFloat16: return body(TypeTag<__nv_bfloat16>{});
    default: break;
  }
  throw DTypeError(std::string(kernel) + " on CUDA supports float32, float64, float16 and bfloat16, got " +
                   dtype_name(dtype));
}

// dispatch_float plus int32, int64 and uint8 (also used for bool).
template <typename F>
decltype(auto) dispatch_all(DType dtype, const char* kernel, F&& body) {
  switch (dtype) {
    case DType::Int32: return body(TypeTag<int32_t>{});
    case DType::Int64: return body(TypeTag<int64_t>{});
    case DType::UInt8:
    case DType::Bool: return body(TypeTag<uint8_t>{});
    default: return dispatch_float(dtype, kernel, static_cast<F&&>(body));
  }
}

// ---------------------------------------------------------------- launch shapes
constexpr int kElementwiseThreads = 256;
// Blocks for a grid-stride loop over n items: enough to fill every SM several times over
// (H100: 132 SMs x 8 blocks of 256), never more than the items need.
inline int grid_for(int64_t n, int threads = kElementwiseThreads) {
  const int64_t blocks = (n + threads - 1) / threads;
  constexpr int64_t kMaxBlocks = 132 * 16;
  return int(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

// ---------------------------------------------------------------- strided operands
constexpr int kMaxDims = 8;

template <int K>
struct StridedIndexer {
  int ndim = 0;
  int64_t sizes[kMaxDims];
  int64_t strides[K][kMaxDims];

  // shape: the logical shape all operands share; strides[k]: operand k's strides (0 on
  // broadcast dims). Dims of size 1 are dropped; neighbours contiguous for all operands merge.
  StridedIndexer(const std::vector<int64_t>& shape, const std::array<const std::vector<int64_t>*, K>& operand_strides) {
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      bool merge = ndim > 0;
      for (int k = 0; k < K && merge; ++k) merge = strides[k][ndim - 1] == (*operand_strides[size_t(k)])[d] * shape[d];
      if (merge) {
        sizes[ndim - 1] *= shape[d];
        for (int k = 0; k < K; ++k) strides[k][ndim - 1] = (*operand_strides[size_t(k)])[d];
      } else {
        if (ndim == kMaxDims)
          throw ShapeError("CUDA kernels take at most " + std::to_string(kMaxDims) +
                           " non-mergeable dims; make the operands contiguous first");
        sizes[ndim] = shape[d];
        for (int k = 0; k < K; ++k) strides[k][ndim] = (*operand_strides[size_t(k)])[d];
        ++ndim;
      }
    }
  }

  // Element offsets of logical element `linear` (row-major over the merged shape).
  __device__ __forceinline__ void offsets(int64_t linear, int64_t (&off)[K]) const {
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t idx = linear % sizes[d];
      linear /= sizes[d];
#pragma unroll
      for (int k = 0; k < K; ++k) off[k] += idx * strides[k][d];
    }
  }
};

// ---------------------------------------------------------------- deterministic sums
template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
  for (int delta = 16; delta > 0; delta >>= 1) v += __shfl_down_sync(0xffffffffu, v, delta);
  return v;  // lane 0 holds the sum
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the
// result. `scratch` holds 32 values. Fixed order: lanes within a warp, then warps by index.
template <typename A>
__device__ __forceinline__ A block_sum(A v, A* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    A w = lane < warps ? scratch[lane] : A(0);
    w = warp_sum(w);
    if (lane == 0) scratch[0] = w;
  }
  __syncthreads();
  return scratch[0];
}

}  // namespace tandem::cuda
