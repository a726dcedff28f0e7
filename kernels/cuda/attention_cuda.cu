// Scaled-dot-product attention on CUDA, flash-attention style, forward and backward.
//
// Computes, per (batch b, head h): out = dropout(softmax(scale q k^T + mask)) v, with
//   q [B, H, Tq, D], k and v [B, H, Tk, D], out [B, H, Tq, D] (any strides on the first three
//   dims, stride 1 on D), float32 / float64 / float16 / bfloat16 inputs with float accumulation
//   (double for float64), lse [B, H, Tq] (float32; float64 for float64) = each row's
//   logsumexp; the causal mask lets query i see keys j <= i + (Tk - Tq); dropout keeps element
//   (b, h, i, j) when philox::uniform01(bits(seed, offset, ((b H + h) Tq + i) Tk + j)) >= p, the
//   CPU's rule, so both backends draw the same mask (kernels/backend.h, AttentionParams).
//   No [Tq, Tk] buffer exists in global memory.
//
// bfloat16 and float16 problems with head size 32 or 64 and no dropout run on tensor cores
// instead (attention_tensor_core.cu; CudaBackend's entry points below try it first).
//
// Launch plan. A row group of kLanes = 4 threads owns one query row (forward, dQ) or one key
// row (dK/dV); lane l holds elements d = 4 s + l (s < kSlice) of that row in registers, so a
// dot product is kSlice FMAs per lane and two xor shuffles within the group. kSlice is a
// template bucket (8, 16, 32: D <= 32, 64, 128). A block is kRows = 32 row groups
// (128 threads); the other operand streams through shared memory in tiles of kTile rows
// (converted to the accumulation type), kTile sized so the two tiles stay under 32 KB.
//   attention_forward_kernel   grid (ceil(Tq / 32), B H): per query row an online softmax over
//                              the key tiles (running max m, sum l, output rescaled when m
//                              grows); each lane keeps the tile's kTile scores in registers.
//   attention_dq_kernel        grid (ceil(Tq / 32), B H): Delta_i = rowsum(dO_i * O_i) (written
//                              for the next kernel), then over the key tiles P = exp(s - lse),
//                              dS = P (dP - Delta), dQ += scale dS K.
//   attention_dkv_kernel       grid (ceil(Tk / 32), B H): per key row, over the query tiles that
//                              see it, dV += P^T dO and dK += scale dS^T Q.
// dQ and dK/dV are separate kernels (the scores are recomputed in both) so that no gradient is
// accumulated with atomics: results do not depend on timing. Rows past the end of a tile are
// zero-filled in shared memory and their probabilities are 0; every thread runs every barrier
// and shuffle (rows past Tq or Tk compute on clamped indices and write nothing).
#include <math_constants.h>

#include <string>

#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/norm_common.cuh"
#include "kernels/cuda/step_graph.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_tensor_core.h"

