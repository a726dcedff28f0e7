// Scaled-dot-product attention on tensor cores: the flash-attention-2 recurrence with every
// product a warp-wide mma.m16n8k16 (mma_m16n8k16.cuh), for bfloat16 and float16 q, k, v.
//
// Computes what attention_cuda.cu computes (same operands, causal rule, lse in float, natural
// log), for the problems where tensor cores pay and the kernels stay simple:
//   dtype bfloat16 or float16, head size D = 32 or 64 (GPT-2's 64), no dropout, and every
//   operand 16-byte aligned with strides that are multiples of 8 elements (q, k, v as views of
//   one fused qkv projection qualify). attention_tensor_core.h says whether a problem does; the
//   others run attention_cuda.cu's CUDA-core kernels.
// Why: those kernels do every product on CUDA cores in float (5-8 TFLOP/s on an H200 at
// T = 256..4096, against 330-400 for PyTorch's flash kernel, docs/CUDA.md); GPT-2's attention
// then took most of its training step.
//
// Launch plan. A block is 4 warps (128 threads) and owns a tile of kTile = 64 rows (query rows in
// the forward and dQ kernels, key rows in dK/dV); warp w owns rows [16 w, 16 w + 16) of it, whose
// operand fragments it keeps in registers. The other operand streams through shared memory in
// tiles of 64 rows (pitch D + 8 elements, so fragment loads hit 32 different banks), loaded with
// 16-byte vector loads; rows past T are zeros there and masked out of the softmax.
//   tc_forward_kernel  grid (ceil(Tq / 64), B H): S = Q K^T per key tile into registers, online
//                      softmax in the exp2 domain (running max m and sum l per row; the 4 lanes of
//                      a row combine by shuffles), P rounded to T and fed from registers as the A
//                      operand of O += P V. Writes O / l and lse = ln 2 (m + log2 l).
//   tc_delta_kernel    Delta_i = rowsum(dO_i * O_i), one warp per row.
//   tc_dq_kernel       grid (ceil(Tq / 64), B H): per key tile S = Q K^T, P = exp(S - lse),
//                      dP = dO V^T, dS = P (dP - Delta), dQ += dS K; dQ scaled at the end.
//   tc_dkv_kernel      grid (ceil(Tk / 64), B H): per query tile (from the first query that sees
//                      the block's keys) S^T = K Q^T, dP^T = V dO^T, dV += P^T dO, dK += dS^T Q.
// As in attention_cuda.cu, dQ and dK/dV are separate kernels so nothing is accumulated with
// atomics: results do not depend on timing. Every thread runs every barrier and every mma.
#include <math_constants.h>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_tensor_core.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/mma_m16n8k16.cuh"
#include "kernels/cuda/norm_common.cuh"

namespace tandem {
namespace {

using cuda::attention::Layout;
using cuda::attention::layout_of;
using cuda::attention::Problem;
using cuda::attention::problem_of;
using cuda::mma_m16n8k16;
using cuda::pack_floats;
using cuda::pack_pair;

constexpr int kTile = 64;     // rows per block and per streamed tile
constexpr int kTileThreads = 128;  // 4 warps of 16 rows
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr unsigned kFullMask = 0xffffffffu;

// Rows [first, first + kTile) of one head into a shared [kTile][D + 8] tile; rows at or past
// `limit` are zeros. Every thread of the block takes part.
template <typename T, int D>
__device__ __forceinline__ void load_rows(const T* head, int64_t row_stride, int first, int limit, T* tile) {
  constexpr int kChunks = D / 8, kPitch = D + 8;
  for (int e = threadIdx.x; e < kTile * kChunks; e += kTileThreads) {
    const int r = e / kChunks, c = e % kChunks, row = first + r;
    uint4 v{0, 0, 0, 0};
    if (row < limit) v = *reinterpret_cast<const uint4*>(head + int64_t(row) * row_stride + c * 8);
    *reinterpret_cast<uint4*>(tile + r * kPitch + c * 8) = v;
  }
}

template <typename T, int kPitch>
__device__ __forceinline__ uint32_t word_at(const T* tile, int row, int col) {
  return *reinterpret_cast<const uint32_t*>(tile + row * kPitch + col);
}

// The A fragment of rows [r0, r0 + 16) and columns [c0, c0 + 16) of a shared tile.
template <typename T, int kPitch>
__device__ __forceinline__ void a_fragment(const T* tile, int r0, int c0, uint32_t (&a)[4]) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  a[0] = word_at<T, kPitch>(tile, r0 + g, c0 + 2 * t);
  a[1] = word_at<T, kPitch>(tile, r0 + g + 8, c0 + 2 * t);
  a[2] = word_at<T, kPitch>(tile, r0 + g, c0 + 2 * t + 8);
  a[3] = word_at<T, kPitch>(tile, r0 + g + 8, c0 + 2 * t + 8);
}

// The B fragment B[k][n] = tile[n0 + n][k0 + k]: the tile's rows as B's columns (K^T in Q K^T).
template <typename T, int kPitch>
__device__ __forceinline__ void b_fragment_of_rows(const T* tile, int n0, int k0, uint32_t (&b)[2]) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  b[0] = word_at<T, kPitch>(tile, n0 + g, k0 + 2 * t);
  b[1] = word_at<T, kPitch>(tile, n0 + g, k0 + 2 * t + 8);
}

