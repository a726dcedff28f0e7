// The float32 GEMM micro-kernels, one per instruction set, and the blocking each is run with.
// A micro-kernel computes one MR x NR tile of C from packed panels:
//   C[i][j] = alpha * sum_p A[p*MR + i] * B[p*NR + j] + beta * C[i][j] + bias[j]
// for i < MR, j < NR, p < kc; A and B are 64-byte aligned packed panels (sgemm_packed.cpp);
// C has row stride ldc; beta == 0 means C is not read (NaNs in C do not leak); bias may be null.
#pragma once
#include <cstdint>

#include "kernels/cpu/gemm/cpu_isa.h"
#include "kernels/cpu/gemm/sgemm_pack.h"

namespace tandem::cpu {

using SgemmTileFn = void (*)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, float alpha,
                             float beta, const float* bias);
// The narrow-C path (sgemm_dot.h): C[m,n] = alpha * A B^T + beta * C (+ bias) for n <= kSgemmDotMaxN.
using SgemmDotFn = void (*)(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                            int64_t ldb, float beta, float* c, int64_t ldc, const float* bias);

struct SgemmKernel {
  CpuIsa isa;
  int mr, nr;         // register tile
  SgemmTileFn tile;
  PackRowsFn pack_rows;  // the transposing pack (sgemm_pack.h)
  SgemmDotFn dot;        // the narrow-C dot products; null where the packed path serves
  // The micro-kernel for the rows x cols corner at C's edge (rows <= MR, cols <= NR), reading the
  // same full-width panels and writing only that corner; null (or a null function) where this ISA
  // has none for that corner, and sgemm computes the whole tile into scratch and copies the corner.
  SgemmTileFn (*edge_tile)(int rows, int cols) = nullptr;
};

// Defined in sgemm_kernel_<isa>.cpp; the AVX ones only exist on x86-64.
extern const SgemmKernel kSgemmPortable;
#if defined(__x86_64__)
extern const SgemmKernel kSgemmAvx2;
extern const SgemmKernel kSgemmAvx512;
#endif

// The micro-kernel of `isa` (the caller checked that the CPU supports it).
const SgemmKernel& sgemm_kernel(CpuIsa isa);

}  // namespace tandem::cpu
