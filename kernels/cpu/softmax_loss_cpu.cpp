// The softmax family on the CPU, rows of length cols: softmax / log_softmax and their backward
// (each row's max subtracted first; sums in double; float32 rows' max, exp and sum in AVX-512
// or AVX2 registers where active_isa() says so, kernels/cpu/vector_math.h), and the per-row
// negative log-likelihood pieces that nll_loss and cross_entropy are built from
// (tensor/ops/softmax_loss.cpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm/cpu_isa.h"
#include "kernels/cpu/vector_math.h"

namespace tandem {

namespace {

// One softmax row in registers (vector_math.h) where the ISA has them: the max, then
// exp(x - max) summed in double, then the scaling.
bool softmax_row_vector(cpu::CpuIsa isa, const float* in, float* o, int64_t cols, bool log) {
  if (isa == cpu::CpuIsa::Portable) return false;
  const bool wide = isa == cpu::CpuIsa::Avx512;
  float m = wide ? cpu::row_max_avx512(in, cols) : cpu::row_max_avx2(in, cols);
  if (std::isinf(m) && m < 0) m = 0;  // an all -inf row stays finite where it can
  const double s = wide ? cpu::exp_shifted_sum_avx512(in, o, cols, m) : cpu::exp_shifted_sum_avx2(in, o, cols, m);
  if (log) {
    const float lse = m + float(std::log(s));
    for (int64_t j = 0; j < cols; ++j) o[j] = in[j] - lse;
  } else {
    const float inv = float(1.0 / s);
    for (int64_t j = 0; j < cols; ++j) o[j] *= inv;
  }
  return true;
}

}  // namespace

void CpuBackend::softmax(const TensorView& x, int64_t rows, int64_t cols, const TensorView& y, bool log) {
  cpu::dispatch_float(x.dtype, "softmax", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const T* xp = x.ptr<T>();
    T* yp = y.ptr<T>();
    const cpu::CpuIsa isa = cpu::active_isa();
    cpu::parallel_loop(rows, rows * cols >= cpu::kParallelGrain, [&](int64_t i) {
      const T* in = xp + i * cols;
      T* o = yp + i * cols;
      if constexpr (std::is_same_v<T, float>) {
        if (cols > 0 && softmax_row_vector(isa, in, o, cols, log)) return;
      }
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < cols; ++j) m = std::max(m, in[j]);
      if (std::isinf(m) && m < 0) m = 0;  // an all -inf row stays finite where it can
      double s = 0;
      for (int64_t j = 0; j < cols; ++j) {
        T e = std::exp(in[j] - m);
        if (!log) o[j] = e;
        s += e;
      }
      if (log) {
        T lse = m + T(std::log(s));
        for (int64_t j = 0; j < cols; ++j) o[j] = in[j] - lse;
      } else {
        T inv = T(1.0 / s);
        for (int64_t j = 0; j < cols; ++j) o[j] *= inv;
      }
    });
  });
}

void CpuBackend::softmax_backward(const TensorView& y, const TensorView& gy, int64_t rows, int64_t cols,
                                  const TensorView& gx, bool log) {
  cpu::dispatch_float(y.dtype, "softmax_backward", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const T* yp = y.ptr<T>();
    const T* gp = gy.ptr<T>();
    T* o = gx.ptr<T>();
    const cpu::CpuIsa isa = cpu::active_isa();
    cpu::parallel_loop(rows, rows * cols >= cpu::kParallelGrain, [&](int64_t i) {
      const T* yr = yp + i * cols;
      const T* gr = gp + i * cols;
      T* orow = o + i * cols;
      double s = 0;
      if (log) {  // gx = gy - softmax * sum(gy)
        for (int64_t j = 0; j < cols; ++j) s += gr[j];
        if constexpr (std::is_same_v<T, float>) {
          if (isa == cpu::CpuIsa::Avx512) return cpu::log_softmax_backward_avx512(yr, gr, orow, cols, float(s));
          if (isa == cpu::CpuIsa::Avx2) return cpu::log_softmax_backward_avx2(yr, gr, orow, cols, float(s));
        }
        for (int64_t j = 0; j < cols; ++j) orow[j] = gr[j] - std::exp(yr[j]) * T(s);
      } else {    // gx = y * (gy - sum(gy * y))
        for (int64_t j = 0; j < cols; ++j) s += double(gr[j]) * yr[j];
        for (int64_t j = 0; j < cols; ++j) orow[j] = yr[j] * (gr[j] - T(s));
      }
    });
  });
}

void CpuBackend::nll_rows(const TensorView& logp, const TensorView& target, int64_t ignore_index,
                          double label_smoothing, const TensorView& loss, const TensorView& valid) {
  cpu::dispatch_float(logp.dtype, "nll_loss", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const int64_t rows = logp.shape[0], classes = logp.shape[1];
    const T* lp = logp.ptr<T>();
    const int64_t* t = target.ptr<int64_t>();
    T* l = loss.ptr<T>();
    T* v = valid.ptr<T>();
    for (int64_t i = 0; i < rows; ++i) {
      if (t[i] == ignore_index) {
        l[i] = T(0);
        v[i] = T(0);
        continue;
      }
      double value = -(1.0 - label_smoothing) * lp[i * classes + t[i]];
      if (label_smoothing > 0) {
        double s = 0;
        for (int64_t c = 0; c < classes; ++c) s += lp[i * classes + c];
        value -= label_smoothing / double(classes) * s;
      }
      l[i] = T(value);
      v[i] = T(1);
    }
  });
}

void CpuBackend::nll_rows_backward(const TensorView& gloss, const TensorView& target, int64_t ignore_index,
                                   double label_smoothing, const TensorView& glogp) {
  cpu::dispatch_float(gloss.dtype, "nll_loss_backward", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const int64_t rows = glogp.shape[0], classes = glogp.shape[1];
    const T* g = gloss.ptr<T>();
    const int64_t* t = target.ptr<int64_t>();
    T* o = glogp.ptr<T>();
    for (int64_t i = 0; i < rows; ++i) {
      T* row = o + i * classes;
      if (t[i] == ignore_index) {
        std::fill(row, row + classes, T(0));
        continue;
      }
      const T smooth = T(-g[i] * label_smoothing / double(classes));
      std::fill(row, row + classes, smooth);
      row[t[i]] += T(-g[i] * (1.0 - label_smoothing));
    }
  });
}

}  // namespace tandem