// The B fragment B[k][n] = tile[k0 + k][n0 + n]: the tile as it is (V in P V).
template <typename T, int kPitch>
__device__ __forceinline__ void b_fragment_of_columns(const T* tile, int k0, int n0, uint32_t (&b)[2]) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const T* column = tile + n0 + g;
  b[0] = pack_pair(column[(k0 + 2 * t) * kPitch], column[(k0 + 2 * t + 1) * kPitch]);
  b[1] = pack_pair(column[(k0 + 2 * t + 8) * kPitch], column[(k0 + 2 * t + 9) * kPitch]);
}

// The warp's A fragments of rows [first, first + kTile) of one head, through a shared tile (rows
// at or past `limit` are zeros). Every thread of the block takes part; the tile may be written again
// after the next __syncthreads.
template <typename T, int D>
__device__ __forceinline__ void load_fragments(const T* head, int64_t row_stride, int first, int limit, T* tile,
                                               uint32_t (&a)[D / 16][4]) {
  load_rows<T, D>(head, row_stride, first, limit, tile);
  __syncthreads();
  const int warp = threadIdx.x / 32;
#pragma unroll
  for (int kc = 0; kc < D / 16; ++kc) a_fragment<T, D + 8>(tile, warp * 16, kc * 16, a[kc]);
}

// One (batch, head)'s rows of an operand.
template <typename T>
__device__ __forceinline__ T* head_of(T* x, Layout l, int b, int h) {
  return x + b * l.b + h * l.h;
}

// acc[j] += A (16 x 16 kc-chunks in registers) times the transpose of tile rows [8 j, 8 j + 8):
// a [16 x 64] product of the warp's rows with the tile's 64 rows.
template <typename T, int D>
__device__ __forceinline__ void rows_times_tile_rows(const uint32_t (&a)[D / 16][4], const T* tile, float (&acc)[8][4]) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      uint32_t b[2];
      b_fragment_of_rows<T, D + 8>(tile, j * 8, kc * 16, b);
      mma_m16n8k16<T>(acc[j], a[kc], b);
    }
  }
}

// out[dn] += P (a [16 x 64] product in C fragments, rounded to T) times the tile [64 x D].
template <typename T, int D>
__device__ __forceinline__ void product_times_tile(const float (&p)[8][4], const T* tile, float (&out)[D / 8][4]) {
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const uint32_t a[4] = {pack_floats<T>(p[2 * c][0], p[2 * c][1]), pack_floats<T>(p[2 * c][2], p[2 * c][3]),
                           pack_floats<T>(p[2 * c + 1][0], p[2 * c + 1][1]),
                           pack_floats<T>(p[2 * c + 1][2], p[2 * c + 1][3])};
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      uint32_t b[2];
      b_fragment_of_columns<T, D + 8>(tile, c * 16, dn * 8, b);
      mma_m16n8k16<T>(out[dn], a, b);
    }
  }
}

