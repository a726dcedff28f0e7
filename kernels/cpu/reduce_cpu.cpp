// Reductions over the middle axis of x viewed as [outer, r, inner] and argmax/argmin. Sums
// accumulate in double (float32 inputs too) in a fixed order,
// so results are deterministic and independent of the thread count.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace tandem {

namespace {

template <typename T>
void reduce_typed(ReduceOp op, const T* x, int64_t outer, int64_t r, int64_t inner, T* out) {
  const bool parallel = outer * r * inner >= cpu::kParallelGrain;
  if (inner == 1) {
    cpu::parallel_loop(outer, parallel && outer > 1, [&](int64_t o) {
      const T* row = x + o * r;
      if (op == ReduceOp::Sum || op == ReduceOp::Mean) {
        double acc = 0;
        for (int64_t i = 0; i < r; ++i) acc += row[i];
        out[o] = T(op == ReduceOp::Mean ? acc / double(r) : acc);
      } else {
        T best = row[0];
        for (int64_t i = 1; i < r; ++i) {
          T v = row[i];
          if (v != v) { best = v; break; }  // NaN propagates, as in PyTorch
          best = op == ReduceOp::Max ? std::max(best, v) : std::min(best, v);
        }
        out[o] = best;
      }
    });
    return;
  }
  // inner > 1: accumulate whole rows of length `inner` (vectorizes over inner).
  cpu::parallel_loop(outer * ((inner + 255) / 256), parallel && outer * inner > 1, [&](int64_t oj) {
    const int64_t blocks = (inner + 255) / 256;
    const int64_t o = oj / blocks, j0 = (oj % blocks) * 256, j1 = std::min(inner, j0 + 256);
    const T* base = x + o * r * inner;
    T* dst = out + o * inner;
    if (op == ReduceOp::Sum || op == ReduceOp::Mean) {
      double acc[256] = {0};
      for (int64_t i = 0; i < r; ++i) {
        const T* row = base + i * inner;
        for (int64_t j = j0; j < j1; ++j) acc[j - j0] += row[j];
      }
      for (int64_t j = j0; j < j1; ++j) dst[j] = T(op == ReduceOp::Mean ? acc[j - j0] / double(r) : acc[j - j0]);
    } else {
      for (int64_t j = j0; j < j1; ++j) dst[j] = base[j];
      for (int64_t i = 1; i < r; ++i) {
        const T* row = base + i * inner;
        for (int64_t j = j0; j < j1; ++j) {
          T v = row[j], b = dst[j];
          dst[j] = (b != b) ? b : (v != v) ? v : (op == ReduceOp::Max ? std::max(b, v) : std::min(b, v));
        }
      }
    }
  });
}

}  // namespace

void CpuBackend::reduce(ReduceOp op, const TensorView& x, int64_t outer, int64_t r, int64_t inner,
                        const TensorView& out) {
  if (x.dtype == DType::Int64 && (op == ReduceOp::Sum || op == ReduceOp::Max || op == ReduceOp::Min)) {
    const int64_t* xp = x.ptr<int64_t>();
    int64_t* o = out.ptr<int64_t>();
    for (int64_t a = 0; a < outer; ++a)
      for (int64_t j = 0; j < inner; ++j) {
        int64_t acc = op == ReduceOp::Sum ? 0 : xp[a * r * inner + j];
        for (int64_t i = 0; i < r; ++i) {
          int64_t v = xp[(a * r + i) * inner + j];
          acc = op == ReduceOp::Sum ? acc + v : op == ReduceOp::Max ? std::max(acc, v) : std::min(acc, v);
        }
        o[a * inner + j] = acc;
      }
    return;
  }
  cpu::dispatch_float(x.dtype, "reduce", [&](auto tag_) { using T = TANDEM_TYPE(tag_); reduce_typed<T>(op, x.ptr<T>(), outer, r, inner, out.ptr<T>()); });
}

void CpuBackend::argmax(const TensorView& x, int64_t outer, int64_t r, int64_t inner, const TensorView& out,
                        bool is_min) {
  cpu::dispatch_all(x.dtype, "argmax", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const T* xp = x.ptr<T>();
    int64_t* o = out.ptr<int64_t>();
    cpu::parallel_loop(outer, outer * r * inner >= cpu::kParallelGrain, [&](int64_t a) {
      for (int64_t j = 0; j < inner; ++j) {
        int64_t best = 0;
        T bv = xp[a * r * inner + j];
        for (int64_t i = 1; i < r && bv == bv; ++i) {
          T v = xp[(a * r + i) * inner + j];
          if (v != v || (is_min ? v < bv : v > bv)) { bv = v; best = i; }  // first NaN wins
        }
        o[a * inner + j] = best;
      }
    });
  });
}

}  // namespace tandem
