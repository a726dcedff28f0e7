// The one loop every elementwise CUDA kernel of this family runs (casts and copies, unary and
// its backward, binary, where): out[i...] = f(in_0[i...], ..., in_{K-2}[i...]) over K operands
// that share one logical shape (inputs may broadcast with stride 0; the output is operand K-1).
//
// Two paths, picked per launch on the host by plan_vectorized():
//   - vectorized: every VEC consecutive elements of the merged innermost dim ("a pack") are
//     handled by one thread; operands with inner stride 1 load/store them as one aligned
//     16-byte (or narrower) access, operands with inner stride 0 load one value. This covers
//     the contiguous case (the whole tensor merges into one dim; a tail of n % VEC elements is
//     finished by the scalar loop) and row broadcasts like bias adds ([N, C] + [C]), where the
//     innermost dim is a multiple of VEC.
//   - scalar: one element per iteration, offsets from the StridedIndexer (transposes, slices
//     with steps, misaligned outputs, inner dims not a multiple of VEC).
// Index math runs in 32 bits (divisions are the cost of the strided path); maps of 2^31 or more
// elements are cut into several launches on the host. Offsets are accumulated in 64 bits.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/kernel_utils.cuh"

namespace tandem::cuda::elementwise {

// How the vectorized path reads operand k (the output is always kVector when enabled).
enum OperandMode : uint8_t {
  kBroadcast = 0,  // inner stride 0: one value for the whole pack
  kVector = 1,     // inner stride 1, pack-aligned: one vector access
  kUnaligned = 2,  // inner stride 1 but the base pointer is not pack-aligned: element accesses
};

template <int K>
struct VecPlan {
  bool enabled = false;
  uint8_t mode[K] = {};
};

// Elements per pack for operands at most `widest_bytes` wide: one 16-byte access for the widest
// operand, at most 8 elements (narrower operands then use 8-, 4- or 2-byte accesses).
constexpr int pack_width(int widest_bytes) { return 16 / widest_bytes < 8 ? 16 / widest_bytes : 8; }

// Storage for one pack; its alignment is its size (a power of two, at most 16 bytes), so the
// compiler emits one vector load/store for it.
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <int N, typename T>
__device__ __forceinline__ void load_pack(const T* p, uint8_t mode, T (&v)[N]) {
  static_assert(std::is_trivially_copyable_v<T>, "packs are copied as raw bytes");
  if constexpr (N == 1) {
    v[0] = p[0];
  } else {
    if (mode == kVector) {
      const Pack<T, N> pk = *reinterpret_cast<const Pack<T, N>*>(p);
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] = pk.v[j];
    } else if (mode == kUnaligned) {
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] = p[j];
    } else {
      const T s = p[0];
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] = s;
    }
  }
}

// The output of an enabled vectorized path is always pack-aligned with inner stride 1.
template <int N, typename T>
__device__ __forceinline__ void store_pack(T* p, const T (&v)[N]) {
  if constexpr (N == 1) {
    p[0] = v[0];
  } else {
    Pack<T, N> pk;
#pragma unroll
    for (int j = 0; j < N; ++j) pk.v[j] = v[j];
    *reinterpret_cast<Pack<T, N>*>(p) = pk;
  }
}

// Where the chunk a launch covers starts, per operand (see launch_strided_map).
template <int K>
struct ChunkBase {
  int64_t off[K];
};

// Element offsets of logical element `linear` for the K operands of `ix`, plus the chunk's base.
// The dim loop is unrolled over compile-time dims (skipping those >= ndim) so the indexer stays
// in the kernel parameter space instead of being copied to local memory for dynamic indexing.
// The outermost dim needs no division: what is left of `linear` is its index.
template <int K>
__device__ __forceinline__ void element_offsets(const StridedIndexer<K>& ix, const ChunkBase<K>& base, uint32_t linear,
                                                int64_t (&off)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) off[k] = base.off[k];
#pragma unroll
  for (int d = kMaxDims - 1; d > 0; --d) {
    if (d < ix.ndim) {
      const uint32_t size = uint32_t(ix.sizes[d]);
      const uint32_t q = linear / size;
      const int64_t idx = int64_t(linear - q * size);
      linear = q;
#pragma unroll
      for (int k = 0; k < K; ++k) off[k] += idx * ix.strides[k][d];
    }
  }
  if (ix.ndim > 0) {
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] += int64_t(linear) * ix.strides[k][0];
  }
}

// Fn: a trivially copyable functor with `static constexpr int kVec` and
//   template <int N> __device__ void apply(const int64_t (&off)[K], const uint8_t (&mode)[K]) const;
// which loads N elements of each input at its offset (load_pack), computes, and stores N
// outputs (store_pack). N is kVec on the vectorized path and 1 on the scalar path.
// n < 2^31, so the grid-stride indices below never wrap in 32 bits.
template <int K, typename Fn>
__global__ void __launch_bounds__(kElementwiseThreads) strided_map_kernel(const Fn fn, const StridedIndexer<K> ix,
                                                               const ChunkBase<K> base, const uint32_t n,
                                                               const VecPlan<K> plan) {
  constexpr int N = Fn::kVec;
  const uint32_t first = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t step = gridDim.x * blockDim.x;
  uint32_t scalar_begin = 0;
  if (plan.enabled) {
    const uint32_t packs = n / uint32_t(N);
    for (uint32_t p = first; p < packs; p += step) {
      int64_t off[K];
      element_offsets(ix, base, p * uint32_t(N), off);
      fn.template apply<N>(off, plan.mode);
    }
    scalar_begin = packs * uint32_t(N);  // the tail; non-empty only when everything merged into one dim
  }
  for (uint32_t i = scalar_begin + first; i < n; i += step) {
    int64_t off[K];
    element_offsets(ix, base, i, off);
    fn.template apply<1>(off, plan.mode);
  }
}

