// The transposing pack the GEMM's packing uses when the source runs along k: `rows` (<= width)
// source rows, row i at src + i*ld and contiguous along k, into dst[p*width + i] for p < kb,
// i < width, rows past `rows` zero. Two versions: portable loops and AVX2 (8 x 8 register
// transposes, used by the AVX2 and AVX-512 paths).
#pragma once
#include <cstdint>

namespace tandem::cpu {

using PackRowsFn = void (*)(const float* src, int64_t ld, int rows, int width, int64_t kb, float* dst);

void pack_rows_interleaved_portable(const float* src, int64_t ld, int rows, int width, int64_t kb, float* dst);
#if defined(__x86_64__)
void pack_rows_interleaved_avx2(const float* src, int64_t ld, int rows, int width, int64_t kb, float* dst);
#endif

}  // namespace tandem::cpu