__device__ __forceinline__ float row_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
  return fmaxf(v, __shfl_xor_sync(kFullMask, v, 2));
}
__device__ __forceinline__ float row_sum(float v) {
  v += __shfl_xor_sync(kFullMask, v, 1);
  return v + __shfl_xor_sync(kFullMask, v, 2);
}

// Rows r0 = 16 w + g and r0 + 8 of a [16 x D] C-fragment block, times mul[r], to rows of `dst`
// (row stride `stride`) that are below `limit`.
template <typename T, int D>
__device__ __forceinline__ void store_rows(const float (&acc)[D / 8][4], const float (&mul)[2], const int (&row)[2],
                                           int limit, T* dst, int64_t stride) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row[r] >= limit) continue;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      *reinterpret_cast<uint32_t*>(dst + int64_t(row[r]) * stride + dn * 8 + 2 * t) =
          pack_floats<T>(acc[dn][2 * r] * mul[r], acc[dn][2 * r + 1] * mul[r]);
    }
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kTileThreads)
    tc_forward_kernel(const T* q, Layout lq, const T* k, Layout lk, const T* v, Layout lv, T* out, Layout lo,
                      float* lse, Problem pb) {
  constexpr int kPitch = D + 8;
  alignas(16) __shared__ T k_s[kTile * kPitch];
  alignas(16) __shared__ T v_s[kTile * kPitch];
  const int bh = blockIdx.y, b = bh / pb.H, h = bh % pb.H, q0 = int(blockIdx.x) * kTile;
  const int warp = threadIdx.x / 32, g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  uint32_t qa[D / 16][4];
  load_fragments<T, D>(head_of(q, lq, b, h), lq.t, q0, pb.Tq, k_s, qa);
  const int row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  const int seen[2] = {pb.visible(min(row[0], pb.Tq - 1)), pb.visible(min(row[1], pb.Tq - 1))};
  const float scale_log2 = float(pb.scale) * kLog2e;
  float o[D / 8][4] = {};
  float m[2] = {-CUDART_INF_F, -CUDART_INF_F}, l[2] = {0.f, 0.f};
  const int keys = pb.visible(min(pb.Tq - 1, q0 + kTile - 1));
  for (int k0 = 0; k0 < keys; k0 += kTile) {
    __syncthreads();  // the previous tiles (or Q) are consumed
    load_rows<T, D>(head_of(k, lk, b, h), lk.t, k0, pb.Tk, k_s);
    load_rows<T, D>(head_of(v, lv, b, h), lv.t, k0, pb.Tk, v_s);
    __syncthreads();
    float s[8][4];
    rows_times_tile_rows<T, D>(qa, k_s, s);
    float tile_max[2] = {-CUDART_INF_F, -CUDART_INF_F};
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = k0 + j * 8 + 2 * t + (e & 1), r = e >> 1;
        s[j][e] = col < seen[r] ? s[j][e] * scale_log2 : -CUDART_INF_F;
        tile_max[r] = fmaxf(tile_max[r], s[j][e]);
      }
    }
    float base[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float m_new = fmaxf(m[r], row_max(tile_max[r]));
      base[r] = m_new == -CUDART_INF_F ? 0.f : m_new;  // a row that has seen no key yet
      alpha[r] = exp2f(m[r] - base[r]);
      m[r] = m_new;
      l[r] *= alpha[r];
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] = exp2f(s[j][e] - base[e >> 1]);
        l[e >> 1] += s[j][e];
      }
    }
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
#pragma unroll
      for (int e = 0; e < 4; ++e) o[dn][e] *= alpha[e >> 1];
    }
    product_times_tile<T, D>(s, v_s, o);
  }
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] = row_sum(l[r]);
    inv[r] = l[r] > 0.f ? 1.f / l[r] : 0.f;
    if (t == 0 && row[r] < pb.Tq)
      lse[int64_t(bh) * pb.Tq + row[r]] = l[r] > 0.f ? (m[r] + log2f(l[r])) * kLn2 : -CUDART_INF_F;
  }
  store_rows<T, D>(o, inv, row, pb.Tq, head_of(out, lo, b, h), lo.t);
}

