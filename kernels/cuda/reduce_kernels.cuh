// Reduction kernels over the middle axis of x viewed as [outer, r, inner], generic over a
// policy P (reduce_policies.cuh). Which kernel runs is planned in reduce_cuda.cu:
//   reduce_direct_kernel      r <= 1: each output is its one input (or the identity if r == 0).
//   reduce_rows_group_kernel  inner == 1, short rows: G lanes (1, 4 or 32) per row.
//   reduce_rows_block_kernel  inner == 1, long rows: a block per row, or per chunk of a row when
//                             there are too few rows to fill the GPU (chunk partials are then
//                             finished by combine_row_partials_kernel: no atomics, fixed order).
//   reduce_cols_direct_kernel inner > 1 with enough outputs: a thread per output, loop over r.
//   reduce_cols_tile_kernel   inner > 1 otherwise: a block covers W adjacent columns and R rows
//                             at a time (W*R <= 256, contiguous reads), optionally one chunk of
//                             r per block, finished by combine_col_partials_kernel (32
//                             columns x 8 split lanes per block).
// Every kernel loops grid-stride over its work items, so any grid size is correct; loops that
// contain __syncthreads or full-warp shuffles have block- or warp-uniform trip counts.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/cuda/reduce_policies.cuh"

namespace tandem::cuda::reduce_detail {

constexpr int kBlockThreads = 256;  // every kernel here is launched with this block size
constexpr int kUnroll = 4;          // loads in flight per thread in the streaming loops

// Tree over `width` adjacent lanes (a power of two <= 32); lane 0 of each segment gets the
// result. Every lane of the warp must call it.
template <class P, int kWidth>
__device__ __forceinline__ typename P::Acc group_reduce(typename P::Acc v) {
#pragma unroll
  for (int delta = kWidth / 2; delta > 0; delta >>= 1) v = P::combine(v, P::shuffle_down(v, delta, kWidth));
  return v;
}

// Whole-block reduction (blockDim.x == kBlockThreads); thread 0 gets the result. Lanes of a
// warp first, then the warps' results in warp order. Starts with a barrier so the scratch can
// be reused by consecutive calls.
template <class P>
__device__ __forceinline__ typename P::Acc block_reduce(typename P::Acc v, typename P::Acc* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr int kWarps = kBlockThreads / 32;
  v = group_reduce<P, 32>(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kWarps ? scratch[lane] : P::identity();
    v = group_reduce<P, 32>(v);
  }
  return v;
}

// 16 bytes from a 16-byte aligned address, split into elements.
template <typename T>
__device__ __forceinline__ void load_vector(const T* p, T (&out)[16 / sizeof(T)]) {
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  memcpy(&out[0], &raw, 16);
}

// This thread's part of reducing p[0, n) over a group of `group` threads (this is thread
// `lane`); p[k] has index i0 + k along the reduced axis. Elements before the first 16-byte
// boundary and after the last whole vector are read singly, the rest as 16-byte vectors with
// kUnroll vectors in flight per thread. Rows need not be aligned: the split adapts per row.
template <class P>
__device__ __forceinline__ typename P::Acc reduce_range(const typename P::In* p, int64_t n, int64_t i0, int lane,
                                                        int group) {
  using T = typename P::In;
  constexpr int kVec = 16 / int(sizeof(T));
  typename P::Acc acc = P::identity();
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  int64_t head = n;  // a pointer not aligned to its own element size is read singly throughout
  if (addr % sizeof(T) == 0) {
    head = int64_t((16 - addr % 16) % 16 / sizeof(T));
    if (head > n) head = n;
  }
  for (int64_t k = lane; k < head; k += group) acc = P::combine(acc, P::load(p[k], i0 + k));
  const T* body = p + head;
  const int64_t vectors = (n - head) / kVec;
  for (int64_t v0 = lane; v0 < vectors; v0 += int64_t(group) * kUnroll) {
    T vals[kUnroll][kVec];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = v0 + int64_t(u) * group;
      if (v < vectors) load_vector(body + v * kVec, vals[u]);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = v0 + int64_t(u) * group;
      if (v < vectors) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) acc = P::combine(acc, P::load(vals[u][e], i0 + head + v * kVec + e));
      }
    }
  }
  for (int64_t k = head + vectors * kVec + lane; k < n; k += group) acc = P::combine(acc, P::load(p[k], i0 + k));
  return acc;
}

