// CUDA reductions over the middle axis of x viewed as [outer, r, inner] (sum, mean, max, min;
// float dtypes, plus int64 for sum/max/min as on the CPU) and argmax/argmin (int64 index of the
// first extreme; all dtypes the CPU takes). This file picks a launch plan from the shape; the
// kernels are in reduce_kernels.cuh and the per-op rules in reduce_policies.cuh.
//
// Plans (all deterministic: a fixed combine tree and, when r is split across blocks, per-block
// partials combined in a fixed order by a second kernel, never atomics):
//   r <= 1          one thread per output.
//   inner == 1      rows: 1, 4 or 32 lanes per row for short rows; a block per row for long
//                   ones; rows split into chunks across blocks when there are too few rows to
//                   fill the GPU (the huge single reduction outer = inner = 1 is this case).
//   inner > 1       columns: a thread per output when there are enough outputs (and rows are
//                   wide or short); otherwise tiles of W columns x R rows per block, with r
//                   split across blocks when outer * tiles is small.
// Sums accumulate in float for float32/half/bfloat16 and in double for float64 (the CPU sums
// in double; tree-ordered float sums differ from it by a few float ulps of sum |x|).
#include <algorithm>
#include <string>
#include <type_traits>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/reduce_kernels.cuh"

namespace tandem {

namespace {

using namespace cuda::reduce_detail;

// Enough blocks of kBlockThreads to fill an H100 twice over (132 SMs x 8 resident blocks x 2).
// A fixed number rather than a device query, so the split (and so the float rounding) of a
// reduction is the same on every GPU.
constexpr int64_t kTargetBlocks = 132 * 8 * 2;
// Threads that fill the GPU when each computes one output on its own.
constexpr int64_t kTargetThreads = kTargetBlocks * kBlockThreads;
// Rows up to this long go to the lane-group kernel; longer ones get a block each.
constexpr int64_t kGroupRowMax = 1024;
// Minimum elements per thread in one chunk of a split reduction (keeps partials few).
constexpr int64_t kMinPerThread = 16;
constexpr int64_t kMaxGrid = int64_t(1) << 24;

int grid_of(int64_t work_items, int64_t per_block) {
  const int64_t blocks = (work_items + per_block - 1) / per_block;
  return int(std::clamp<int64_t>(blocks, 1, kMaxGrid));
}
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Device scratch for per-block partials, returned to the backend's allocator when the launches
// that use it are queued (stream-ordered reuse makes that safe), also on an exception.
class Scratch {
 public:
  explicit Scratch(size_t bytes) : bytes_(bytes), device_(cuda::current_device()) {
    ptr_ = bytes ? cuda_backend().allocate(bytes, device_) : nullptr;
  }
  ~Scratch() {
    if (ptr_) cuda_backend().deallocate(ptr_, bytes_, device_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <typename A> A* as() const { return static_cast<A*>(ptr_); }

 private:
  size_t bytes_;
  int device_;
  void* ptr_ = nullptr;
};

template <class P>
void reduce_rows(const typename P::In* x, int64_t rows, int64_t r, typename P::Out* out, cudaStream_t stream) {
  using Acc = typename P::Acc;
  constexpr int64_t kVec = 16 / int64_t(sizeof(typename P::In));
  if (r <= kGroupRowMax) {
    // Lanes per row: about two vectors per lane at least; a whole warp from 16 vectors up.
    if (r <= 2 * kVec) {
      cuda::launch<reduce_rows_group_kernel<P, 1>>(grid_of(rows, kBlockThreads), kBlockThreads, 0, stream, x, rows, r,
                                                   out);
    } else if (r <= 16 * kVec) {
      cuda::launch<reduce_rows_group_kernel<P, 4>>(grid_of(rows, kBlockThreads / 4), kBlockThreads, 0, stream, x, rows,
                                                   r, out);
    } else {
      cuda::launch<reduce_rows_group_kernel<P, 32>>(grid_of(rows, kBlockThreads / 32), kBlockThreads, 0, stream, x,
                                                    rows, r, out);
    }
    TANDEM_CUDA_CHECK_LAUNCH("reduce rows (lane groups)");
    return;
  }
  // A block per row; split rows into chunks when rows alone cannot fill the GPU. Chunks are a
  // multiple of one full pass of vector loads, so an aligned row stays aligned in every chunk.
  int64_t splits = 1, chunk = r;
  const int64_t pass = kBlockThreads * kVec;
  if (rows < kTargetBlocks / 2) {
    const int64_t wanted = std::min(ceil_div(kTargetBlocks, rows), ceil_div(r, kBlockThreads * kMinPerThread));
    if (wanted > 1) {
      chunk = ceil_div(ceil_div(r, wanted), pass) * pass;
      splits = ceil_div(r, chunk);
    }
  }
  if (splits == 1) {
    cuda::launch<reduce_rows_block_kernel<P>>(grid_of(rows, 1), kBlockThreads, 0, stream, x, rows, r, 1, r, out,
                                              nullptr);
    TANDEM_CUDA_CHECK_LAUNCH("reduce rows (block per row)");
    return;
  }
  Scratch partials(size_t(rows * splits) * sizeof(Acc));
  cuda::launch<reduce_rows_block_kernel<P>>(grid_of(rows * splits, 1), kBlockThreads, 0, stream, x, rows, r, splits,
                                            chunk, out, partials.as<Acc>());
  TANDEM_CUDA_CHECK_LAUNCH("reduce rows (chunks)");
  cuda::launch<combine_row_partials_kernel<P>>(grid_of(rows, 1), kBlockThreads, 0, stream, partials.as<Acc>(), rows,
                                               splits, r, out);
  TANDEM_CUDA_CHECK_LAUNCH("reduce rows (combine chunks)");
}

template <class P>
void reduce_cols(const typename P::In* x, int64_t outer, int64_t r, int64_t inner, typename P::Out* out,
                 cudaStream_t stream) {
  using Acc = typename P::Acc;
  const int64_t outputs = outer * inner;
  if (outputs >= kTargetThreads && (inner >= 32 || r <= 8)) {
    cuda::launch<reduce_cols_direct_kernel<P>>(grid_of(outputs, kBlockThreads), kBlockThreads, 0, stream, x, outer, r,
                                               inner, out);
    TANDEM_CUDA_CHECK_LAUNCH("reduce columns (thread per output)");
    return;
  }
  // Tile: W columns wide (all of inner when it fits), R rows deep (a power of two).
  const int W = int(std::min<int64_t>(inner, kBlockThreads));
  int R = 1;
  while (R * 2 * W <= kBlockThreads) R *= 2;
  const int64_t tiles = ceil_div(inner, W);
  const int64_t base_blocks = outer * tiles;
  int64_t splits = 1, chunk = r;
  if (base_blocks < kTargetBlocks / 2) {
    const int64_t wanted = std::min(ceil_div(kTargetBlocks, base_blocks), ceil_div(r, R * kMinPerThread));
    if (wanted > 1) {
      chunk = ceil_div(r, wanted);
      splits = ceil_div(r, chunk);
    }
  }
  Scratch partials(splits > 1 ? size_t(outer * splits * inner) * sizeof(Acc) : 0);
  cuda::launch<reduce_cols_tile_kernel<P>>(grid_of(base_blocks * splits, 1), kBlockThreads, 0, stream, x, outer, r,
                                           inner, W, R, tiles, splits, chunk, out, partials.as<Acc>());
  TANDEM_CUDA_CHECK_LAUNCH("reduce columns (tiles)");
  if (splits > 1) {
    cuda::launch<combine_col_partials_kernel<P>>(grid_of(outer * ceil_div(inner, 32), 1), kBlockThreads, 0, stream,
                                                 partials.as<Acc>(), outer, splits, inner, r, out);
    TANDEM_CUDA_CHECK_LAUNCH("reduce columns (combine chunks)");
  }
}

// Runs policy P over x [outer, r, inner] into out [outer, inner] (contiguous). r may be 0 only
// for policies whose identity is a meaningful result (sum 0, mean NaN); callers check.
template <class P>
void run_reduction(const TensorView& x, int64_t outer, int64_t r, int64_t inner, const TensorView& out) {
  const int64_t outputs = outer * inner;
  if (outputs == 0) return;
  const auto* xp = static_cast<const typename P::In*>(x.data);
  auto* op = static_cast<typename P::Out*>(out.data);
  cudaStream_t stream = cuda::current_stream();
  if (r <= 1) {
    cuda::launch<reduce_direct_kernel<P>>(grid_of(outputs, kBlockThreads), kBlockThreads, 0, stream, xp, outputs, r,
                                          op);
    TANDEM_CUDA_CHECK_LAUNCH("reduce (r <= 1)");
  } else if (inner == 1) {
    reduce_rows<P>(xp, outer, r, op, stream);
  } else {
    reduce_cols<P>(xp, outer, r, inner, op, stream);
  }
}

template <typename T>
void reduce_typed(ReduceOp op, const TensorView& x, int64_t outer, int64_t r, int64_t inner, const TensorView& out) {
  switch (op) {
    case ReduceOp::Sum: return run_reduction<SumPolicy<T, false>>(x, outer, r, inner, out);
    case ReduceOp::Mean:
      if constexpr (std::is_integral_v<T>) {
        break;  // rejected by the caller
      } else {
        return run_reduction<SumPolicy<T, true>>(x, outer, r, inner, out);
      }
    case ReduceOp::Max: return run_reduction<ExtremumPolicy<T, false>>(x, outer, r, inner, out);
    case ReduceOp::Min: return run_reduction<ExtremumPolicy<T, true>>(x, outer, r, inner, out);
  }
}

}  // namespace

void CudaBackend::reduce(ReduceOp op, const TensorView& x, int64_t outer, int64_t r, int64_t inner,
                         const TensorView& out) {
  const bool is_extremum = op == ReduceOp::Max || op == ReduceOp::Min;
  if (x.dtype == DType::Int64 && op != ReduceOp::Mean) {
    if (r == 0 && is_extremum && outer * inner > 0)
      throw ShapeError("reduce: cannot take the max or min over an empty dimension");
    reduce_typed<int64_t>(op, x, outer, r, inner, out);
    return;
  }
  if (!is_floating(x.dtype))
    throw DTypeError(std::string("reduce on CUDA supports float32, float64, float16 and bfloat16 (and int64 for "
                                 "sum, max and min), got ") + dtype_name(x.dtype) +
                     (op == ReduceOp::Mean ? " for mean" : ""));
  if (r == 0 && is_extremum && outer * inner > 0)
    throw ShapeError("reduce: cannot take the max or min over an empty dimension");
  cuda::dispatch_float(x.dtype, "reduce", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    reduce_typed<T>(op, x, outer, r, inner, out);
  });
}

void CudaBackend::argmax(const TensorView& x, int64_t outer, int64_t r, int64_t inner, const TensorView& out,
                         bool is_min) {
  cuda::dispatch_all(x.dtype, "argmax", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    if (outer * inner == 0) return;
    if (r == 0) throw ShapeError(std::string(is_min ? "argmin" : "argmax") + ": cannot reduce over an empty dimension");
    if (is_min) run_reduction<ArgExtremumPolicy<T, true>>(x, outer, r, inner, out);
    else run_reduction<ArgExtremumPolicy<T, false>>(x, outer, r, inner, out);
  });
}

}  // namespace tandem
