// Layer norm on CUDA: x viewed as [rows, cols], each row normalized on its own (batch norm:
// norm_cuda.cu).
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

#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/norm_common.cuh"

namespace tandem {
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
__global__ void __launch_bounds__(cuda::kThreads)
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
__global__ void __launch_bounds__(cuda::kThreads)
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
__global__ void __launch_bounds__(cuda::kThreads)
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
    cuda::launch<WarpKernel>(cuda::grid_for(rows * 32), cuda::kThreads, 0, cuda::current_stream(), args...);
  else
    cuda::launch<BlockKernel>(cuda::grid_for(rows * cuda::kThreads), cuda::kThreads, 0, cuda::current_stream(),
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
        cuda::norm::grid_for_warps(cols), cuda::kThreads, 0, cuda::current_stream(), partials.as<double2>(),
        plan.chunks, cols, cuda::norm::mutable_ptr_or_null<P>(ggamma), cuda::norm::mutable_ptr_or_null<P>(gbeta));
    TANDEM_CUDA_CHECK_LAUNCH("param_grad_finalize_kernel");
  });
}

}  // namespace tandem
