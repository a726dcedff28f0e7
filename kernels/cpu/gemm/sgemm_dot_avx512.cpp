// The AVX-512 twin of sgemm_dot_avx2.cpp: the same narrow-C product C = alpha * A B^T + beta * C
// (+ bias), A [m,k] and B [n,k] both contiguous along k, n <= kSgemmDotMaxN. Two rows of A per
// pass share every load of B (loads per FMA (2 + C) / 2C instead of (1 + C) / C), 16 lanes a
// load, the k tail is a masked load instead of a scalar loop, and up to 14 columns are one block
// (2 x 14 accumulators, 2 rows of A and a row of B: 31 of the 32 zmm registers), so the 10-class
// head (256 x 10 x 1024) reads each row of A once.
// Every loop over the accumulators carries an unroll pragma: without them GCC 12 kept the
// accumulator array in memory as well as in registers and stored it on every k step, which held
// this path at a third of the FMA peak (bench/bench_gemm's 256 x 10 x 1024 row).
// Sums are in another order than the AVX2 path's: results agree to float32 rounding, not bits.
#include "kernels/cpu/gemm/sgemm_dot.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <array>
#include <utility>

namespace tandem::cpu {

namespace {

// The sum of v's 16 lanes. Masked extracts: GCC 12's unmasked ones (and _mm512_reduce_add_ps,
// _mm512_castps512_ps256, built on them) pass an undefined vector that -Wuninitialized reports.
__attribute__((target("avx512f"), always_inline)) inline float hsum(__m512 v) {
  const __m512d d = _mm512_castps_pd(v);
  const __m256 s8 = _mm256_add_ps(_mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, d, 0)),
                                  _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, d, 1)));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// Depth [p, p + 16) (the lanes of `mask`) of the R x C dot products into acc.
template <int R, int C>
__attribute__((target("avx512f"), always_inline)) inline void dot_step(const float* a, int64_t lda, const float* b,
                                                                       int64_t ldb, int64_t p, __mmask16 mask,
                                                                       __m512 (&acc)[R][C]) {
  __m512 x[R];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) x[r] = _mm512_maskz_loadu_ps(mask, a + r * lda + p);
#pragma GCC unroll 14
  for (int jj = 0; jj < C; ++jj) {
    const __m512 bv = _mm512_maskz_loadu_ps(mask, b + jj * ldb + p);
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) acc[r][jj] = _mm512_fmadd_ps(x[r], bv, acc[r][jj]);
  }
}

// Rows [i, i + R) x columns [j0, j0 + C): R x C dot products, R x C accumulators.
template <int R, int C>
__attribute__((target("avx512f"))) void dot_block(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t k,
                                                  float alpha, float beta, float* c, int64_t ldc, const float* bias) {
  __m512 acc[R][C];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 14
    for (int jj = 0; jj < C; ++jj) acc[r][jj] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; p += 16) {
    const __mmask16 mask = k - p >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (k - p)) - 1);
    dot_step<R, C>(a, lda, b, ldb, p, mask, acc);
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 14
    for (int jj = 0; jj < C; ++jj) store_dot(hsum(acc[r][jj]), alpha, beta, c + r * ldc + jj, bias ? bias + jj : nullptr);
}

constexpr int kMaxBlockCols = 14;

template <int R, int... C>
constexpr std::array<SgemmDotBlockFn, sizeof...(C) + 1> blocks_of(std::integer_sequence<int, C...>) {
  return {nullptr, dot_block<R, C + 1>...};
}
template <int R>
constexpr auto kBlocks = blocks_of<R>(std::make_integer_sequence<int, kMaxBlockCols>{});

}  // namespace

void sgemm_dot_avx512(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                      int64_t ldb, float beta, float* c, int64_t ldc, const float* bias) {
  sgemm_dot_by_blocks(kBlocks<2>.data(), kBlocks<1>.data(), kMaxBlockCols, m, n, k, alpha, a, lda, b, ldb, beta, c,
                      ldc, bias);
}

}  // namespace tandem::cpu
#endif
