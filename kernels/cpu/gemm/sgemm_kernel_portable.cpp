// Portable float32 micro-kernel (4 x 16 tile) and transposing pack: plain loops the compiler
// vectorizes for the baseline instruction set. The fallback on CPUs without AVX2 + FMA and off x86-64.
#include "kernels/cpu/gemm/sgemm_kernels.h"

namespace tandem::cpu {

namespace {

constexpr int kMr = 4, kNr = 16;

void tile_portable(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, float alpha, float beta,
                   const float* bias) {
  float acc[kMr][kNr] = {};
  for (int64_t p = 0; p < kc; ++p, a += kMr, b += kNr)
    for (int i = 0; i < kMr; ++i)
      for (int j = 0; j < kNr; ++j) acc[i][j] += a[i] * b[j];
  for (int i = 0; i < kMr; ++i) {
    float* row = c + i * ldc;
    for (int j = 0; j < kNr; ++j) {
      float v = alpha * acc[i][j];
      if (beta != 0.0f) v += beta * row[j];
      if (bias) v += bias[j];
      row[j] = v;
    }
  }
}

}  // namespace

void pack_rows_interleaved_portable(const float* src, int64_t ld, int rows, int width, int64_t kb, float* dst) {
  for (int i = 0; i < rows; ++i)
    for (int64_t p = 0; p < kb; ++p) dst[p * width + i] = src[i * ld + p];
  for (int i = rows; i < width; ++i)
    for (int64_t p = 0; p < kb; ++p) dst[p * width + i] = 0.0f;
}

const SgemmKernel kSgemmPortable{CpuIsa::Portable, kMr, kNr, tile_portable, pack_rows_interleaved_portable,
                                    nullptr};

}  // namespace tandem::cpu
