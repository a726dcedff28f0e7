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

#include <algorithm>
#include <array>
#include <utility>

namespace tandem::cpu {

namespace {

constexpr int kMr = 14, kNr = 32;

#define TANDEM_AVX512 __attribute__((target("avx512f"), always_inline)) inline

TANDEM_AVX512 void store_vector(float* c, __m512 x, __m512 alpha, float beta, const float* bias) {
  x = _mm512_mul_ps(x, alpha);
  if (beta != 0.0f) x = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_loadu_ps(c), x);
  if (bias) x = _mm512_add_ps(x, _mm512_loadu_ps(bias));
  _mm512_storeu_ps(c, x);
}

// The rows x V-vector accumulators += one k step's outer product (A column of the panel's rows
// times B's row). The unroll pragmas keep the accumulators in registers (sgemm_dot_avx512.cpp says
// what happens without).
template <int R, int V>
TANDEM_AVX512 void k_step(__m512 (&acc)[R][V], const float* a, const float* b) {
  __m512 bv[V];
#pragma GCC unroll 2
  for (int v = 0; v < V; ++v) bv[v] = _mm512_load_ps(b + 16 * v);
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i) {
    const __m512 ai = _mm512_set1_ps(a[i]);
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
  }
}

template <int R, int V>
TANDEM_AVX512 void prefetch_c(const float* c, int64_t ldc) {
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16 * v), _MM_HINT_T0);
}

// k steps before a tile's end at which its C lines are fetched again: the kc-deep panels streaming
// through L1 have evicted the lines fetched at the tile's start by then, and 32 steps (~450 cycles)
// cover a fetch from L2 or L3. Measured (docs/PERFORMANCE.md, 2026-11-28): +1-2.6 points of peak
// at 1024^3 and 2048^3.
constexpr int64_t kRefetchCSteps = 32;

// Rows [0, R) x vectors [0, V) of the 14 x 32 tile: R x V accumulators. The packed panels keep
// their full widths (A 14, B 32) whatever R and V are. R = 14, V = 2 is the full tile; the others
// are the edges of C, which would otherwise compute the whole tile into scratch for a corner of it
// (a 256-row C has a last tile of 4 rows, a 784-column C a last panel of 16 columns).
template <int R, int V>
__attribute__((target("avx512f"))) void tile_rows(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                                                  float alpha, float beta, const float* bias) {
  __m512 acc[R][V];
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
  prefetch_c<R, V>(c, ldc);
  const int64_t refetch_at = std::max<int64_t>(kc - kRefetchCSteps, 0);
#pragma GCC unroll 2
  for (int64_t p = 0; p < refetch_at; ++p, a += kMr, b += kNr) k_step(acc, a, b);
  if (refetch_at > 0) prefetch_c<R, V>(c, ldc);
#pragma GCC unroll 2
  for (int64_t p = refetch_at; p < kc; ++p, a += kMr, b += kNr) k_step(acc, a, b);
  const __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) store_vector(c + i * ldc + 16 * v, acc[i][v], va, beta, bias ? bias + 16 * v : nullptr);
}

template <int V, int... R>
constexpr std::array<SgemmTileFn, kMr + 1> tiles_of(std::integer_sequence<int, R...>) {
  return {nullptr, tile_rows<R + 1, V>...};
}
// kEdgeTiles[V - 1][R]: rows [0, R) x columns [0, 16 V).
constexpr std::array<std::array<SgemmTileFn, kMr + 1>, 2> kEdgeTiles = {
    tiles_of<1>(std::make_integer_sequence<int, kMr>{}), tiles_of<2>(std::make_integer_sequence<int, kMr>{})};

SgemmTileFn edge_tile_avx512(int rows, int cols) {
  return cols == 16 || cols == 32 ? kEdgeTiles[size_t(cols / 16 - 1)][size_t(rows)] : nullptr;
}

#undef TANDEM_AVX512

}  // namespace

const SgemmKernel kSgemmAvx512{CpuIsa::Avx512,          kMr,     kNr, tile_rows<kMr, 2>, pack_rows_interleaved_avx2,
                                  sgemm_dot_avx512, edge_tile_avx512};

}  // namespace tandem::cpu
#endif
