// CUDA softmax / log_softmax (forward and backward, rows of length cols) and the per-row
// negative log-likelihood pieces that cross_entropy and nll_loss are built from (tensor/ops/
// softmax_loss.cpp: cross_entropy = log_softmax over the class dim + nll_rows, with
// [N, C, d1, ...] inputs moved to [N * d1 * ..., C] rows first).
//
// Softmax kernels are in softmax_kernels.cuh: a warp per row with the row in registers up to
// 1024 columns, a block per row above. NLL:
//   nll_rows           a warp per row; loss_i = -(1 - ls) * logp[i, t_i] - ls / C * sum_c
//                      logp[i, c] in double exactly as the CPU writes it (the row sum, taken
//                      only when ls > 0, is a fixed warp tree in double).
//   nll_rows_backward  a thread per element of glogp [rows, C].
// Target values: the op front end checks on the host that every target is ignore_index or in
// [0, C) before these kernels run. A direct Backend caller could still pass another value; the
// kernels never index memory with it: such a row gets loss NaN and valid 1 (so a mean over it
// is NaN too), and its gradient row is NaN, instead of an out-of-bounds read.
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/softmax_kernels.cuh"

namespace tandem {

namespace {

using namespace cuda::softmax_detail;

constexpr int64_t kMaxGrid = int64_t(1) << 24;
constexpr int kWarpColsMax = 32 * 32;  // longest row the warp kernels hold in registers

int blocks_for(int64_t items, int64_t per_block) {
  const int64_t b = (items + per_block - 1) / per_block;
  return int(b < 1 ? 1 : (b > kMaxGrid ? kMaxGrid : b));
}

// Elements per lane for a warp-per-row kernel: the smallest power of two with 32 * it >= cols.
int per_lane_for(int64_t cols) {
  int k = 1;
  while (32 * k < cols) k *= 2;
  return k;
}

// Calls launch(std::integral_constant<int, K>) for K = per_lane_for(cols) in {1, ..., 32}.
template <typename F>
void with_per_lane(int64_t cols, F&& launch) {
  switch (per_lane_for(cols)) {
    case 1: launch(std::integral_constant<int, 1>{}); break;
    case 2: launch(std::integral_constant<int, 2>{}); break;
    case 4: launch(std::integral_constant<int, 4>{}); break;
    case 8: launch(std::integral_constant<int, 8>{}); break;
    case 16: launch(std::integral_constant<int, 16>{}); break;
    default: launch(std::integral_constant<int, 32>{}); break;
  }
}

// ---------------------------------------------------------------- NLL kernels
// Warp per row (the loop is warp-uniform: every lane reads the same target).
template <typename T>
__global__ void __launch_bounds__(kThreads)
nll_rows_kernel(const T* logp, const int64_t* target, int64_t rows, int64_t classes, int64_t ignore_index,
                double label_smoothing, T* loss, T* valid) {
  using A = cuda::acc_t<T>;
  const int lane = threadIdx.x & 31;
  for (int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; row < rows;
       row += int64_t(gridDim.x) * kWarpsPerBlock) {
    const int64_t t = target[row];
    if (t == ignore_index || t < 0 || t >= classes) {
      if (lane == 0) {
        const bool ignored = t == ignore_index;
        loss[row] = cuda::from_acc<T>(ignored ? A(0) : A(CUDART_NAN));
        valid[row] = cuda::from_acc<T>(A(ignored ? 0 : 1));
      }
      continue;
    }
    const T* lp = logp + row * classes;
    double s = 0;
    if (label_smoothing > 0) {
      for (int64_t c = lane; c < classes; c += 32) s += double(cuda::to_acc(lp[c]));
      s = cuda::warp_sum(s);  // lane 0 holds the row sum
    }
    if (lane == 0) {
      double value = -(1.0 - label_smoothing) * double(cuda::to_acc(lp[t]));
      if (label_smoothing > 0) value -= label_smoothing / double(classes) * s;
      loss[row] = cuda::from_acc<T>(value);
      valid[row] = cuda::from_acc<T>(A(1));
    }
  }
}

// glogp[i, c] = T(-g_i * ls / C) plus, at c == t_i, T(-g_i * (1 - ls)) added in T's precision
// (the CPU's `row[t] += ...`); 0 for ignored rows. Index is uint32_t when rows * classes <=
// 2^31 - 1: then k + grid stride (at most n + 255, the grid never exceeds n's blocks) cannot wrap.
template <typename T, typename Index>
__global__ void __launch_bounds__(kThreads)
nll_rows_backward_kernel(const T* gloss, const int64_t* target, Index rows, Index classes, int64_t ignore_index,
                         double label_smoothing, T* glogp) {
  using A = cuda::acc_t<T>;
  const Index n = rows * classes;
  for (Index k = Index(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += Index(gridDim.x) * blockDim.x) {
    const Index i = k / classes, c = k - i * classes;
    const int64_t t = target[i];
    T value;
    if (t == ignore_index) {
      value = cuda::from_acc<T>(A(0));
    } else if (t < 0 || t >= int64_t(classes)) {
      value = cuda::from_acc<T>(A(CUDART_NAN));
    } else {
      const double g = double(cuda::to_acc(gloss[i]));
      value = cuda::from_acc<T>(-g * label_smoothing / double(classes));
      if (int64_t(c) == t)
        value = cuda::from_acc<T>(cuda::to_acc(value) + cuda::to_acc(cuda::from_acc<T>(-g * (1.0 - label_smoothing))));
    }
    glogp[k] = value;
  }
}

void check_targets(const TensorView& target, const char* kernel) {
  if (target.dtype != DType::Int64)
    throw DTypeError(std::string(kernel) + " needs int64 targets, got " + dtype_name(target.dtype));
}

}  // namespace

void CudaBackend::softmax(const TensorView& x, int64_t rows, int64_t cols, const TensorView& y, bool log) {
  cuda::dispatch_float(x.dtype, "softmax", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    if (rows == 0 || cols == 0) return;
    const T* xp = x.ptr<const T>();
    T* yp = y.ptr<T>();
    cudaStream_t stream = cuda::current_stream();
    if (cols <= kWarpColsMax) {
      with_per_lane(cols, [&](auto per_lane) {
        cuda::launch<softmax_warp_kernel<T, decltype(per_lane)::value>>(blocks_for(rows, kWarpsPerBlock), kThreads, 0,
                                                                        stream, xp, yp, rows, int(cols), log);
      });
    } else {
      cuda::launch<softmax_block_kernel<T>>(blocks_for(rows, 1), kThreads, 0, stream, xp, yp, rows, cols, log);
    }
    TANDEM_CUDA_CHECK_LAUNCH("softmax");
  });
}

void CudaBackend::softmax_backward(const TensorView& y, const TensorView& gy, int64_t rows, int64_t cols,
                                   const TensorView& gx, bool log) {
  cuda::dispatch_float(y.dtype, "softmax_backward", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    if (rows == 0 || cols == 0) return;
    const T* yp = y.ptr<const T>();
    const T* gp = gy.ptr<const T>();
    T* op = gx.ptr<T>();
    cudaStream_t stream = cuda::current_stream();
    if (cols <= kWarpColsMax) {
      with_per_lane(cols, [&](auto per_lane) {
        cuda::launch<softmax_backward_warp_kernel<T, decltype(per_lane)::value>>(
            blocks_for(rows, kWarpsPerBlock), kThreads, 0, stream, yp, gp, op, rows, int(cols), log);
      });
    } else {
      cuda::launch<softmax_backward_block_kernel<T>>(blocks_for(rows, 1), kThreads, 0, stream, yp, gp, op, rows, cols,
                                                     log);
    }
    TANDEM_CUDA_CHECK_LAUNCH("softmax_backward");
  });
}