// Decides whether `ix` (operand K-1 the output) can run packs of `vec` elements: the merged
// innermost dim must have stride 0 or 1 for every input and 1 for the output; packs must not
// cross rows (the innermost size is a multiple of vec, or there is only one dim and the scalar
// loop takes the tail); vector-loaded operands need pack-aligned bases and outer strides that
// are multiples of vec. ptrs[k] may be null for an operand the functor never reads.
template <int K>
VecPlan<K> plan_vectorized(const StridedIndexer<K>& ix, const std::array<const void*, K>& ptrs,
                           const std::array<int, K>& elem_bytes, int vec) {
  VecPlan<K> plan;
  if (ix.ndim == 0 || vec <= 1) return plan;
  const int last = ix.ndim - 1;
  if (ix.ndim > 1 && ix.sizes[last] % vec != 0) return plan;
  for (int k = 0; k < K; ++k) {
    const int64_t inner = ix.strides[k][last];
    const bool output = k == K - 1;
    if (inner == 0 && !output) {
      plan.mode[k] = kBroadcast;
      continue;
    }
    if (inner != 1) return VecPlan<K>{};
    bool outer_ok = true;
    for (int d = 0; d < last; ++d) outer_ok = outer_ok && ix.strides[k][d] % vec == 0;
    const bool aligned = reinterpret_cast<uintptr_t>(ptrs[size_t(k)]) % uintptr_t(vec * elem_bytes[size_t(k)]) == 0;
    if (aligned && outer_ok) {
      plan.mode[k] = kVector;
    } else if (output) {
      return VecPlan<K>{};
    } else {
      plan.mode[k] = kUnaligned;
    }
  }
  plan.enabled = true;
  return plan;
}

template <int K, typename Fn>
void launch_chunk(const Fn& fn, const StridedIndexer<K>& ix, const ChunkBase<K>& base, int64_t n,
                  const VecPlan<K>& plan, const char* launch_name) {
  const int64_t work = plan.enabled ? std::max<int64_t>(n / Fn::kVec, n % Fn::kVec) : n;
  cuda::launch<strided_map_kernel<K, Fn>>(grid_for(work), kElementwiseThreads, 0, current_stream(), fn, ix, base, uint32_t(n),
                                          plan);
  check_runtime(cudaGetLastError(), launch_name, __FILE__, __LINE__);
}

// Launches the map over all n elements on the current stream. Kernels index in 32 bits; a map
// of more than 2^31 - 1 elements is split on the host into launches over sub-blocks of the
// merged shape: the leading dims are fixed one index tuple at a time and dim `d` (the first
// whose trailing block fits) is cut into runs of rows, each launch getting the sub-block's
// base offsets. Runs of the innermost dim are multiples of 16 elements and every base is a
// sum of outer strides, so a vectorized plan stays aligned in every chunk.
template <int K, typename Fn>
void launch_strided_map(const Fn& fn, const StridedIndexer<K>& ix, int64_t n, const VecPlan<K>& plan,
                        const char* launch_name) {
  if (n <= 0) return;
  constexpr int64_t kMaxChunk = INT32_MAX;
  if (n <= kMaxChunk) return launch_chunk(fn, ix, ChunkBase<K>{}, n, plan, launch_name);
  int d = ix.ndim - 1;
  int64_t trailing = 1;  // elements in one index of dim d
  while (d > 0 && trailing * ix.sizes[d] <= kMaxChunk) trailing *= ix.sizes[d--];
  int64_t rows = std::max<int64_t>(1, kMaxChunk / trailing);
  if (d == ix.ndim - 1) rows = rows / 16 * 16;
  StridedIndexer<K> sub = ix;  // dims d.. of ix, dim d cut to a run of rows
  sub.ndim = ix.ndim - d;
  for (int j = 0; j < sub.ndim; ++j) {
    sub.sizes[j] = ix.sizes[d + j];
    for (int k = 0; k < K; ++k) sub.strides[k][j] = ix.strides[k][d + j];
  }
  int64_t lead_count = 1;
  for (int j = 0; j < d; ++j) lead_count *= ix.sizes[j];
  for (int64_t lead = 0; lead < lead_count; ++lead) {
    ChunkBase<K> base{};
    int64_t rem = lead;  // offsets of the fixed leading index tuple
    for (int j = d - 1; j >= 0; --j) {
      const int64_t idx = rem % ix.sizes[j];
      rem /= ix.sizes[j];
      for (int k = 0; k < K; ++k) base.off[k] += idx * ix.strides[k][j];
    }
    for (int64_t start = 0; start < ix.sizes[d]; start += rows) {
      const int64_t len = std::min(rows, ix.sizes[d] - start);
      ChunkBase<K> chunk = base;
      for (int k = 0; k < K; ++k) chunk.off[k] += start * ix.strides[k][d];
      sub.sizes[0] = len;
      launch_chunk(fn, sub, chunk, len * trailing, plan, launch_name);
    }
  }
}

}  // namespace tandem::cuda::elementwise
