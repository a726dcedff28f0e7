// Transposing pack with AVX2: `rows` source rows (row i at src + i*ld, contiguous along k) into
// the interleaved panel dst[p*width + i] that the micro-kernels read, rows rows..width-1 zero.
// This is the packing of op(A) when A is not transposed and of op(B) when B is (the linear
// layer's x and w): a scalar loop writes one float per store at a stride of `width`, which
// costs 20-30% of a 256-row GEMM; here 8 rows x 8 k are loaded, transposed in registers and
// stored as 8 runs of 8 contiguous floats (4 + 2 for the last 6 of a 14- or 6-wide panel).
#include <cstring>

#include "kernels/cpu/gemm/sgemm_pack.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace tandem::cpu {

namespace {

#define TANDEM_AVX2 __attribute__((target("avx2,fma"), always_inline)) inline

// Columns 0..7 of the 8 x 8 block whose rows are r[0..7].
TANDEM_AVX2 void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Rows [g, g + 8) of the panel (those past `rows` read as zero); `lanes` (<= 8) of them stored.
__attribute__((target("avx2,fma"))) void pack_group(const float* src, int64_t ld, int rows, int g, int lanes,
                                                    int width, int64_t kb, float* dst) {
  const float* row[8];
  for (int i = 0; i < 8; ++i) row[i] = g + i < rows ? src + (g + i) * ld : nullptr;
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  int64_t p = 0;
  for (; p + 8 <= kb; p += 8) {
    __m256 r[8];
    for (int i = 0; i < 8; ++i) r[i] = row[i] ? _mm256_loadu_ps(row[i] + p) : _mm256_setzero_ps();
    transpose8(r);
    for (int q = 0; q < 8; ++q) {
      float* d = dst + (p + q) * width + g;
      if (lanes == 8) {
        _mm256_storeu_ps(d, r[q]);
      } else if (lanes == 6) {  // 4 + 2 floats: AMD's masked stores are microcoded and slow
        _mm_storeu_ps(d, _mm256_castps256_ps128(r[q]));
        _mm_storel_pi(reinterpret_cast<__m64*>(d + 4), _mm256_extractf128_ps(r[q], 1));
      } else {
        _mm256_maskstore_ps(d, mask, r[q]);
      }
    }
  }
  for (; p < kb; ++p)
    for (int i = 0; i < lanes; ++i) dst[p * width + g + i] = row[i] ? row[i][p] : 0.0f;
}

#undef TANDEM_AVX2

}  // namespace

void pack_rows_interleaved_avx2(const float* src, int64_t ld, int rows, int width, int64_t kb, float* dst) {
  for (int g = 0; g < width; g += 8) pack_group(src, ld, rows, g, width - g < 8 ? width - g : 8, width, kb, dst);
}

}  // namespace tandem::cpu
#endif