// r <= 1: out[k] = finish(x[k]) (r == 1) or finish(identity) (r == 0: sum 0, mean NaN).
template <class P>
__global__ void __launch_bounds__(kBlockThreads)
reduce_direct_kernel(const typename P::In* x, int64_t n, int64_t r, typename P::Out* out) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x)
    out[k] = P::finish(r >= 1 ? P::load(x[k], 0) : P::identity(), r);
}

// inner == 1, rows of length r; kGroup lanes per row, 32 / kGroup rows per warp. The loop runs
// per warp (base is the warp's first row) so that all 32 lanes shuffle together even when the
// last warp has rows past the end.
template <class P, int kGroup>
__global__ void __launch_bounds__(kBlockThreads)
reduce_rows_group_kernel(const typename P::In* x, int64_t rows, int64_t r, typename P::Out* out) {
  constexpr int kRowsPerBlock = kBlockThreads / kGroup;
  const int lane = threadIdx.x % kGroup;
  const int64_t warp_first = int64_t(blockIdx.x) * kRowsPerBlock + (threadIdx.x / 32) * (32 / kGroup);
  const int64_t my_offset = (threadIdx.x % 32) / kGroup;
  for (int64_t base = warp_first; base < rows; base += int64_t(gridDim.x) * kRowsPerBlock) {
    const int64_t row = base + my_offset;
    typename P::Acc acc = P::identity();
    if (row < rows) acc = reduce_range<P>(x + row * r, r, 0, lane, kGroup);
    acc = group_reduce<P, kGroup>(acc);
    if (lane == 0 && row < rows) out[row] = P::finish(acc, r);
  }
}

// inner == 1, long rows: block g handles chunk (g % splits) of row (g / splits), elements
// [split * chunk, min(r, (split + 1) * chunk)). splits == 1 writes out[row]; otherwise the
// chunk's Acc goes to partials[g] for combine_row_partials_kernel.
template <class P>
__global__ void __launch_bounds__(kBlockThreads)
reduce_rows_block_kernel(const typename P::In* x, int64_t rows, int64_t r, int64_t splits, int64_t chunk,
                         typename P::Out* out, typename P::Acc* partials) {
  __shared__ typename P::Acc scratch[32];
  const int64_t total = rows * splits;
  for (int64_t g = blockIdx.x; g < total; g += gridDim.x) {
    const int64_t row = g / splits, begin = (g % splits) * chunk;
    const int64_t end = begin + chunk < r ? begin + chunk : r;
    typename P::Acc acc = reduce_range<P>(x + row * r + begin, end - begin, begin, threadIdx.x, kBlockThreads);
    acc = block_reduce<P>(acc, scratch);
    if (threadIdx.x == 0) {
      if (splits == 1) out[row] = P::finish(acc, r);
      else partials[g] = acc;
    }
  }
}

// Second pass of a split row reduction: out[row] = finish(combine of partials[row, 0..splits)).
template <class P>
__global__ void __launch_bounds__(kBlockThreads)
combine_row_partials_kernel(const typename P::Acc* partials, int64_t rows, int64_t splits, int64_t r,
                            typename P::Out* out) {
  __shared__ typename P::Acc scratch[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    typename P::Acc acc = P::identity();
    for (int64_t s = threadIdx.x; s < splits; s += kBlockThreads) acc = P::combine(acc, partials[row * splits + s]);
    acc = block_reduce<P>(acc, scratch);
    if (threadIdx.x == 0) out[row] = P::finish(acc, r);
  }
}

// Accumulates column `col` of rows [begin, end) stepping `step` rows, kUnroll loads in flight:
// col points at x[o, 0, j]; rows are `inner` elements apart.
template <class P>
__device__ __forceinline__ typename P::Acc reduce_column(const typename P::In* col, int64_t inner, int64_t begin,
                                                         int64_t end, int64_t step, typename P::Acc acc) {
  int64_t i = begin;
  for (; i + (kUnroll - 1) * step < end; i += kUnroll * step) {
    typename P::In vals[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) vals[u] = col[(i + u * step) * inner];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc = P::combine(acc, P::load(vals[u], i + u * step));
  }
  for (; i < end; i += step) acc = P::combine(acc, P::load(col[i * inner], i));
  return acc;
}