namespace tandem {
namespace {

using cuda::from_acc;
using cuda::to_acc;
using cuda::attention::Layout;
using cuda::attention::layout_of;
using cuda::attention::Problem;
using cuda::attention::problem_of;

constexpr int kLanes = 4;   // threads per row
constexpr int kRows = 32;   // rows per block
constexpr int kThreads = kRows * kLanes;
constexpr unsigned kFullMask = 0xffffffffu;

// Rows of the streamed operand per shared-memory tile: two tiles of [kTile][4 kSlice] A fit
// in 32 KB; at most 32.
template <typename A, int kSlice>
struct TileRows {
  static constexpr int kFit = int(32768 / (2 * kLanes * kSlice * sizeof(A)));
  static constexpr int value = kFit < 32 ? kFit : 32;
};

__device__ __forceinline__ float exp_acc(float v) { return expf(v); }
__device__ __forceinline__ double exp_acc(double v) { return exp(v); }
__device__ __forceinline__ float log_acc(float v) { return logf(v); }
__device__ __forceinline__ double log_acc(double v) { return log(v); }
template <typename A> __device__ __forceinline__ A neg_inf();
template <> __device__ __forceinline__ float neg_inf<float>() { return -CUDART_INF_F; }
template <> __device__ __forceinline__ double neg_inf<double>() { return -CUDART_INF; }

template <typename A>
__device__ __forceinline__ A group_sum(A v) {
  v += __shfl_xor_sync(kFullMask, v, 1, kLanes);
  v += __shfl_xor_sync(kFullMask, v, 2, kLanes);
  return v;
}

// This lane's slice of row `row` of one head (zeros past D, or for an invalid row), times mul.
template <typename T, typename A, int kSlice>
__device__ __forceinline__ void load_slice(const T* head, int64_t row_stride, int row, bool valid, int D, A mul,
                                           A (&out)[kSlice]) {
  const int lane = threadIdx.x % kLanes;
#pragma unroll
  for (int s = 0; s < kSlice; ++s) {
    const int d = s * kLanes + lane;
    out[s] = valid && d < D ? A(to_acc(head[int64_t(row) * row_stride + d])) * mul : A(0);
  }
}

// Rows [first, first + rows) of one head into a shared [tile][4 kSlice] array (times mul;
// rows past `limit` and columns past D are zero). Every thread of the block takes part.
template <typename T, typename A, int kSlice, int kTile>
__device__ __forceinline__ void load_tile(const T* head, int64_t row_stride, int first, int limit, int D, A mul,
                                          A (*tile)[kLanes * kSlice]) {
  constexpr int kCols = kLanes * kSlice;
  for (int e = threadIdx.x; e < kTile * kCols; e += blockDim.x) {
    const int r = e / kCols, d = e % kCols, row = first + r;
    tile[r][d] = row < limit && d < D ? A(to_acc(head[int64_t(row) * row_stride + d])) * mul : A(0);
  }
}

template <typename A, int kSlice>
__device__ __forceinline__ A dot_slice(const A (&x)[kSlice], const A* row) {
  const int lane = threadIdx.x % kLanes;
  A acc = 0;
#pragma unroll
  for (int s = 0; s < kSlice; ++s) acc += x[s] * row[s * kLanes + lane];
  return group_sum(acc);
}

template <typename T, int kSlice>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(const T* q, Layout lq, const T* k, Layout lk, const T* v, Layout lv, T* out,
                             Layout lo, cuda::acc_t<T>* lse, Problem pb) {
  using A = cuda::acc_t<T>;
  constexpr int kTile = TileRows<A, kSlice>::value;
  __shared__ A k_tile[kTile][kLanes * kSlice];
  __shared__ A v_tile[kTile][kLanes * kSlice];
  const int bh = blockIdx.y, b = bh / pb.H, h = bh % pb.H;
  const int i = blockIdx.x * kRows + threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const bool valid = i < pb.Tq;
  const int row = valid ? i : pb.Tq - 1;  // rows past Tq follow the last row's mask, write nothing
  const T* kh = k + b * lk.b + h * lk.h;
  const T* vh = v + b * lv.b + h * lv.h;
  A qs[kSlice], o[kSlice];
  load_slice<T, A, kSlice>(q + b * lq.b + h * lq.h, lq.t, row, true, pb.D, A(pb.scale), qs);
#pragma unroll
  for (int s = 0; s < kSlice; ++s) o[s] = 0;
  A m = neg_inf<A>(), l = 0;
  const int seen = pb.visible(row);
  const int keys = pb.visible(min(pb.Tq - 1, int(blockIdx.x) * kRows + kRows - 1));
  for (int j0 = 0; j0 < keys; j0 += kTile) {
    __syncthreads();  // the previous tiles are consumed
    load_tile<T, A, kSlice, kTile>(kh, lk.t, j0, pb.Tk, pb.D, A(1), k_tile);
    load_tile<T, A, kSlice, kTile>(vh, lv.t, j0, pb.Tk, pb.D, A(1), v_tile);
    __syncthreads();
    A scores[kTile];
    A tile_max = neg_inf<A>();
#pragma unroll
    for (int j = 0; j < kTile; ++j) {
      const A sc = dot_slice<A, kSlice>(qs, k_tile[j]);
      scores[j] = j0 + j < seen ? sc : neg_inf<A>();
      tile_max = max(tile_max, scores[j]);
    }
    // Tile 0 holds key 0, which every row sees, so m is finite from then on.
    const A m_new = max(m, tile_max);
    const A rescale = exp_acc(m - m_new);
    l *= rescale;
#pragma unroll
    for (int s = 0; s < kSlice; ++s) o[s] *= rescale;
#pragma unroll
    for (int j = 0; j < kTile; ++j) {
      A p = exp_acc(scores[j] - m_new);
      l += p;
      p *= pb.dropout_factor<A>(bh, row, j0 + j);
#pragma unroll
      for (int s = 0; s < kSlice; ++s) o[s] += p * v_tile[j][s * kLanes + lane];
    }
    m = m_new;
  }
  if (!valid) return;
  T* oh = out + b * lo.b + h * lo.h + int64_t(i) * lo.t;
  const A inv = A(1) / l;
#pragma unroll
  for (int s = 0; s < kSlice; ++s) {
    const int d = s * kLanes + lane;
    if (d < pb.D) oh[d] = from_acc<T>(o[s] * inv);
  }
  if (lane == 0) lse[int64_t(bh) * pb.Tq + i] = m + log_acc(l);
}

template <typename T, int kSlice>
__global__ void __launch_bounds__(kThreads)
    attention_dq_kernel(const T* q, Layout lq, const T* k, Layout lk, const T* v, Layout lv, const T* out,
                        Layout lo, const T* gout, Layout lg, const cuda::acc_t<T>* lse, cuda::acc_t<T>* delta,
                        T* gq, Layout lgq, Problem pb) {
  using A = cuda::acc_t<T>;
  constexpr int kTile = TileRows<A, kSlice>::value;
  __shared__ A k_tile[kTile][kLanes * kSlice];
  __shared__ A v_tile[kTile][kLanes * kSlice];
  const int bh = blockIdx.y, b = bh / pb.H, h = bh % pb.H;
  const int i = blockIdx.x * kRows + threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const bool valid = i < pb.Tq;
  const int row = valid ? i : pb.Tq - 1;
  A qs[kSlice], dos[kSlice], dq[kSlice];
  load_slice<T, A, kSlice>(q + b * lq.b + h * lq.h, lq.t, row, true, pb.D, A(pb.scale), qs);
  load_slice<T, A, kSlice>(gout + b * lg.b + h * lg.h, lg.t, row, valid, pb.D, A(1), dos);
  A row_delta;  // rowsum(dO * O), also written for the dK/dV kernel (0 for rows past Tq)
  {
    A os[kSlice];
    load_slice<T, A, kSlice>(out + b * lo.b + h * lo.h, lo.t, row, valid, pb.D, A(1), os);
    A acc = 0;
#pragma unroll
    for (int s = 0; s < kSlice; ++s) {
      acc += dos[s] * os[s];
      dq[s] = 0;
    }
    row_delta = group_sum(acc);
    if (valid && lane == 0) delta[int64_t(bh) * pb.Tq + i] = row_delta;
  }
  const A row_lse = lse[int64_t(bh) * pb.Tq + row];
  const T* kh = k + b * lk.b + h * lk.h;
  const T* vh = v + b * lv.b + h * lv.h;
  const int seen = pb.visible(row);
  const int keys = pb.visible(min(pb.Tq - 1, int(blockIdx.x) * kRows + kRows - 1));
  for (int j0 = 0; j0 < keys; j0 += kTile) {
    __syncthreads();
    load_tile<T, A, kSlice, kTile>(kh, lk.t, j0, pb.Tk, pb.D, A(1), k_tile);
    load_tile<T, A, kSlice, kTile>(vh, lv.t, j0, pb.Tk, pb.D, A(1), v_tile);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTile; ++j) {
      const A sc = dot_slice<A, kSlice>(qs, k_tile[j]);
      const A dp = dot_slice<A, kSlice>(dos, v_tile[j]) * pb.dropout_factor<A>(bh, row, j0 + j);
      const A p = j0 + j < seen ? exp_acc(sc - row_lse) : A(0);
      const A ds = p * (dp - row_delta) * A(pb.scale);
#pragma unroll
      for (int s = 0; s < kSlice; ++s) dq[s] += ds * k_tile[j][s * kLanes + lane];
    }
  }
  if (!valid) return;
  T* gh = gq + b * lgq.b + h * lgq.h + int64_t(i) * lgq.t;
#pragma unroll
  for (int s = 0; s < kSlice; ++s) {
    const int d = s * kLanes + lane;
    if (d < pb.D) gh[d] = from_acc<T>(dq[s]);
  }
}

template <typename T, int kSlice>
__global__ void __launch_bounds__(kThreads)
    attention_dkv_kernel(const T* q, Layout lq, const T* k, Layout lk, const T* v, Layout lv, const T* gout,
                         Layout lg, const cuda::acc_t<T>* lse, const cuda::acc_t<T>* delta, T* gk, Layout lgk,
                         T* gv, Layout lgv, Problem pb) {
  using A = cuda::acc_t<T>;
  constexpr int kTile = TileRows<A, kSlice>::value;
  __shared__ A q_tile[kTile][kLanes * kSlice];
  __shared__ A do_tile[kTile][kLanes * kSlice];
  __shared__ A lse_tile[kTile];
  __shared__ A delta_tile[kTile];
  const int bh = blockIdx.y, b = bh / pb.H, h = bh % pb.H;
  const int j = blockIdx.x * kRows + threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const bool valid = j < pb.Tk;
  const int key = valid ? j : pb.Tk - 1;
  A ks[kSlice], vs[kSlice], dk[kSlice], dv[kSlice];
  load_slice<T, A, kSlice>(k + b * lk.b + h * lk.h, lk.t, key, true, pb.D, A(1), ks);
  load_slice<T, A, kSlice>(v + b * lv.b + h * lv.h, lv.t, key, true, pb.D, A(1), vs);
#pragma unroll
  for (int s = 0; s < kSlice; ++s) dk[s] = dv[s] = 0;
  const T* qh = q + b * lq.b + h * lq.h;
  const T* gh = gout + b * lg.b + h * lg.h;
  // The first query row that sees this block's first key.
  const int first_key = int(blockIdx.x) * kRows;
  const int first_query = pb.causal ? max(0, first_key - (pb.Tk - pb.Tq)) : 0;
  for (int i0 = first_query; i0 < pb.Tq; i0 += kTile) {
    __syncthreads();
    load_tile<T, A, kSlice, kTile>(qh, lq.t, i0, pb.Tq, pb.D, A(pb.scale), q_tile);
    load_tile<T, A, kSlice, kTile>(gh, lg.t, i0, pb.Tq, pb.D, A(1), do_tile);
    for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
      const bool in = i0 + r < pb.Tq;
      lse_tile[r] = in ? lse[int64_t(bh) * pb.Tq + i0 + r] : A(0);
      delta_tile[r] = in ? delta[int64_t(bh) * pb.Tq + i0 + r] : A(0);
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kTile; ++r) {
      const int i = i0 + r;
      const A sc = dot_slice<A, kSlice>(ks, q_tile[r]);
      const bool sees = i < pb.Tq && key < pb.visible(i);
      const A p = sees ? exp_acc(sc - lse_tile[r]) : A(0);
      const A factor = pb.dropout_factor<A>(bh, i < pb.Tq ? i : pb.Tq - 1, key);
      const A dp = dot_slice<A, kSlice>(vs, do_tile[r]) * factor;
      const A ds = p * (dp - delta_tile[r]);
#pragma unroll
      for (int s = 0; s < kSlice; ++s) {
        dv[s] += p * factor * do_tile[r][s * kLanes + lane];
        dk[s] += ds * q_tile[r][s * kLanes + lane];  // q_tile holds scale * q
      }
    }
  }
  if (!valid) return;
  T* gkh = gk + b * lgk.b + h * lgk.h + int64_t(j) * lgk.t;
  T* gvh = gv + b * lgv.b + h * lgv.h + int64_t(j) * lgv.t;
#pragma unroll
  for (int s = 0; s < kSlice; ++s) {
    const int d = s * kLanes + lane;
    if (d < pb.D) {
      gkh[d] = from_acc<T>(dk[s]);
      gvh[d] = from_acc<T>(dv[s]);
    }
  }
}

