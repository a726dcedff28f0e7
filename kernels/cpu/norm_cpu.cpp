// Batch norm over x viewed as [outer, C, inner] (statistics per channel over outer*inner
// elements) and layer norm over rows of x viewed as [rows, cols]. Statistics accumulate in
// double; variance is the biased one (divide by the count), as both PyTorch ops normalize.
// Float32 layer-norm rows run in AVX-512 or AVX2 registers (double lanes) where active_isa()
// says so (kernels/cpu/vector_math.h); the parameter gradients' column sums stay scalar.
// Backward (xhat = (x - mean) * invstd, M elements per statistic, g = gy * gamma):
//   gx = invstd / M * (M * g - sum(g) - xhat * sum(g * xhat)),
//   ggamma = sum(gy * xhat), gbeta = sum(gy).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm/cpu_isa.h"
#include "kernels/cpu/vector_math.h"

namespace tandem {

namespace {

// Layer norm runs on the pool from this many elements: a row of GPT's widths is a few hundred
// floats, so gpt-nano's [768, 128] (98 K elements, below the elementwise kernels' 256 K) is
// tens of microseconds of serial work per call, 27 calls a step, against a job handed to a
// polling worker in about a microsecond.
constexpr int64_t kLayerNormThreadedWork = int64_t(1) << 15;
// Columns per task of the parameter gradients' column sums.
constexpr int64_t kLayerNormColumnBlock = 16;

}  // namespace

void CpuBackend::batch_norm_train(const TensorView& x, int64_t outer, int64_t c, int64_t inner,
                                  const TensorView* gamma, const TensorView* beta, double eps, const TensorView& y,
                                  const TensorView& save_mean, const TensorView& save_invstd) {
  cpu::dispatch_float(x.dtype, "batch_norm", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const T* xp = x.ptr<T>();
    T* mp = save_mean.ptr<T>();
    T* ip = save_invstd.ptr<T>();
    const double M = double(outer * inner);
    cpu::parallel_loop(c, outer * c * inner >= cpu::kParallelGrain, [&](int64_t ch) {
      double s = 0;
      for (int64_t o = 0; o < outer; ++o) {
        const T* row = xp + (o * c + ch) * inner;
        for (int64_t i = 0; i < inner; ++i) s += row[i];
      }
      const double mean = s / M;
      double v = 0;
      for (int64_t o = 0; o < outer; ++o) {
        const T* row = xp + (o * c + ch) * inner;
        for (int64_t i = 0; i < inner; ++i) v += (row[i] - mean) * (row[i] - mean);
      }
      mp[ch] = T(mean);
      ip[ch] = T(1.0 / std::sqrt(v / M + eps));
    });
  });
  batch_norm_apply(x, outer, c, inner, save_mean, save_invstd, gamma, beta, y);
}

void CpuBackend::batch_norm_apply(const TensorView& x, int64_t outer, int64_t c, int64_t inner,
                                  const TensorView& mean, const TensorView& invstd, const TensorView* gamma,
                                  const TensorView* beta, const TensorView& y) {
  cpu::dispatch_float(x.dtype, "batch_norm", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const T* xp = x.ptr<T>();
    T* yp = y.ptr<T>();
    cpu::parallel_loop(outer * c, outer * c * inner >= cpu::kParallelGrain, [&](int64_t oc) {
      const int64_t ch = oc % c;
      const T scale = invstd.ptr<T>()[ch] * (gamma ? gamma->ptr<T>()[ch] : T(1));
      const T shift = (beta ? beta->ptr<T>()[ch] : T(0)) - mean.ptr<T>()[ch] * scale;
      const T* in = xp + oc * inner;
      T* out = yp + oc * inner;
      for (int64_t i = 0; i < inner; ++i) out[i] = in[i] * scale + shift;
    });
  });
}

void CpuBackend::batch_norm_backward(const TensorView& x, const TensorView& gy, int64_t outer, int64_t c,
                                     int64_t inner, const TensorView& save_mean, const TensorView& save_invstd,
                                     const TensorView* gamma, const TensorView& gx, const TensorView* ggamma,
                                     const TensorView* gbeta) {
  cpu::dispatch_float(x.dtype, "batch_norm_backward", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const T* xp = x.ptr<T>();
    const T* gp = gy.ptr<T>();
    T* gxp = gx.ptr<T>();
    const double M = double(outer * inner);
    cpu::parallel_loop(c, outer * c * inner >= cpu::kParallelGrain, [&](int64_t ch) {
      const double mean = save_mean.ptr<T>()[ch], inv = save_invstd.ptr<T>()[ch];
      double sum_g = 0, sum_gx = 0;
      for (int64_t o = 0; o < outer; ++o) {
        const int64_t base = (o * c + ch) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          sum_g += gp[base + i];
          sum_gx += gp[base + i] * (xp[base + i] - mean) * inv;
        }
      }
      if (ggamma) ggamma->ptr<T>()[ch] = T(sum_gx);
      if (gbeta) gbeta->ptr<T>()[ch] = T(sum_g);
      const double gam = gamma ? double(gamma->ptr<T>()[ch]) : 1.0;
      const double k = gam * inv / M;
      for (int64_t o = 0; o < outer; ++o) {
        const int64_t base = (o * c + ch) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          const double xhat = (xp[base + i] - mean) * inv;
          gxp[base + i] = T(k * (M * gp[base + i] - sum_g - xhat * sum_gx));
        }
      }
    });
  });
}