// inner > 1 with many outputs: thread k computes out[k] (k = o * inner + j) over all r rows.
// Consecutive threads read consecutive j, so loads are coalesced along inner.
template <class P>
__global__ void __launch_bounds__(kBlockThreads)
reduce_cols_direct_kernel(const typename P::In* x, int64_t outer, int64_t r, int64_t inner, typename P::Out* out) {
  const int64_t n = outer * inner;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = k / inner, j = k - o * inner;
    out[k] = P::finish(reduce_column<P>(x + o * r * inner + j, inner, 0, r, 1, P::identity()), r);
  }
}

// inner > 1 with few outputs: thread t works on column jj = t % W of its block's tile and row
// lane rl = t / W (rl < R; R is a power of two, W * R <= kBlockThreads), so one step of all
// threads reads R whole row pieces of W contiguous elements. Block b covers chunk (b % splits)
// of r for tile ((b / splits) % tiles) of outer index b / (splits * tiles). The R row lanes are
// then combined by a shared-memory tree (lane rl with rl + s, halving s).
template <class P>
__global__ void __launch_bounds__(kBlockThreads)
reduce_cols_tile_kernel(const typename P::In* x, int64_t outer, int64_t r, int64_t inner, int W, int R, int64_t tiles,
                        int64_t splits, int64_t chunk, typename P::Out* out, typename P::Acc* partials) {
  __shared__ typename P::Acc lanes[kBlockThreads];
  const int jj = threadIdx.x % W, rl = threadIdx.x / W;
  const int64_t total = outer * tiles * splits;
  for (int64_t b = blockIdx.x; b < total; b += gridDim.x) {
    const int64_t split = b % splits, tile = (b / splits) % tiles, o = b / (splits * tiles);
    const int64_t j = tile * W + jj;
    const int64_t begin = split * chunk, end = begin + chunk < r ? begin + chunk : r;
    const bool active = rl < R && j < inner;
    typename P::Acc acc = P::identity();
    if (active) acc = reduce_column<P>(x + o * r * inner + j, inner, begin + rl, end, R, acc);
    __syncthreads();  // the previous work item's tree is done with `lanes`
    lanes[threadIdx.x] = acc;
    for (int s = R / 2; s > 0; s >>= 1) {
      __syncthreads();
      if (rl < s && active) {
        acc = P::combine(acc, lanes[threadIdx.x + s * W]);
        lanes[threadIdx.x] = acc;
      }
    }
    if (rl == 0 && active) {
      if (splits == 1) out[o * inner + j] = P::finish(acc, r);
      else partials[(o * splits + split) * inner + j] = acc;
    }
  }
}

// Second pass of a split column reduction: out[o, j] = finish(combine over s of
// partials[o, s, j]). A block covers 32 adjacent columns with 8 split lanes each: lane sl
// combines s = sl, sl + 8, ... in increasing order (each step reads 32 contiguous Accs), then
// the 8 lanes meet in a fixed shared-memory tree, as in reduce_cols_tile_kernel.
template <class P>
__global__ void __launch_bounds__(kBlockThreads)
combine_col_partials_kernel(const typename P::Acc* partials, int64_t outer, int64_t splits, int64_t inner, int64_t r,
                            typename P::Out* out) {
  constexpr int kCols = 32, kLanes = kBlockThreads / kCols;
  __shared__ typename P::Acc lanes[kBlockThreads];
  const int c = threadIdx.x % kCols, sl = threadIdx.x / kCols;
  const int64_t col_blocks = (inner + kCols - 1) / kCols, total = outer * col_blocks;
  for (int64_t b = blockIdx.x; b < total; b += gridDim.x) {  // block-uniform
    const int64_t o = b / col_blocks, j = (b % col_blocks) * kCols + c;
    typename P::Acc acc = P::identity();
    if (j < inner)
      for (int64_t s = sl; s < splits; s += kLanes) acc = P::combine(acc, partials[(o * splits + s) * inner + j]);
    __syncthreads();  // the previous work item's tree is done with `lanes`
    lanes[threadIdx.x] = acc;
    for (int h = kLanes / 2; h > 0; h >>= 1) {
      __syncthreads();
      if (sl < h) {
        acc = P::combine(acc, lanes[threadIdx.x + h * kCols]);
        lanes[threadIdx.x] = acc;
      }
    }
    if (sl == 0 && j < inner) out[o * inner + j] = P::finish(acc, r);
  }
}

}  // namespace tandem::cuda::reduce_detail
