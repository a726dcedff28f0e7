// The norm family on CUDA: batch norm and layer norm, forward and backward.
//
// Batch norm: x viewed as [outer, c, inner], statistics per channel over the M = outer * inner
// elements of each channel.
//
// Per-channel sums (training statistics; the two sums of the backward) run in two
// deterministic passes: pass 1 writes partial sums per (chunk, channel) in double, pass 2
// (one warp per channel, warp_sum_items) adds them in a fixed order. Pass 1 has two shapes:
//   - inner large enough for a warp to read whole 32-byte sectors (inner * sizeof(T) >= 32):
//     one block per (channel, chunk of the channel's M elements), threads walk the chunk's
//     (outer, inner) positions in order, block_sum combines them (fixed tree);
//   - small inner (e.g. BatchNorm1d, inner = 1): x as a [outer, c * inner] matrix and the
//     column partial kernel of norm_common.cuh (coalesced across channels); pass 2 also adds
//     the `inner` columns of a channel.
// Statistics are shifted sums: with K = x[0, ch, 0], S1 = sum(x - K), S2 = sum((x - K)^2),
// mean = K + S1/M, var = S2/M - (S1/M)^2 (biased). K is one sample of the channel, so
// |S1/M| is a few standard deviations and the subtraction loses nothing even for data like
// 1000 + randn; in double this matches the CPU's two-pass result to ~1e-15.
// Elementwise passes (apply, input gradient) use 4-element vectors when inner % 4 == 0 and
// the pointers are aligned (the 4 elements then share a channel).
//
// Layer norm: x viewed as [rows, cols], each row normalized on its own.
//
// Row kernels give each row to one warp (cols <= 1024) or to one block (longer rows); the
// team reads its row with lane-strided (coalesced) loops and sums in double with the fixed
// shuffle / block_sum tree, so a row's result does not depend on timing. Statistics are the
// CPU's two passes (mean, then the mean squared deviation) in double; the second and third
// reads of the row come from L1/L2. Per-element arithmetic follows the CPU's order
// (kernels/cpu/norm_cpu.cpp) so float32 results agree with it to about an ulp.
// The weight/bias gradients are column sums over rows: the column partial kernel of
// norm_common.cuh (per row chunk, fixed order) and a second pass (one warp per column)
// adding the chunks in a fixed order.
#include <cmath>
#include <memory>

#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/norm_common.cuh"

