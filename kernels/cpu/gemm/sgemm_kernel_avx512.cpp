// AVX-512 float32 micro-kernel, 14 x 32 tile: 28 zmm accumulators (14 rows x 2 vectors of 16),
// 2 zmm for the B row and 1 for the broadcast A value: 31 of the 32 zmm registers. Per k step:
// 2 vector loads, 14 broadcasts, 28 FMAs. Why 14 x 32 rather than 6 x 64 or 28 x 16: the most
// accumulators the register file holds with a B row of two vectors, so loads per FMA are low
// (16 / 28), the kernel runs at the FMA peak from L1 (measured: 220 GFLOP/s per core here), and N
// rounds up to 32, not 64, which matters for N = 784.
// Only this file's functions carry the AVX-512 target attribute; sgemm_kernel() calls this only
// when CPUID (and the OS's saved register state) reports AVX-512 F.
#include "kernels/cpu/gemm/sgemm_dot.h"
#include "kernels/cpu/gemm/sgemm_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace tandem::cpu {

namespace {

constexpr int kMr = 14, kNr = 32;

#define TANDEM_AVX512 __attribute__((target("avx512f"), always_inline)) inline

TANDEM_AVX512 void store_row(float* c, __m512 x0, __m512 x1, __m512 alpha, float beta, const float* bias) {
  x0 = _mm512_mul_ps(x0, alpha);
  x1 = _mm512_mul_ps(x1, alpha);
  if (beta != 0.0f) {
    const __m512 vb = _mm512_set1_ps(beta);
    x0 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(c), x0);
    x1 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(c + 16), x1);
  }
  if (bias) {
    x0 = _mm512_add_ps(x0, _mm512_loadu_ps(bias));
    x1 = _mm512_add_ps(x1, _mm512_loadu_ps(bias + 16));
  }
  _mm512_storeu_ps(c, x0);
  _mm512_storeu_ps(c + 16, x1);
}

__attribute__((target("avx512f"))) void tile_avx512(int64_t kc, const float* a, const float* b, float* c,
                                                    int64_t ldc, float alpha, float beta, const float* bias) {
  const __m512 z = _mm512_setzero_ps();
  __m512 c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z, c41 = z;
  __m512 c50 = z, c51 = z, c60 = z, c61 = z, c70 = z, c71 = z, c80 = z, c81 = z, c90 = z, c91 = z;
  __m512 c100 = z, c101 = z, c110 = z, c111 = z, c120 = z, c121 = z, c130 = z, c131 = z;
  for (int i = 0; i < kMr; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16), _MM_HINT_T0);
  }
#define TANDEM_ROW(i)                                   \
  {                                                     \
    const __m512 ai = _mm512_set1_ps(a[i]);             \
    c##i##0 = _mm512_fmadd_ps(ai, b0, c##i##0);         \
    c##i##1 = _mm512_fmadd_ps(ai, b1, c##i##1);         \
  }
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
    TANDEM_ROW(0) TANDEM_ROW(1) TANDEM_ROW(2) TANDEM_ROW(3) TANDEM_ROW(4) TANDEM_ROW(5) TANDEM_ROW(6)
    TANDEM_ROW(7) TANDEM_ROW(8) TANDEM_ROW(9) TANDEM_ROW(10) TANDEM_ROW(11) TANDEM_ROW(12) TANDEM_ROW(13)
    a += kMr;
    b += kNr;
  }
#undef TANDEM_ROW
  const __m512 va = _mm512_set1_ps(alpha);
  store_row(c, c00, c01, va, beta, bias);
  store_row(c + ldc, c10, c11, va, beta, bias);
  store_row(c + 2 * ldc, c20, c21, va, beta, bias);
  store_row(c + 3 * ldc, c30, c31, va, beta, bias);
  store_row(c + 4 * ldc, c40, c41, va, beta, bias);
  store_row(c + 5 * ldc, c50, c51, va, beta, bias);
  store_row(c + 6 * ldc, c60, c61, va, beta, bias);
  store_row(c + 7 * ldc, c70, c71, va, beta, bias);
  store_row(c + 8 * ldc, c80, c81, va, beta, bias);
  store_row(c + 9 * ldc, c90, c91, va, beta, bias);
  store_row(c + 10 * ldc, c100, c101, va, beta, bias);
  store_row(c + 11 * ldc, c110, c111, va, beta, bias);
  store_row(c + 12 * ldc, c120, c121, va, beta, bias);
  store_row(c + 13 * ldc, c130, c131, va, beta, bias);
}

#undef TANDEM_AVX512

}  // namespace

const SgemmKernel kSgemmAvx512{CpuIsa::Avx512, kMr, kNr, tile_avx512, pack_rows_interleaved_avx2,
                                  sgemm_dot_avx512};

}  // namespace tandem::cpu
#endif
