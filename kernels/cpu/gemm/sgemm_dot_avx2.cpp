// C = alpha * A B^T + beta * C (+ bias) for a narrow C (n <= kSgemmDotMaxN columns) with A
// [m,k] and B [n,k] both running along k: each C element is a dot product of two contiguous
// rows. The linear layer into 10 classes is this shape (256 x 10 x 1024): there, packing A costs
// more than the whole product and a 14 x 32 tile would compute 32 columns for 10, so this path
// skips packing and runs up to 2 x 6 dot products at a time (two rows of A share each load of B;
// blocks of exactly the columns there are, never padding).
#include "kernels/cpu/gemm/sgemm_dot.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <array>
#include <utility>

namespace tandem::cpu {

namespace {

__attribute__((target("avx2,fma"), always_inline)) inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// Rows [i, i + R) x columns [j0, j0 + C): R x C dot products sharing each load (R x C
// accumulators). The unroll pragmas keep the accumulators in registers: without them GCC 12 also
// stored them to memory on every k step (see sgemm_dot_avx512.cpp).
template <int R, int C>
__attribute__((target("avx2,fma"))) void dot_block(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t k,
                                                   float alpha, float beta, float* c, int64_t ldc, const float* bias) {
  __m256 acc[R][C];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 6
    for (int jj = 0; jj < C; ++jj) acc[r][jj] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    __m256 x[R];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) x[r] = _mm256_loadu_ps(a + r * lda + p);
#pragma GCC unroll 6
    for (int jj = 0; jj < C; ++jj) {
      const __m256 bv = _mm256_loadu_ps(b + jj * ldb + p);
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) acc[r][jj] = _mm256_fmadd_ps(x[r], bv, acc[r][jj]);
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 6
    for (int jj = 0; jj < C; ++jj) {
      float dot = hsum(acc[r][jj]);
      for (int64_t q = p; q < k; ++q) dot += a[r * lda + q] * b[jj * ldb + q];
      store_dot(dot, alpha, beta, c + r * ldc + jj, bias ? bias + jj : nullptr);
    }
}

// 2 x 6 accumulators, 2 rows of A and a row of B: 15 of the 16 ymm registers (10 columns: 5 + 5).
constexpr int kMaxBlockCols = 6;

template <int R, int... C>
constexpr std::array<SgemmDotBlockFn, sizeof...(C) + 1> blocks_of(std::integer_sequence<int, C...>) {
  return {nullptr, dot_block<R, C + 1>...};
}
template <int R>
constexpr auto kBlocks = blocks_of<R>(std::make_integer_sequence<int, kMaxBlockCols>{});

}  // namespace

void sgemm_dot_avx2(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                    int64_t ldb, float beta, float* c, int64_t ldc, const float* bias) {
  sgemm_dot_by_blocks(kBlocks<2>.data(), kBlocks<1>.data(), kMaxBlockCols, m, n, k, alpha, a, lda, b, ldb, beta, c,
                      ldc, bias);
}

}  // namespace tandem::cpu
#endif