// Runs body(std::integral_constant<int, kSlice>) for the head size's bucket.
template <typename F>
void dispatch_head_size(int64_t D, const char* kernel, F&& body) {
  if (D <= 32) return body(std::integral_constant<int, 8>{});
  if (D <= 64) return body(std::integral_constant<int, 16>{});
  if (D <= 128) return body(std::integral_constant<int, 32>{});
  throw ShapeError(std::string(kernel) + " on CUDA supports head sizes D up to 128, got " + std::to_string(D) +
                   "; run this attention on the CPU or split the heads");
}

dim3 grid_of(int64_t rows, int64_t heads, const char* kernel) {
  if (heads > 65535)
    throw ShapeError(std::string(kernel) + " on CUDA supports up to 65535 batch x heads, got " + std::to_string(heads));
  return dim3(unsigned((rows + kRows - 1) / kRows), unsigned(heads));
}

}  // namespace

void CudaBackend::attention_forward(const TensorView& q, const TensorView& k, const TensorView& v,
                                    const AttentionParams& p, const TensorView& out, const TensorView& lse) {
  if (cuda::attention_forward_tensor_cores(q, k, v, p, out, lse)) return;
  const Problem pb = problem_of(q, k, p);
  const dim3 grid = grid_of(pb.Tq, int64_t(pb.B) * pb.H, "attention_forward");
  if (p.dropout_p > 0.0) cuda::count_random_launch();  // a CUDA graph would replay this mask (step_graph.h)
  cuda::dispatch_float(q.dtype, "attention_forward", [&](auto tag_) { using T = TANDEM_CUDA_TYPE(tag_);
    dispatch_head_size(pb.D, "attention_forward", [&](auto slice) {
      cuda::launch<attention_forward_kernel<T, decltype(slice)::value>>(
          grid, dim3(kThreads), 0, cuda::current_stream(), q.ptr<const T>(), layout_of(q), k.ptr<const T>(),
          layout_of(k), v.ptr<const T>(), layout_of(v), out.ptr<T>(), layout_of(out),
          lse.ptr<cuda::acc_t<T>>(), pb);
      TANDEM_CUDA_CHECK_LAUNCH("attention_forward_kernel");
    });
  });
}