template <typename T>
__global__ void __launch_bounds__(kTileThreads)
    tc_delta_kernel(const T* out, Layout lo, const T* gout, Layout lg, float* delta, Problem pb) {
  const int bh = blockIdx.y, b = bh / pb.H, h = bh % pb.H;
  const int i = int(blockIdx.x) * (kTileThreads / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  float acc = 0.f;
  if (i < pb.Tq) {
    const T* o = head_of(out, lo, b, h) + int64_t(i) * lo.t;
    const T* go = head_of(gout, lg, b, h) + int64_t(i) * lg.t;
    for (int d = lane; d < pb.D; d += 32) acc += cuda::to_acc(o[d]) * cuda::to_acc(go[d]);
  }
#pragma unroll
  for (int width = 16; width > 0; width /= 2) acc += __shfl_xor_sync(kFullMask, acc, width);
  if (i < pb.Tq && lane == 0) delta[int64_t(bh) * pb.Tq + i] = acc;
}

template <typename T, int D>
__global__ void __launch_bounds__(kTileThreads)
    tc_dq_kernel(const T* q, Layout lq, const T* k, Layout lk, const T* v, Layout lv, const T* gout, Layout lg,
                 const float* lse, const float* delta, T* gq, Layout lgq, Problem pb) {
  constexpr int kPitch = D + 8;
  alignas(16) __shared__ T k_s[kTile * kPitch];
  alignas(16) __shared__ T v_s[kTile * kPitch];
  const int bh = blockIdx.y, b = bh / pb.H, h = bh % pb.H, q0 = int(blockIdx.x) * kTile;
  const int warp = threadIdx.x / 32, g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  uint32_t qa[D / 16][4], da[D / 16][4];
  load_fragments<T, D>(head_of(q, lq, b, h), lq.t, q0, pb.Tq, k_s, qa);
  load_fragments<T, D>(head_of(gout, lg, b, h), lg.t, q0, pb.Tq, v_s, da);
  const int row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  int seen[2];
  float lse2[2], dl[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const bool in = row[r] < pb.Tq;
    seen[r] = in ? pb.visible(row[r]) : 0;
    lse2[r] = in ? lse[int64_t(bh) * pb.Tq + row[r]] * kLog2e : 0.f;
    dl[r] = in ? delta[int64_t(bh) * pb.Tq + row[r]] : 0.f;
  }
  const float scale_log2 = float(pb.scale) * kLog2e;
  float dq[D / 8][4] = {};
  const int keys = pb.visible(min(pb.Tq - 1, q0 + kTile - 1));
  for (int k0 = 0; k0 < keys; k0 += kTile) {
    __syncthreads();
    load_rows<T, D>(head_of(k, lk, b, h), lk.t, k0, pb.Tk, k_s);
    load_rows<T, D>(head_of(v, lv, b, h), lv.t, k0, pb.Tk, v_s);
    __syncthreads();
    float s[8][4], dp[8][4];
    rows_times_tile_rows<T, D>(qa, k_s, s);
    rows_times_tile_rows<T, D>(da, v_s, dp);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = k0 + j * 8 + 2 * t + (e & 1), r = e >> 1;
        const float p = col < seen[r] ? exp2f(s[j][e] * scale_log2 - lse2[r]) : 0.f;
        s[j][e] = p * (dp[j][e] - dl[r]);  // dS / scale
      }
    }
    product_times_tile<T, D>(s, k_s, dq);
  }
  const float scale[2] = {float(pb.scale), float(pb.scale)};
  store_rows<T, D>(dq, scale, row, pb.Tq, head_of(gq, lgq, b, h), lgq.t);
}