namespace tandem {
namespace {

using cuda::from_acc;
using cuda::to_acc;
using cuda::norm::VecN;

// ---------------------------------------------------------------- per-channel terms
// Statistics: a = x - K, b = (x - K)^2 with K = x[0, ch, 0].
template <typename T>
struct StatsTerm {
  const T* x;
  int64_t c, inner;
  __device__ double channel(int64_t ch) const { return double(to_acc(x[ch * inner])); }
  __device__ void accumulate_at(double shift, int64_t idx, double& a, double& b) const {
    const double d = double(to_acc(x[idx])) - shift;
    a += d;
    b += d * d;
  }
  __device__ double column(int64_t col) const { return channel(col / inner); }
  __device__ void accumulate(double shift, int64_t row, int64_t col, double& a, double& b) const {
    accumulate_at(shift, row * c * inner + col, a, b);
  }
};

// Backward: a = gy, b = gy * (x - mean) * invstd (the CPU's sum_g and sum_gx terms).
template <typename T, typename P>
struct GradTerm {
  const T* x;
  const T* gy;
  const P* mean;
  const P* invstd;
  int64_t c, inner;
  struct Channel {
    double mean, inv;
  };
  __device__ Channel channel(int64_t ch) const { return {double(to_acc(mean[ch])), double(to_acc(invstd[ch]))}; }
  __device__ void accumulate_at(Channel k, int64_t idx, double& a, double& b) const {
    const double g = double(to_acc(gy[idx]));
    a += g;
    b += g * (double(to_acc(x[idx])) - k.mean) * k.inv;
  }
  __device__ Channel column(int64_t col) const { return channel(col / inner); }
  __device__ void accumulate(Channel k, int64_t row, int64_t col, double& a, double& b) const {
    accumulate_at(k, row * c * inner + col, a, b);
  }
};

// Pass 1, large inner: block (ch, chunk) sums term over elements [k0, k1) of channel ch,
// element k being x[k / inner, ch, k % inner]; partials[chunk * c + ch].
template <typename Term>
__global__ void __launch_bounds__(cuda::kElementwiseThreads)
    channel_partials_kernel(const Term term, int64_t c, int64_t inner, int64_t M, int64_t chunks,
                            int64_t per_chunk, double2* partials) {
  __shared__ double scratch[32];
  const int64_t ch = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  const int64_t k0 = chunk * per_chunk, k1 = k0 + per_chunk < M ? k0 + per_chunk : M;
  const auto ctx = term.channel(ch);
  double a = 0, b = 0;
  int64_t k = k0 + threadIdx.x;
  int64_t o = k / inner, i = k % inner;  // (outer, inner) of k, advanced without dividing
  const int64_t step_o = blockDim.x / inner, step_i = blockDim.x % inner;
  for (; k < k1; k += blockDim.x) {
    term.accumulate_at(ctx, (o * c + ch) * inner + i, a, b);
    o += step_o;
    i += step_i;
    if (i >= inner) {
      i -= inner;
      ++o;
    }
  }
  a = cuda::block_sum(a, scratch);
  b = cuda::block_sum(b, scratch);
  if (threadIdx.x == 0) partials[chunk * c + ch] = make_double2(a, b);
}

// Layout of pass 1's partials: [chunks][cols], `per` consecutive columns per channel
// (cols = c * per). chunks == 0 when M == 0 (nothing to sum).
struct ChannelPlan {
  int64_t chunks = 0, cols = 0, per = 1;
};

// Pass 1 for any term, in the shape that suits `inner`; allocates and fills `partials`.
template <typename T, typename Term>
ChannelPlan plan_and_sum_channels(const Term& term, int64_t outer, int64_t c, int64_t inner,
                                  std::unique_ptr<cuda::norm::DeviceScratch>& partials) {
  ChannelPlan plan;
  const int64_t M = outer * inner;
  if (M == 0 || c == 0) return plan;
  if (inner * int64_t(sizeof(T)) >= 32) {
    const int64_t want = (4 * 132 + c - 1) / c;
    plan.chunks = std::max<int64_t>(1, std::min<int64_t>(want, M / 2048));
    const int64_t per_chunk = (M + plan.chunks - 1) / plan.chunks;
    plan.chunks = (M + per_chunk - 1) / per_chunk;
    plan.cols = c;
    plan.per = 1;
    partials = std::make_unique<cuda::norm::DeviceScratch>(size_t(plan.chunks * c) * sizeof(double2));
    cuda::launch<channel_partials_kernel<Term>>(unsigned(plan.chunks * c), cuda::kElementwiseThreads, 0, cuda::current_stream(),
                                                term, c, inner, M, plan.chunks, per_chunk, partials->as<double2>());
    TANDEM_CUDA_CHECK_LAUNCH("channel_partials_kernel");
  } else {
    const cuda::norm::ColumnPlan cp = cuda::norm::plan_columns(outer, c * inner);
    plan.chunks = cp.chunks;
    plan.cols = c * inner;
    plan.per = inner;
    partials = std::make_unique<cuda::norm::DeviceScratch>(size_t(plan.chunks * plan.cols) * sizeof(double2));
    cuda::norm::launch_column_partials(term, outer, plan.cols, cp, partials->as<double2>());
  }
  return plan;
}

// Channel ch's partials as items t = chunk * per + i (chunk-major), for warp_sum_items.
struct ChannelItems {
  const double2* partials;
  ChannelPlan plan;
  int64_t ch;
  __device__ double2 operator()(int64_t t) const {
    const int64_t chunk = t / plan.per, i = t - chunk * plan.per;
    return partials[chunk * plan.cols + ch * plan.per + i];
  }
};

// Pass 2 of the training statistics, one warp per channel. M == 0 gives NaN statistics, as
// on the CPU (0/0).
template <typename T, typename P>
__global__ void __launch_bounds__(cuda::kElementwiseThreads)
    stats_finalize_kernel(const double2* partials, ChannelPlan plan, const T* x, int64_t c, int64_t inner, double M,
                          double eps, P* save_mean, P* save_invstd) {
  for (int64_t ch = cuda::norm::first_warp_output(); ch < c; ch += cuda::norm::warp_output_stride()) {
    const double2 s = cuda::norm::warp_sum_items(plan.chunks * plan.per, ChannelItems{partials, plan, ch});
    if ((threadIdx.x & 31) != 0) continue;
    const double shift = M > 0 ? double(to_acc(x[ch * inner])) : 0.0;
    const double d = s.x / M;
    double var = s.y / M - d * d;
    if (var < 0) var = 0;  // rounding; a NaN stays NaN
    save_mean[ch] = from_acc<P>(shift + d);
    save_invstd[ch] = from_acc<P>(1.0 / sqrt(var + eps));
  }
}

// Per-channel constants of the input gradient (CPU: k = gamma * invstd / M).
struct GradCoef {
  double mean, inv, k, sum_g, sum_gx;
};

template <typename P>
__global__ void __launch_bounds__(cuda::kElementwiseThreads)
    grad_finalize_kernel(const double2* partials, ChannelPlan plan, int64_t c, double M, const P* mean,
                         const P* invstd, const P* gamma, P* ggamma, P* gbeta, GradCoef* coef) {
  for (int64_t ch = cuda::norm::first_warp_output(); ch < c; ch += cuda::norm::warp_output_stride()) {
    const double2 s = cuda::norm::warp_sum_items(plan.chunks * plan.per, ChannelItems{partials, plan, ch});
    if ((threadIdx.x & 31) != 0) continue;
    if (ggamma) ggamma[ch] = from_acc<P>(s.y);
    if (gbeta) gbeta[ch] = from_acc<P>(s.x);
    const double inv = double(to_acc(invstd[ch]));
    const double gam = gamma ? double(to_acc(gamma[ch])) : 1.0;
    coef[ch] = GradCoef{double(to_acc(mean[ch])), inv, gam * inv / M, s.x, s.y};
  }
}

// ---------------------------------------------------------------- elementwise passes
// y = (x - mean) * (invstd * gamma) + beta in the accumulation type.
template <typename T, typename P>
struct ApplyOp {
  const T* x;
  T* y;
  const P *mean, *invstd, *gamma, *beta;
  template <int V>
  __device__ void operator()(int64_t idx, int64_t ch) const {
    using A = cuda::acc_t<T>;
    const A m = A(to_acc(mean[ch]));
    const A scale = A(to_acc(invstd[ch])) * (gamma ? A(to_acc(gamma[ch])) : A(1));
    const A shift = beta ? A(to_acc(beta[ch])) : A(0);
    const VecN<T, V> in = *reinterpret_cast<const VecN<T, V>*>(x + idx);
    VecN<T, V> out;
#pragma unroll
    for (int l = 0; l < V; ++l) out.v[l] = from_acc<T>((A(to_acc(in.v[l])) - m) * scale + shift);
    *reinterpret_cast<VecN<T, V>*>(y + idx) = out;
  }
};

// gx = k * (M * gy - sum_g - xhat * sum_gx), xhat = (x - mean) * invstd, in double (CPU formula).
template <typename T>
struct GradInputOp {
  const T* x;
  const T* gy;
  T* gx;
  const GradCoef* coef;
  double M;
  template <int V>
  __device__ void operator()(int64_t idx, int64_t ch) const {
    const GradCoef k = coef[ch];
    const VecN<T, V> xv = *reinterpret_cast<const VecN<T, V>*>(x + idx);
    const VecN<T, V> gv = *reinterpret_cast<const VecN<T, V>*>(gy + idx);
    VecN<T, V> out;
#pragma unroll
    for (int l = 0; l < V; ++l) {
      const double xhat = (double(to_acc(xv.v[l])) - k.mean) * k.inv;
      out.v[l] = from_acc<T>(k.k * (M * double(to_acc(gv.v[l])) - k.sum_g - xhat * k.sum_gx));
    }
    *reinterpret_cast<VecN<T, V>*>(gx + idx) = out;
  }
};

// Calls op<V>(idx, channel of idx) for idx = 0, V, 2V, ... < n; V divides inner.
template <int V, typename Op>
__global__ void __launch_bounds__(cuda::kElementwiseThreads) per_channel_kernel(const Op op, int64_t n, int64_t inner, int64_t c) {
  const int64_t vectors = n / V;
  for (int64_t v = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; v < vectors; v += int64_t(blockDim.x) * gridDim.x) {
    const int64_t idx = v * V;
    op.template operator()<V>(idx, (idx / inner) % c);
  }
}

template <typename T, typename Op>
void launch_per_channel(const Op& op, int64_t n, int64_t inner, int64_t c, bool pointers_aligned) {
  if (n == 0) return;
  if (inner % 4 == 0 && pointers_aligned) {
    cuda::launch<per_channel_kernel<4, Op>>(cuda::grid_for(n / 4), cuda::kElementwiseThreads, 0, cuda::current_stream(), op, n,
                                            inner, c);
  } else {
    cuda::launch<per_channel_kernel<1, Op>>(cuda::grid_for(n), cuda::kElementwiseThreads, 0, cuda::current_stream(), op, n, inner,
                                            c);
  }
  TANDEM_CUDA_CHECK_LAUNCH("per_channel_kernel");
}

}  // namespace

void CudaBackend::batch_norm_train(const TensorView& x, int64_t outer, int64_t c, int64_t inner,
                                   const TensorView* gamma, const TensorView* beta, double eps, const TensorView& y,
                                   const TensorView& save_mean, const TensorView& save_invstd) {
  const char* kernel = "batch_norm";
  cuda::norm::check_param_dtype(kernel, gamma, save_mean.dtype, "weight");
  cuda::norm::check_param_dtype(kernel, beta, save_mean.dtype, "bias");
  cuda::norm::check_param_dtype(kernel, &save_invstd, save_mean.dtype, "save_invstd");
  if (c == 0) return;
  cuda::norm::dispatch_norm(x.dtype, save_mean.dtype, kernel, [&](auto x_tag, auto p_tag) {
    using T = TANDEM_CUDA_TYPE(x_tag);
    using P = TANDEM_CUDA_TYPE(p_tag);
    std::unique_ptr<cuda::norm::DeviceScratch> partials;
    const ChannelPlan plan = plan_and_sum_channels<T>(StatsTerm<T>{x.ptr<T>(), c, inner}, outer, c, inner, partials);
    cuda::launch<stats_finalize_kernel<T, P>>(cuda::norm::grid_for_warps(c), cuda::kElementwiseThreads, 0, cuda::current_stream(),
                                              partials ? partials->as<double2>() : nullptr, plan, x.ptr<T>(), c, inner,
                                              double(outer * inner), eps, save_mean.ptr<P>(), save_invstd.ptr<P>());
    TANDEM_CUDA_CHECK_LAUNCH("stats_finalize_kernel");
  });
  batch_norm_apply(x, outer, c, inner, save_mean, save_invstd, gamma, beta, y);
}

void CudaBackend::batch_norm_apply(const TensorView& x, int64_t outer, int64_t c, int64_t inner,
                                   const TensorView& mean, const TensorView& invstd, const TensorView* gamma,
                                   const TensorView* beta, const TensorView& y) {
  const char* kernel = "batch_norm";
  cuda::norm::check_param_dtype(kernel, gamma, mean.dtype, "weight");
  cuda::norm::check_param_dtype(kernel, beta, mean.dtype, "bias");
  cuda::norm::check_param_dtype(kernel, &invstd, mean.dtype, "invstd");
  const int64_t n = outer * c * inner;
  if (n == 0) return;
  cuda::norm::dispatch_norm(x.dtype, mean.dtype, kernel, [&](auto x_tag, auto p_tag) {
    using T = TANDEM_CUDA_TYPE(x_tag);
    using P = TANDEM_CUDA_TYPE(p_tag);
    const ApplyOp<T, P> op{x.ptr<T>(), y.ptr<T>(), mean.ptr<P>(), invstd.ptr<P>(),
                           cuda::norm::ptr_or_null<P>(gamma), cuda::norm::ptr_or_null<P>(beta)};
    const size_t vec = 4 * sizeof(T);
    launch_per_channel<T>(op, n, inner, c, cuda::norm::aligned_to(x.data, vec) && cuda::norm::aligned_to(y.data, vec));
  });
}

void CudaBackend::batch_norm_backward(const TensorView& x, const TensorView& gy, int64_t outer, int64_t c,
                                      int64_t inner, const TensorView& save_mean, const TensorView& save_invstd,
                                      const TensorView* gamma, const TensorView& gx, const TensorView* ggamma,
                                      const TensorView* gbeta) {
  const char* kernel = "batch_norm_backward";
  cuda::norm::check_param_dtype(kernel, gamma, save_mean.dtype, "weight");
  cuda::norm::check_param_dtype(kernel, ggamma, save_mean.dtype, "weight gradient");
  cuda::norm::check_param_dtype(kernel, gbeta, save_mean.dtype, "bias gradient");
  cuda::norm::check_param_dtype(kernel, &save_invstd, save_mean.dtype, "save_invstd");
  if (c == 0) return;
  cuda::norm::dispatch_norm(x.dtype, save_mean.dtype, kernel, [&](auto x_tag, auto p_tag) {
    using T = TANDEM_CUDA_TYPE(x_tag);
    using P = TANDEM_CUDA_TYPE(p_tag);
    const GradTerm<T, P> term{x.ptr<T>(), gy.ptr<T>(), save_mean.ptr<P>(), save_invstd.ptr<P>(), c, inner};
    std::unique_ptr<cuda::norm::DeviceScratch> partials;
    const ChannelPlan plan = plan_and_sum_channels<T>(term, outer, c, inner, partials);
    cuda::norm::DeviceScratch coef(size_t(c) * sizeof(GradCoef));
    const double M = double(outer * inner);
    cuda::launch<grad_finalize_kernel<P>>(cuda::norm::grid_for_warps(c), cuda::kElementwiseThreads, 0, cuda::current_stream(),
                                          partials ? partials->as<double2>() : nullptr, plan, c, M, save_mean.ptr<P>(),
                                          save_invstd.ptr<P>(), cuda::norm::ptr_or_null<P>(gamma),
                                          cuda::norm::mutable_ptr_or_null<P>(ggamma),
                                          cuda::norm::mutable_ptr_or_null<P>(gbeta), coef.as<GradCoef>());
    TANDEM_CUDA_CHECK_LAUNCH("grad_finalize_kernel");
    const GradInputOp<T> op{x.ptr<T>(), gy.ptr<T>(), gx.ptr<T>(), coef.as<GradCoef>(), M};
    const size_t vec = 4 * sizeof(T);
    launch_per_channel<T>(op, outer * c * inner, inner, c,
                          cuda::norm::aligned_to(x.data, vec) && cuda::norm::aligned_to(gy.data, vec) &&
                              cuda::norm::aligned_to(gx.data, vec));
  });
}

namespace {

using cuda::from_acc;
using cuda::to_acc;

constexpr int64_t kWarpRowMaxCols = 1024;

// Which rows a thread works on and its place in the row's team (a warp or the whole block).
template <bool kWholeBlock>
struct RowTeam {
  int64_t first_row, row_stride;
  int lane, width;
  __device__ RowTeam() {
    if constexpr (kWholeBlock) {
      first_row = blockIdx.x;
      row_stride = gridDim.x;
      lane = threadIdx.x;
      width = blockDim.x;
    } else {
      const int warps = blockDim.x / 32;
      first_row = int64_t(blockIdx.x) * warps + threadIdx.x / 32;
      row_stride = int64_t(gridDim.x) * warps;
      lane = threadIdx.x & 31;
      width = 32;
    }
  }
  // Sum over the team, returned to every member. Called by the whole team (row loops are
  // uniform per warp, or per block for kWholeBlock).
  __device__ double sum(double v, double* scratch) const {
    if constexpr (kWholeBlock) {
      return cuda::block_sum(v, scratch);
    } else {
      v = cuda::warp_sum(v);
      return __shfl_sync(0xffffffffu, v, 0);
    }
  }
};

template <typename A, typename P>
__device__ __forceinline__ A param_or(const P* p, int64_t j, A fallback) {
  return p ? A(to_acc(p[j])) : fallback;
}

// y = T((x - mean) * invstd) * gamma + beta per row; saves the row's mean and invstd.
template <typename T, typename P, bool kWholeBlock>
__global__ void __launch_bounds__(cuda::kElementwiseThreads)
    layer_norm_kernel(const T* x, const P* gamma, const P* beta, T* y, P* save_mean, P* save_invstd, int64_t rows,
                      int64_t cols, double eps) {
  using A = cuda::acc_t<T>;
  __shared__ double scratch[32];
  const RowTeam<kWholeBlock> team;
  for (int64_t r = team.first_row; r < rows; r += team.row_stride) {
    const T* in = x + r * cols;
    T* out = y + r * cols;
    double s = 0;
    for (int64_t j = team.lane; j < cols; j += team.width) s += double(to_acc(in[j]));
    const double mean = team.sum(s, scratch) / double(cols);
    double v = 0;
    for (int64_t j = team.lane; j < cols; j += team.width) {
      const double d = double(to_acc(in[j])) - mean;
      v += d * d;
    }
    const double inv = 1.0 / sqrt(team.sum(v, scratch) / double(cols) + eps);
    if (team.lane == 0) {
      save_mean[r] = from_acc<P>(mean);
      save_invstd[r] = from_acc<P>(inv);
    }
    for (int64_t j = team.lane; j < cols; j += team.width) {
      const A h = A((double(to_acc(in[j])) - mean) * inv);
      out[j] = from_acc<T>(h * param_or<A>(gamma, j, A(1)) + param_or<A>(beta, j, A(0)));
    }
  }
}

// gx per row: g = gy * gamma; gx = invstd/M (M g - sum(g) - xhat sum(g xhat)), in double.
template <typename T, typename P, bool kWholeBlock>
__global__ void __launch_bounds__(cuda::kElementwiseThreads)
    layer_norm_grad_input_kernel(const T* x, const T* gy, const P* save_mean, const P* save_invstd, const P* gamma,
                                 T* gx, int64_t rows, int64_t cols) {
  using A = cuda::acc_t<T>;
  __shared__ double scratch[32];
  const RowTeam<kWholeBlock> team;
  const double M = double(cols);
  for (int64_t r = team.first_row; r < rows; r += team.row_stride) {
    const double mean = double(to_acc(save_mean[r])), inv = double(to_acc(save_invstd[r]));
    const T* in = x + r * cols;
    const T* g = gy + r * cols;
    double sum_g = 0, sum_gx = 0;
    for (int64_t j = team.lane; j < cols; j += team.width) {
      const double gj = double(A(to_acc(g[j])) * param_or<A>(gamma, j, A(1)));
      sum_g += gj;
      sum_gx += gj * (double(to_acc(in[j])) - mean) * inv;
    }
    sum_g = team.sum(sum_g, scratch);
    sum_gx = team.sum(sum_gx, scratch);
    for (int64_t j = team.lane; j < cols; j += team.width) {
      const double gj = double(A(to_acc(g[j])) * param_or<A>(gamma, j, A(1)));
      gx[r * cols + j] = from_acc<T>(inv / M * (M * gj - sum_g - (double(to_acc(in[j])) - mean) * inv * sum_gx));
    }
  }
}

// Column terms of the parameter gradients: a = gy * (x - mean) * invstd (weight), b = gy (bias).
template <typename T, typename P>
struct ParamGradTerm {
  const T* x;
  const T* gy;
  const P* mean;
  const P* invstd;
  int64_t cols;
  struct None {};
  __device__ None column(int64_t) const { return {}; }
  __device__ void accumulate(None, int64_t row, int64_t col, double& a, double& b) const {
    const int64_t idx = row * cols + col;
    const double g = double(to_acc(gy[idx]));
    a += g * (double(to_acc(x[idx])) - double(to_acc(mean[row]))) * double(to_acc(invstd[row]));
    b += g;
  }
};

// Column col's partials, one per row chunk, for warp_sum_items.
struct ColumnItems {
  const double2* partials;
  int64_t cols, col;
  __device__ double2 operator()(int64_t chunk) const { return partials[chunk * cols + col]; }
};

// Second pass of the parameter gradients: one warp per column adds its chunks' partials.
template <typename P>
__global__ void __launch_bounds__(cuda::kElementwiseThreads)
    param_grad_finalize_kernel(const double2* partials, int64_t chunks, int64_t cols, P* ggamma, P* gbeta) {
  for (int64_t col = cuda::norm::first_warp_output(); col < cols; col += cuda::norm::warp_output_stride()) {
    const double2 s = cuda::norm::warp_sum_items(chunks, ColumnItems{partials, cols, col});
    if ((threadIdx.x & 31) != 0) continue;
    if (ggamma) ggamma[col] = from_acc<P>(s.x);
    if (gbeta) gbeta[col] = from_acc<P>(s.y);
  }
}

// Launches a row kernel with a warp per row (short rows) or a block per row.
template <auto WarpKernel, auto BlockKernel, typename... Args>
void launch_rows(int64_t rows, int64_t cols, const char* name, Args... args) {
  if (cols <= kWarpRowMaxCols)
    cuda::launch<WarpKernel>(cuda::grid_for(rows * 32), cuda::kElementwiseThreads, 0, cuda::current_stream(), args...);
  else
    cuda::launch<BlockKernel>(cuda::grid_for(rows * cuda::kElementwiseThreads), cuda::kElementwiseThreads, 0, cuda::current_stream(),
                              args...);
  cuda::check_runtime(cudaGetLastError(), name, __FILE__, __LINE__);
}

}  // namespace

void CudaBackend::layer_norm(const TensorView& x, int64_t rows, int64_t cols, const TensorView* gamma,
                             const TensorView* beta, double eps, const TensorView& y, const TensorView& save_mean,
                             const TensorView& save_invstd) {
  const char* kernel = "layer_norm";
  cuda::norm::check_param_dtype(kernel, gamma, save_mean.dtype, "weight");
  cuda::norm::check_param_dtype(kernel, beta, save_mean.dtype, "bias");
  cuda::norm::check_param_dtype(kernel, &save_invstd, save_mean.dtype, "save_invstd");
  if (rows == 0) return;
  cuda::norm::dispatch_norm(x.dtype, save_mean.dtype, kernel, [&](auto x_tag, auto p_tag) {
    using T = TANDEM_CUDA_TYPE(x_tag);
    using P = TANDEM_CUDA_TYPE(p_tag);
    launch_rows<layer_norm_kernel<T, P, false>, layer_norm_kernel<T, P, true>>(
        rows, cols, "layer_norm_kernel launch", x.ptr<T>(), cuda::norm::ptr_or_null<P>(gamma),
        cuda::norm::ptr_or_null<P>(beta), y.ptr<T>(), save_mean.ptr<P>(), save_invstd.ptr<P>(), rows, cols, eps);
  });
}

void CudaBackend::layer_norm_backward(const TensorView& x, const TensorView& gy, int64_t rows, int64_t cols,
                                      const TensorView& save_mean, const TensorView& save_invstd,
                                      const TensorView* gamma, const TensorView& gx, const TensorView* ggamma,
                                      const TensorView* gbeta) {
  const char* kernel = "layer_norm_backward";
  cuda::norm::check_param_dtype(kernel, gamma, save_mean.dtype, "weight");
  cuda::norm::check_param_dtype(kernel, ggamma, save_mean.dtype, "weight gradient");
  cuda::norm::check_param_dtype(kernel, gbeta, save_mean.dtype, "bias gradient");
  cuda::norm::check_param_dtype(kernel, &save_invstd, save_mean.dtype, "save_invstd");
  cuda::norm::dispatch_norm(x.dtype, save_mean.dtype, kernel, [&](auto x_tag, auto p_tag) {
    using T = TANDEM_CUDA_TYPE(x_tag);
    using P = TANDEM_CUDA_TYPE(p_tag);
    if (rows > 0)
      launch_rows<layer_norm_grad_input_kernel<T, P, false>, layer_norm_grad_input_kernel<T, P, true>>(
          rows, cols, "layer_norm_grad_input_kernel launch", x.ptr<T>(), gy.ptr<T>(), save_mean.ptr<P>(),
          save_invstd.ptr<P>(), cuda::norm::ptr_or_null<P>(gamma), gx.ptr<T>(), rows, cols);
    if ((!ggamma && !gbeta) || cols == 0) return;
    // Column sums over rows (zero when rows == 0, as on the CPU).
    const cuda::norm::ColumnPlan plan = cuda::norm::plan_columns(rows, cols);
    cuda::norm::DeviceScratch partials(size_t(plan.chunks * cols) * sizeof(double2));
    ParamGradTerm<T, P> term{x.ptr<T>(), gy.ptr<T>(), save_mean.ptr<P>(), save_invstd.ptr<P>(), cols};
    cuda::norm::launch_column_partials(term, rows, cols, plan, partials.as<double2>());
    cuda::launch<param_grad_finalize_kernel<P>>(
        cuda::norm::grid_for_warps(cols), cuda::kElementwiseThreads, 0, cuda::current_stream(), partials.as<double2>(),
        plan.chunks, cols, cuda::norm::mutable_ptr_or_null<P>(ggamma), cuda::norm::mutable_ptr_or_null<P>(gbeta));
    TANDEM_CUDA_CHECK_LAUNCH("param_grad_finalize_kernel");
  });
}

}  // namespace tandem