void CudaBackend::attention_backward(const TensorView& q, const TensorView& k, const TensorView& v,
                                     const TensorView& out, const TensorView& gout, const TensorView& lse,
                                     const AttentionParams& p, const TensorView& gq, const TensorView& gk,
                                     const TensorView& gv) {
  if (cuda::attention_backward_tensor_cores(q, k, v, out, gout, lse, p, gq, gk, gv)) return;
  const Problem pb = problem_of(q, k, p);
  const int64_t heads = int64_t(pb.B) * pb.H;
  const dim3 query_grid = grid_of(pb.Tq, heads, "attention_backward"), key_grid = grid_of(pb.Tk, heads, "attention_backward");
  cuda::dispatch_float(q.dtype, "attention_backward", [&](auto tag_) { using T = TANDEM_CUDA_TYPE(tag_);
    using A = cuda::acc_t<T>;
    cuda::norm::DeviceScratch delta(size_t(heads * pb.Tq) * sizeof(A));  // Delta per query row
    dispatch_head_size(pb.D, "attention_backward", [&](auto slice) {
      constexpr int kSlice = decltype(slice)::value;
      cuda::launch<attention_dq_kernel<T, kSlice>>(
          query_grid, dim3(kThreads), 0, cuda::current_stream(), q.ptr<const T>(), layout_of(q), k.ptr<const T>(),
          layout_of(k), v.ptr<const T>(), layout_of(v), out.ptr<const T>(), layout_of(out), gout.ptr<const T>(),
          layout_of(gout), lse.ptr<const A>(), delta.as<A>(), gq.ptr<T>(), layout_of(gq), pb);
      TANDEM_CUDA_CHECK_LAUNCH("attention_dq_kernel");
      cuda::launch<attention_dkv_kernel<T, kSlice>>(
          key_grid, dim3(kThreads), 0, cuda::current_stream(), q.ptr<const T>(), layout_of(q), k.ptr<const T>(),
          layout_of(k), v.ptr<const T>(), layout_of(v), gout.ptr<const T>(), layout_of(gout), lse.ptr<const A>(),
          delta.as<A>(), gk.ptr<T>(), layout_of(gk), gv.ptr<T>(), layout_of(gv), pb);
      TANDEM_CUDA_CHECK_LAUNCH("attention_dkv_kernel");
    });
  });
}

}  // namespace tandem