template <typename T, int D>
__global__ void __launch_bounds__(kTileThreads)
    tc_dkv_kernel(const T* q, Layout lq, const T* k, Layout lk, const T* v, Layout lv, const T* gout, Layout lg,
                  const float* lse, const float* delta, T* gk, Layout lgk, T* gv, Layout lgv, Problem pb) {
  constexpr int kPitch = D + 8;
  alignas(16) __shared__ T q_s[kTile * kPitch];
  alignas(16) __shared__ T do_s[kTile * kPitch];
  __shared__ float lse_s[kTile], delta_s[kTile];
  const int bh = blockIdx.y, b = bh / pb.H, h = bh % pb.H, j0 = int(blockIdx.x) * kTile;
  const int warp = threadIdx.x / 32, g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  uint32_t ka[D / 16][4], va[D / 16][4];
  load_fragments<T, D>(head_of(k, lk, b, h), lk.t, j0, pb.Tk, q_s, ka);
  load_fragments<T, D>(head_of(v, lv, b, h), lv.t, j0, pb.Tk, do_s, va);
  const int key[2] = {j0 + warp * 16 + g, j0 + warp * 16 + g + 8};
  const float scale_log2 = float(pb.scale) * kLog2e;
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  // Query i sees key j when j < visible(i), that is i >= j - (Tk - Tq) under the causal mask.
  const int first = pb.causal ? max(0, j0 - (pb.Tk - pb.Tq)) : 0;
  for (int i0 = first; i0 < pb.Tq; i0 += kTile) {
    __syncthreads();
    load_rows<T, D>(head_of(q, lq, b, h), lq.t, i0, pb.Tq, q_s);
    load_rows<T, D>(head_of(gout, lg, b, h), lg.t, i0, pb.Tq, do_s);
    for (int e = threadIdx.x; e < kTile; e += kTileThreads) {
      const bool in = i0 + e < pb.Tq;
      lse_s[e] = in ? lse[int64_t(bh) * pb.Tq + i0 + e] * kLog2e : 0.f;
      delta_s[e] = in ? delta[int64_t(bh) * pb.Tq + i0 + e] : 0.f;
    }
    __syncthreads();
    float st[8][4], dpt[8][4];  // [key][query]
    rows_times_tile_rows<T, D>(ka, q_s, st);
    rows_times_tile_rows<T, D>(va, do_s, dpt);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = j * 8 + 2 * t + (e & 1), i = i0 + col;
        const bool sees = i < pb.Tq && key[e >> 1] < pb.visible(i);
        const float p = sees ? exp2f(st[j][e] * scale_log2 - lse_s[col]) : 0.f;
        st[j][e] = p;
        dpt[j][e] = p * (dpt[j][e] - delta_s[col]);  // dS^T / scale
      }
    }
    product_times_tile<T, D>(st, do_s, dv);
    product_times_tile<T, D>(dpt, q_s, dk);
  }
  const float one[2] = {1.f, 1.f}, scale[2] = {float(pb.scale), float(pb.scale)};
  store_rows<T, D>(dk, scale, key, pb.Tk, head_of(gk, lgk, b, h), lgk.t);
  store_rows<T, D>(dv, one, key, pb.Tk, head_of(gv, lgv, b, h), lgv.t);
}

bool aligned_for_vectors(const TensorView& x) {
  return reinterpret_cast<uintptr_t>(x.ptr<const void>()) % 16 == 0 && x.strides[0] % 8 == 0 &&
         x.strides[1] % 8 == 0 && x.strides[2] % 8 == 0 && x.strides[3] == 1;
}

// Runs body(TypeTag<T>, integral_constant<D>) for the tensor-core kernels' dtypes and head sizes.
template <typename F>
void dispatch_tensor_core(DType dtype, int64_t D, F&& body) {
  auto with_type = [&](auto tag) {
    if (D == 32) return body(tag, std::integral_constant<int, 32>{});
    return body(tag, std::integral_constant<int, 64>{});
  };
  if (dtype == DType::BFloat16) return with_type(cuda::TypeTag<__nv_bfloat16>{});
  return with_type(cuda::TypeTag<__half>{});
}

dim3 tile_grid(int64_t rows, int64_t heads) { return dim3(unsigned((rows + kTile - 1) / kTile), unsigned(heads)); }

}  // namespace

