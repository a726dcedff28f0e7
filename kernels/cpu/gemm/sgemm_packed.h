// Packed float32 GEMM in the GotoBLAS / BLIS design: op(B) is packed into kc x nc blocks (L3),
// op(A) into mc x kc blocks (L2), both cut into MR- and NR-wide panels that one register-tile
// micro-kernel (sgemm_kernels.h) multiplies; k is cut into blocks of equal depth near kc.
// Transposes are absorbed by the packing; alpha, beta and a per-column bias are applied when a
// tile is stored; a partial tile at C's edge runs the ISA's edge micro-kernel for that corner
// where it has one, else the full tile into scratch and a copy of the corner. The pool's tasks
// split C into independent rectangles (a grid over M and N), each packed and computed by one
// thread with no synchronization; products below kSgemmThreadedWork multiply-adds stay on one
// thread.
#pragma once
#include <cstdint>

#include "kernels/cpu/gemm/sgemm_kernels.h"

namespace tandem::cpu {

// Work run on each finished block of C (every depth block summed; alpha, beta and the bias
// applied) by the thread that computed it, while the block is still in that core's L2 (an
// mc x nc cache block; rows of C on the narrow-C path): the rows x cols block of C whose first
// element C[i0, j0] is at c (row stride ldc). The blocks cover C once. A linear layer's fused
// activation is one (linear_cpu.cpp). Per block rather than per register tile: one call per
// row of the block instead of one per 32-float tile row; gpt-nano's step measured the same either
// way (20.1-20.5 against 20.2-20.8 ms, 3 interleaved pairs, 2026-11-28).
struct SgemmEpilogue {
  void (*run)(const void* context, float* c, int64_t ldc, int64_t i0, int64_t j0, int64_t rows, int64_t cols);
  const void* context;
};

// C[m,n] (row stride ldc) = alpha * op(A) op(B) + beta * C, plus bias[j] added to every row j
// when bias is not null, then the epilogue where one is given. A is [m,k] with row stride lda
// ([k,m] when trans_a), B is [k,n] with row stride ldb ([n,k] when trans_b). beta == 0: C is only
// written. Uses up to `max_threads` threads of the pool (kernels/cpu/thread_pool.h; one inside a
// pool task) and the micro-kernel of active_isa().
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias, int max_threads,
           const SgemmEpilogue* epilogue = nullptr);

// The cache blocking sgemm uses with a micro-kernel, from sysconf's cache sizes (defaults
// 512 KiB L2 / 8 MiB L3 when it does not say):
// - kc, the depth of a packed panel (sgemm cuts k into blocks of equal depth near it, up to
//   1.25 kc): one tile's A and B micro-panels, kc x (MR + NR) floats, fill an eighth of L2
//   (64..768). A tile loads and stores its C lines once per depth block, so deeper blocks spend
//   less on C; the micro-kernel runs at 96-98% of peak with its panels in L2, not only in L1.
// - mc, so that the mc x kc A block fills half of L2;
// - nc, so that the kc x nc B block fills half of L3 (at most 4096 columns).
// On this project's AMD EPYC (48 KiB L1D, 1 MiB L2): AVX-512 kc 712, mc 182; AVX2 kc 768, mc 168.
// Against the earlier kc 384 / mc 168 (the B micro-panel the size of L1), AVX-512 measured 2-8
// points of peak faster at 1024^3..4096^3 and the same or faster at the step shapes; AVX2 the
// same (docs/PERFORMANCE.md, 2026-11-28 11:17-11:45 UTC).
struct SgemmBlocking {
  int64_t kc, mc, nc;
};
SgemmBlocking sgemm_blocking(const SgemmKernel& kernel);

// From this many multiply-adds (m*n*k) sgemm splits one product over the threads (the packed grid
// and the narrow-C dot path alike): 2 M, about 10 us of work per thread at 2 threads, against a
// job handed to workers that are still polling (thread_pool.cpp) in about a microsecond. It was
// 16 M for the packed path, which kept gpt-nano's 768 x 128 x 128 projections and the MLP head's
// backward products on one thread (docs/PERFORMANCE.md, 2026-11-28 12:05-12:37 UTC).
constexpr int64_t kSgemmThreadedWork = int64_t(1) << 21;

}  // namespace tandem::cpu