void CudaBackend::nll_rows(const TensorView& logp, const TensorView& target, int64_t ignore_index,
                           double label_smoothing, const TensorView& loss, const TensorView& valid) {
  check_targets(target, "nll_loss");
  cuda::dispatch_float(logp.dtype, "nll_loss", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    const int64_t rows = logp.shape[0], classes = logp.shape[1];
    if (rows == 0) return;
    cuda::launch<nll_rows_kernel<T>>(blocks_for(rows, kWarpsPerBlock), kThreads, 0, cuda::current_stream(),
                                     logp.ptr<const T>(), target.ptr<const int64_t>(), rows, classes, ignore_index,
                                     label_smoothing, loss.ptr<T>(), valid.ptr<T>());
    TANDEM_CUDA_CHECK_LAUNCH("nll_loss");
  });
}

void CudaBackend::nll_rows_backward(const TensorView& gloss, const TensorView& target, int64_t ignore_index,
                                    double label_smoothing, const TensorView& glogp) {
  check_targets(target, "nll_loss_backward");
  cuda::dispatch_float(gloss.dtype, "nll_loss_backward", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    const int64_t rows = glogp.shape[0], classes = glogp.shape[1], n = rows * classes;
    if (n == 0) return;
    const T* gp = gloss.ptr<const T>();
    const int64_t* tp = target.ptr<const int64_t>();
    T* op = glogp.ptr<T>();
    cudaStream_t stream = cuda::current_stream();
    if (n <= int64_t(INT32_MAX)) {
      cuda::launch<nll_rows_backward_kernel<T, uint32_t>>(blocks_for(n, kThreads), kThreads, 0, stream, gp, tp,
                                                          uint32_t(rows), uint32_t(classes), ignore_index,
                                                          label_smoothing, op);
    } else {
      cuda::launch<nll_rows_backward_kernel<T, int64_t>>(blocks_for(n, kThreads), kThreads, 0, stream, gp, tp, rows,
                                                         classes, ignore_index, label_smoothing, op);
    }
    TANDEM_CUDA_CHECK_LAUNCH("nll_loss_backward");
  });
}

}  // namespace tandem