namespace cuda {

bool attention_runs_on_tensor_cores(const AttentionParams& p, std::initializer_list<const TensorView*> operands) {
  const TensorView& q = **operands.begin();
  if (q.dtype != DType::BFloat16 && q.dtype != DType::Float16) return false;
  if (q.shape[3] != 32 && q.shape[3] != 64) return false;
  if (p.dropout_p > 0.0) return false;
  if (q.shape[0] * q.shape[1] > 65535) return false;
  for (const TensorView* x : operands) {
    if (x->dtype != q.dtype || !aligned_for_vectors(*x)) return false;
  }
  return true;
}

bool attention_forward_tensor_cores(const TensorView& q, const TensorView& k, const TensorView& v,
                                    const AttentionParams& p, const TensorView& out, const TensorView& lse) {
  if (!attention_runs_on_tensor_cores(p, {&q, &k, &v, &out})) return false;
  const Problem pb = problem_of(q, k, p);
  dispatch_tensor_core(q.dtype, pb.D, [&](auto tag_, auto head) {
    using T = TANDEM_CUDA_TYPE(tag_);
    launch<tc_forward_kernel<T, decltype(head)::value>>(
        tile_grid(pb.Tq, int64_t(pb.B) * pb.H), dim3(kTileThreads), 0, current_stream(), q.ptr<const T>(), layout_of(q),
        k.ptr<const T>(), layout_of(k), v.ptr<const T>(), layout_of(v), out.ptr<T>(), layout_of(out),
        lse.ptr<float>(), pb);
    TANDEM_CUDA_CHECK_LAUNCH("tc_forward_kernel");
  });
  return true;
}

bool attention_backward_tensor_cores(const TensorView& q, const TensorView& k, const TensorView& v,
                                     const TensorView& out, const TensorView& gout, const TensorView& lse,
                                     const AttentionParams& p, const TensorView& gq, const TensorView& gk,
                                     const TensorView& gv) {
  if (!attention_runs_on_tensor_cores(p, {&q, &k, &v, &out, &gout, &gq, &gk, &gv})) return false;
  const Problem pb = problem_of(q, k, p);
  const int64_t heads = int64_t(pb.B) * pb.H;
  norm::DeviceScratch delta(size_t(heads * pb.Tq) * sizeof(float));
  dispatch_tensor_core(q.dtype, pb.D, [&](auto tag_, auto head) {
    using T = TANDEM_CUDA_TYPE(tag_);
    constexpr int D = decltype(head)::value;
    launch<tc_delta_kernel<T>>(dim3(unsigned((pb.Tq + 3) / 4), unsigned(heads)), dim3(kTileThreads), 0,
                               current_stream(), out.ptr<const T>(), layout_of(out), gout.ptr<const T>(),
                               layout_of(gout), delta.as<float>(), pb);
    TANDEM_CUDA_CHECK_LAUNCH("tc_delta_kernel");
    launch<tc_dq_kernel<T, D>>(tile_grid(pb.Tq, heads), dim3(kTileThreads), 0, current_stream(), q.ptr<const T>(),
                               layout_of(q), k.ptr<const T>(), layout_of(k), v.ptr<const T>(), layout_of(v),
                               gout.ptr<const T>(), layout_of(gout), lse.ptr<const float>(), delta.as<float>(),
                               gq.ptr<T>(), layout_of(gq), pb);
    TANDEM_CUDA_CHECK_LAUNCH("tc_dq_kernel");
    launch<tc_dkv_kernel<T, D>>(tile_grid(pb.Tk, heads), dim3(kTileThreads), 0, current_stream(), q.ptr<const T>(),
                                layout_of(q), k.ptr<const T>(), layout_of(k), v.ptr<const T>(), layout_of(v),
                                gout.ptr<const T>(), layout_of(gout), lse.ptr<const float>(), delta.as<float>(),
                                gk.ptr<T>(), layout_of(gk), gv.ptr<T>(), layout_of(gv), pb);
    TANDEM_CUDA_CHECK_LAUNCH("tc_dkv_kernel");
  });
  return true;
}

}  // namespace cuda
}  // namespace tandem