void CpuBackend::layer_norm(const TensorView& x, int64_t rows, int64_t cols, const TensorView* gamma,
                            const TensorView* beta, double eps, const TensorView& y, const TensorView& save_mean,
                            const TensorView& save_invstd) {
  cpu::dispatch_float(x.dtype, "layer_norm", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const T* xp = x.ptr<T>();
    T* yp = y.ptr<T>();
    const T* gam = gamma ? gamma->ptr<T>() : nullptr;
    const T* bet = beta ? beta->ptr<T>() : nullptr;
    const cpu::CpuIsa isa = cpu::active_isa();
    cpu::parallel_loop(rows, rows * cols >= kLayerNormThreadedWork, [&](int64_t r) {
      const T* in = xp + r * cols;
      if constexpr (std::is_same_v<T, float>) {
        if (cols > 0 && isa != cpu::CpuIsa::Portable) {  // the row in registers (vector_math.h)
          const bool wide = isa == cpu::CpuIsa::Avx512;
          double mean = 0, inv = 0;
          (wide ? cpu::layer_norm_stats_avx512 : cpu::layer_norm_stats_avx2)(in, cols, eps, &mean, &inv);
          save_mean.ptr<T>()[r] = T(mean);
          save_invstd.ptr<T>()[r] = T(inv);
          (wide ? cpu::layer_norm_apply_avx512 : cpu::layer_norm_apply_avx2)(in, yp + r * cols, cols, mean, inv, gam,
                                                                              bet);
          return;
        }
      }
      double s = 0, v = 0;
      for (int64_t j = 0; j < cols; ++j) s += in[j];
      const double mean = s / double(cols);
      for (int64_t j = 0; j < cols; ++j) v += (in[j] - mean) * (in[j] - mean);
      const double inv = 1.0 / std::sqrt(v / double(cols) + eps);
      save_mean.ptr<T>()[r] = T(mean);
      save_invstd.ptr<T>()[r] = T(inv);
      T* out = yp + r * cols;
      for (int64_t j = 0; j < cols; ++j) {
        T h = T((in[j] - mean) * inv);
        out[j] = h * (gam ? gam[j] : T(1)) + (bet ? bet[j] : T(0));
      }
    });
  });
}

void CpuBackend::layer_norm_backward(const TensorView& x, const TensorView& gy, int64_t rows, int64_t cols,
                                     const TensorView& save_mean, const TensorView& save_invstd,
                                     const TensorView* gamma, const TensorView& gx, const TensorView* ggamma,
                                     const TensorView* gbeta) {
  cpu::dispatch_float(x.dtype, "layer_norm_backward", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const T* xp = x.ptr<T>();
    const T* gp = gy.ptr<T>();
    T* gxp = gx.ptr<T>();
    const T* gam = gamma ? gamma->ptr<T>() : nullptr;
    const cpu::CpuIsa isa = cpu::active_isa();
    cpu::parallel_loop(rows, rows * cols >= kLayerNormThreadedWork, [&](int64_t r) {
      const double mean = save_mean.ptr<T>()[r], inv = save_invstd.ptr<T>()[r];
      const T* in = xp + r * cols;
      const T* g = gp + r * cols;
      if constexpr (std::is_same_v<T, float>) {
        if (cols > 0 && isa != cpu::CpuIsa::Portable) {
          (isa == cpu::CpuIsa::Avx512 ? cpu::layer_norm_backward_row_avx512 : cpu::layer_norm_backward_row_avx2)(
              in, g, gam, gxp + r * cols, cols, mean, inv);
          return;
        }
      }
      double sum_g = 0, sum_gx = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const double gj = g[j] * (gam ? gam[j] : T(1));
        sum_g += gj;
        sum_gx += gj * (in[j] - mean) * inv;
      }
      const double M = double(cols);
      for (int64_t j = 0; j < cols; ++j) {
        const double gj = g[j] * (gam ? gam[j] : T(1));
        gxp[r * cols + j] = T(inv / M * (M * gj - sum_g - (in[j] - mean) * inv * sum_gx));
      }
    });
    // Parameter gradients: column sums over rows in row order, the columns split over the
    // threads (the same sums whatever the thread count).
    if (ggamma || gbeta) {
      const int64_t blocks = (cols + kLayerNormColumnBlock - 1) / kLayerNormColumnBlock;
      cpu::parallel_loop(blocks, rows * cols >= kLayerNormThreadedWork, [&](int64_t b) {
        const int64_t j0 = b * kLayerNormColumnBlock, j1 = std::min(cols, j0 + kLayerNormColumnBlock);
        double sg[kLayerNormColumnBlock] = {}, sb[kLayerNormColumnBlock] = {};
        for (int64_t r = 0; r < rows; ++r) {
          const double mean = save_mean.ptr<T>()[r], inv = save_invstd.ptr<T>()[r];
          for (int64_t j = j0; j < j1; ++j) {
            const double g = gp[r * cols + j];
            sg[j - j0] += g * (xp[r * cols + j] - mean) * inv;
            sb[j - j0] += g;
          }
        }
        for (int64_t j = j0; j < j1; ++j) {
          if (ggamma) ggamma->ptr<T>()[j] = T(sg[j - j0]);
          if (gbeta) gbeta->ptr<T>()[j] = T(sb[j - j0]);
        }
      });
    }
  });
}

}  // namespace tandem
