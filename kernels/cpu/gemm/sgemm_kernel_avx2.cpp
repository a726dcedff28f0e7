// AVX2 + FMA float32 micro-kernel, 6 x 16 tile: 12 ymm accumulators (6 rows x 2 vectors of 8),
// 2 ymm for the B row and 1 for the broadcast A value: 15 of the 16 ymm registers. Per k step:
// 2 vector loads, 6 broadcasts, 12 FMAs, enough independent FMAs to cover two FMA pipes of
// latency 4-5. Only this file's functions carry target("avx2,fma"): the rest of the library stays
// on the baseline ISA, and sgemm_kernel() calls this only when CPUID reports AVX2 and FMA.
#include "kernels/cpu/gemm/sgemm_dot.h"
#include "kernels/cpu/gemm/sgemm_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace tandem::cpu {

namespace {

constexpr int kMr = 6, kNr = 16;

#define TANDEM_AVX2 __attribute__((target("avx2,fma"), always_inline)) inline

TANDEM_AVX2 void store_row(float* c, __m256 x0, __m256 x1, __m256 alpha, float beta, const float* bias) {
  x0 = _mm256_mul_ps(x0, alpha);
  x1 = _mm256_mul_ps(x1, alpha);
  if (beta != 0.0f) {
    const __m256 vb = _mm256_set1_ps(beta);
    x0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(c), x0);
    x1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(c + 8), x1);
  }
  if (bias) {
    x0 = _mm256_add_ps(x0, _mm256_loadu_ps(bias));
    x1 = _mm256_add_ps(x1, _mm256_loadu_ps(bias + 8));
  }
  _mm256_storeu_ps(c, x0);
  _mm256_storeu_ps(c + 8, x1);
}

__attribute__((target("avx2,fma"))) void tile_avx2(int64_t kc, const float* a, const float* b, float* c,
                                                   int64_t ldc, float alpha, float beta, const float* bias) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int i = 0; i < kMr; ++i) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
#define TANDEM_ROW(i)                                   \
  {                                                     \
    const __m256 ai = _mm256_broadcast_ss(a + i);       \
    c##i##0 = _mm256_fmadd_ps(ai, b0, c##i##0);         \
    c##i##1 = _mm256_fmadd_ps(ai, b1, c##i##1);         \
  }
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    TANDEM_ROW(0) TANDEM_ROW(1) TANDEM_ROW(2) TANDEM_ROW(3) TANDEM_ROW(4) TANDEM_ROW(5)
    a += kMr;
    b += kNr;
  }
#undef TANDEM_ROW
  const __m256 va = _mm256_set1_ps(alpha);
  store_row(c, c00, c01, va, beta, bias);
  store_row(c + ldc, c10, c11, va, beta, bias);
  store_row(c + 2 * ldc, c20, c21, va, beta, bias);
  store_row(c + 3 * ldc, c30, c31, va, beta, bias);
  store_row(c + 4 * ldc, c40, c41, va, beta, bias);
  store_row(c + 5 * ldc, c50, c51, va, beta, bias);
}

#undef TANDEM_AVX2

}  // namespace

const SgemmKernel kSgemmAvx2{CpuIsa::Avx2, kMr, kNr, tile_avx2, pack_rows_interleaved_avx2, sgemm_dot_avx2};

}  // namespace tandem::cpu
#endif
