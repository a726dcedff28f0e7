// 8-bit min/max block compression on CUDA (Backend::compress_min_max_uint8 and its
// decompression): the twin of kernels/cpu/compress_min_max_uint8_cpu.cpp, giving the same bytes and the same
// decoded floats (tests/gpu/test_cuda_compress.cpp compares them bit for bit).
//
// Shapes: x float32 [n] -> packed uint8 [min_max_uint8_bytes(n, block)] (kernels/min_max_uint8_layout.h:
// the min/max headers of all blocks, then one code per element), and back to float32 [n].
//
// compress: one CUDA block per compression block (a grid-stride loop over them when there are
// more than the grid), so a block's min and max are one block reduction and no second pass or
// atomics are needed; min(256, block rounded up to a warp) threads, so Bagua's small test
// blocks do not start 256 threads for 7 elements. The CPU keeps the first of equal extremes in
// index order (only +0 and -0 compare equal with different bits, and the header stores the
// bits), so each partial carries the index of its extreme and ties go to the smaller index:
// the result does not depend on how the reduction tree pairs threads. The codes are then
// computed with the CPU's operations in double (subtract, multiply by 255 / range, rint: round
// half to even like nearbyint); none of them is a multiply-add nvcc could contract.
// decompress: one thread per element; the element's block header is read from global memory
// (8 bytes shared by `block` neighbours, so cached) and the decode is an explicit fma in double,
// as the CPU's std::fma. Headers are read and written byte by byte: the packed buffer is a
// uint8 tensor with no alignment promise, and both hosts and GPUs are little-endian, the byte
// order of the CPU's memcpy.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/min_max_uint8_layout.h"

namespace tandem {
namespace {

constexpr int kMaxThreads = 256;
constexpr int64_t kMaxGrid = 132 * 16;
constexpr unsigned kFullMask = 0xffffffffu;

// A block's (or a partial's) minimum and maximum with the index of each, and whether every
// element seen was finite. No constructor: it lives in __shared__ memory.
struct Extremes {
  float lo, hi;
  int64_t lo_at, hi_at;
  int finite;
};

// e takes the other minimum when it is smaller, or equal and earlier; likewise the maximum.
__device__ __forceinline__ void merge(Extremes& e, float lo, int64_t lo_at, float hi, int64_t hi_at, int finite) {
  if (lo < e.lo || (lo == e.lo && lo_at < e.lo_at)) e.lo = lo, e.lo_at = lo_at;
  if (e.hi < hi || (hi == e.hi && hi_at < e.hi_at)) e.hi = hi, e.hi_at = hi_at;
  e.finite &= finite;
}

__device__ __forceinline__ void store_float(uint8_t* p, float v) {
  const unsigned bits = __float_as_uint(v);
  for (int k = 0; k < 4; ++k) p[k] = uint8_t(bits >> (8 * k));
}

__device__ __forceinline__ float load_float(const uint8_t* p) {
  unsigned bits = 0;
  for (int k = 0; k < 4; ++k) bits |= unsigned(p[k]) << (8 * k);
  return __uint_as_float(bits);
}

__global__ void __launch_bounds__(kMaxThreads)
    compress_min_max_uint8_kernel(const float* __restrict__ x, int64_t n, int64_t block, int64_t blocks,
                                  uint8_t* __restrict__ packed) {
  __shared__ Extremes warps[kMaxThreads / 32];
  __shared__ Extremes whole;
  uint8_t* codes = packed + blocks * kMinMaxUint8HeaderBytes;
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32, warp_count = int(blockDim.x) / 32;
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int64_t first = b * block, count = block < n - first ? block : n - first;
    // Lanes without elements keep the sentinels, which every real element replaces.
    Extremes e{__uint_as_float(0x7f800000u), __uint_as_float(0xff800000u), INT64_MAX, INT64_MAX, 1};
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const float v = x[first + i];
      if (!isfinite(v)) e.finite = 0;
      if (v < e.lo) e.lo = v, e.lo_at = i;  // strict: this thread's first of equal values stays
      if (e.hi < v) e.hi = v, e.hi_at = i;
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      merge(e, __shfl_down_sync(kFullMask, e.lo, offset), __shfl_down_sync(kFullMask, e.lo_at, offset),
            __shfl_down_sync(kFullMask, e.hi, offset), __shfl_down_sync(kFullMask, e.hi_at, offset),
            __shfl_down_sync(kFullMask, e.finite, offset));
    }
    if (lane == 0) warps[warp] = e;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < warp_count; ++w) {
        merge(e, warps[w].lo, warps[w].lo_at, warps[w].hi, warps[w].hi_at, warps[w].finite);
      }
      if (!e.finite) e.lo = e.hi = __uint_as_float(0x7fc00000u);  // the CPU's quiet NaN
      store_float(packed + b * kMinMaxUint8HeaderBytes, e.lo);
      store_float(packed + b * kMinMaxUint8HeaderBytes + 4, e.hi);
      whole = e;
    }
    __syncthreads();
    const float lo = whole.lo;
    const bool finite = whole.finite != 0;
    // The range in double: max - min of two finite floats may overflow float32.
    const double range = finite ? double(whole.hi) - double(lo) : 0.0;
    const double inverse = range > 0.0 ? 255.0 / range : 0.0;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const double code = finite ? rint((double(x[first + i]) - double(lo)) * inverse) : 0.0;
      codes[first + i] = uint8_t(code < 0.0 ? 0.0 : (255.0 < code ? 255.0 : code));  // std::clamp's rule
    }
    __syncthreads();  // `warps` and `whole` are rewritten for the next block
  }
}

__global__ void __launch_bounds__(cuda::kElementwiseThreads)
    decompress_min_max_uint8_kernel(const uint8_t* __restrict__ packed, int64_t n, int64_t block, int64_t blocks,
                                    float* __restrict__ out) {
  const uint8_t* codes = packed + blocks * kMinMaxUint8HeaderBytes;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x) {
    const uint8_t* header = packed + (i / block) * kMinMaxUint8HeaderBytes;
    const float lo = load_float(header), hi = load_float(header + 4);
    const double scale = (double(hi) - double(lo)) / 255.0;  // NaN for a flagged block
    const uint8_t code = codes[i];
    out[i] = code == 255 ? hi : float(fma(double(code), scale, double(lo)));
  }
}

}  // namespace

void CudaBackend::compress_min_max_uint8(const TensorView& x, int64_t block, const TensorView& packed) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const int64_t blocks = min_max_uint8_blocks(n, block);
  const int threads = int(std::min<int64_t>(kMaxThreads, (std::min<int64_t>(block, kMaxThreads) + 31) / 32 * 32));
  const unsigned grid = unsigned(std::min(blocks, kMaxGrid));
  cuda::launch<compress_min_max_uint8_kernel>(grid, threads, 0, cuda::current_stream(), x.ptr<const float>(), n, block,
                                              blocks, packed.ptr<uint8_t>());
  TANDEM_CUDA_CHECK_LAUNCH("compress_min_max_uint8_kernel");
}

void CudaBackend::decompress_min_max_uint8(const TensorView& packed, int64_t block, const TensorView& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  cuda::launch<decompress_min_max_uint8_kernel>(cuda::grid_for(n), cuda::kElementwiseThreads, 0, cuda::current_stream(),
                                                packed.ptr<const uint8_t>(), n, block, min_max_uint8_blocks(n, block),
                                                out.ptr<float>());
  TANDEM_CUDA_CHECK_LAUNCH("decompress_min_max_uint8_kernel");
}

}  // namespace tandem
