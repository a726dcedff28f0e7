// Pieces shared by the batch-norm and layer-norm kernels (norm_cuda.cu):
//   - dispatch_norm: input dtype T and parameter/statistics dtype P (P = T today; float32
//     parameters with a float16/bfloat16 input are accepted for mixed precision);
//   - DeviceScratch: temporary device memory from the backend's allocator (stream-ordered);
//   - column partial sums: x viewed as [rows, cols], per-(row chunk, column) sums of two
//     double terms, in a fixed order (threads of a column add their rows in order, the 8
//     row-threads of a block then combine in order); warp_sum_items then adds the chunks.
//     Used for the layer-norm parameter gradients and for batch norm when `inner` is small;
//   - warp_sum_items: the second pass, one warp per output adding its partials.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/kernel_utils.cuh"

namespace tandem::cuda::norm {

// Runs body(TypeTag<T>, TypeTag<P>) for input dtype x_dtype and parameter dtype param_dtype.
template <typename F>
void dispatch_norm(DType x_dtype, DType param_dtype, const char* kernel, F&& body) {
  dispatch_float(x_dtype, kernel, [&](auto x_tag) {
    using T = TANDEM_CUDA_TYPE(x_tag);
    if (param_dtype == x_dtype) return body(x_tag, x_tag);
    if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
      if (param_dtype == DType::Float32) return body(x_tag, TypeTag<float>{});
    }
    throw DTypeError(std::string(kernel) + " on CUDA: statistics/parameters of dtype " + dtype_name(param_dtype) +
                     " with an input of dtype " + dtype_name(x_dtype) +
                     " are not supported (use the input's dtype, or float32 with a float16/bfloat16 input)");
  });
}

inline void check_param_dtype(const char* kernel, const TensorView* t, DType param_dtype, const char* what) {
  if (t && t->dtype != param_dtype)
    throw DTypeError(std::string(kernel) + " on CUDA: " + what + " is " + dtype_name(t->dtype) + " but the statistics are " +
                     dtype_name(param_dtype));
}

template <typename P> const P* ptr_or_null(const TensorView* t) { return t ? t->ptr<P>() : nullptr; }
template <typename P> P* mutable_ptr_or_null(const TensorView* t) { return t ? t->ptr<P>() : nullptr; }

// Scratch device memory for the kernels queued while it lives; freed (stream-ordered) after.
class DeviceScratch {
 public:
  explicit DeviceScratch(size_t bytes) : bytes_(bytes), device_(current_device()) {
    if (bytes_) ptr_ = cuda_backend().allocate(bytes_, device_);
  }
  ~DeviceScratch() {
    if (ptr_) cuda_backend().deallocate(ptr_, bytes_, device_);
  }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  template <typename U> U* as() const { return static_cast<U*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
  int device_;
};

// Vectors of V elements for aligned loads and stores (V = 1: plain elements).
template <typename T, int V> struct alignas(sizeof(T) * V) VecN { T v[V]; };

inline bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// ---------------------------------------------------------------- column partial sums
constexpr int kColTile = 32;  // columns per block (one warp-row of threads)
constexpr int kColRows = 8;   // row-threads per block

struct ColumnPlan {
  int64_t tiles = 0, chunks = 0, rows_per_chunk = 0;
};

// Row chunks so that tiles x chunks blocks fill the GPU a few times over, each chunk at least
// 64 rows (8 per thread); chunks <= 65535 (gridDim.y). No chunk when rows or cols is 0.
inline ColumnPlan plan_columns(int64_t rows, int64_t cols) {
  ColumnPlan p;
  if (rows <= 0 || cols <= 0) return p;
  p.tiles = (cols + kColTile - 1) / kColTile;
  const int64_t want = (4 * 132 + p.tiles - 1) / p.tiles;
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>({want, rows / 64, 65535}));
  p.rows_per_chunk = (rows + chunks - 1) / chunks;
  p.chunks = (rows + p.rows_per_chunk - 1) / p.rows_per_chunk;
  return p;
}

// partials[chunk * cols + col] = (sum a, sum b) of term over the rows of `chunk`.
// Term: `auto ctx = term.column(col)` once per thread, then
// `term.accumulate(ctx, row, col, a, b)` for each row, in increasing row order.
template <typename Term>
__global__ void __launch_bounds__(kColTile * kColRows)
    column_partials_kernel(const Term term, int64_t rows, int64_t cols, int64_t rows_per_chunk, double2* partials) {
  __shared__ double sum_a[kColRows][kColTile];
  __shared__ double sum_b[kColRows][kColTile];
  const int64_t col = int64_t(blockIdx.x) * kColTile + threadIdx.x;
  const int64_t chunk = blockIdx.y;
  const int64_t row_begin = chunk * rows_per_chunk;
  const int64_t row_end = row_begin + rows_per_chunk < rows ? row_begin + rows_per_chunk : rows;
  double a = 0, b = 0;
  if (col < cols) {
    const auto ctx = term.column(col);
    for (int64_t r = row_begin + threadIdx.y; r < row_end; r += kColRows) term.accumulate(ctx, r, col, a, b);
  }
  sum_a[threadIdx.y][threadIdx.x] = a;
  sum_b[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    double ta = 0, tb = 0;
    for (int y = 0; y < kColRows; ++y) {
      ta += sum_a[y][threadIdx.x];
      tb += sum_b[y][threadIdx.x];
    }
    partials[chunk * cols + col] = make_double2(ta, tb);
  }
}

// Second passes: one warp per output (channel or column) adds that output's `count` partial
// items: lane l adds items l, l+32, ... in order, then the fixed shuffle tree, so the total
// is deterministic and the serial chain is count/32 long. Lane 0 holds the result.
template <typename Load>
__device__ __forceinline__ double2 warp_sum_items(int64_t count, const Load& load) {
  double a = 0, b = 0;
  for (int64_t t = threadIdx.x & 31; t < count; t += 32) {
    const double2 p = load(t);
    a += p.x;
    b += p.y;
  }
  return make_double2(warp_sum(a), warp_sum(b));
}
// Outputs this warp handles: first, then += stride (uniform across the warp's lanes).
__device__ __forceinline__ int64_t first_warp_output() {
  return (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
}
__device__ __forceinline__ int64_t warp_output_stride() { return (int64_t(gridDim.x) * blockDim.x) >> 5; }
// Blocks of kElementwiseThreads for one warp per output.
inline int grid_for_warps(int64_t outputs) { return grid_for(outputs * 32); }

template <typename Term>
void launch_column_partials(const Term& term, int64_t rows, int64_t cols, const ColumnPlan& plan, double2* partials) {
  if (plan.chunks == 0) return;
  const dim3 grid(unsigned(plan.tiles), unsigned(plan.chunks)), block(kColTile, kColRows);
  cuda::launch<column_partials_kernel<Term>>(grid, block, 0, current_stream(), term, rows, cols, plan.rows_per_chunk,
                                             partials);
  TANDEM_CUDA_CHECK_LAUNCH("column_partials_kernel");
}

}  // namespace tandem::cuda::norm
