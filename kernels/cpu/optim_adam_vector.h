// The float32 Adam / AdamW update of kernels/cpu/optim_cpu.cpp in AVX-512 (16 lanes) and AVX2
// (8 lanes) registers: the scalar loop's operations in its order, one IEEE multiply, add,
// divide or square root each (no fused multiply-add), so every lane gives the scalar loop's bits.
// The tail of a range runs masked in the same registers. Only optim_adam_vector.cpp's functions
// carry target attributes; callers pick one by active_isa() (kernels/cpu/gemm/cpu_isa.h).
#pragma once
#include <cstdint>

namespace tandem::cpu {

// Per-call constants, rounded to float exactly as the scalar loop rounds them.
struct AdamCoefficients {
  float decay;      // 1 - lr * weight_decay (AdamW) or 1
  float l2;         // weight_decay (Adam) or 0
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float step_size;  // lr / (1 - beta1^step)
  float bc2_sqrt;   // sqrt(1 - beta2^step)
  float eps;
};

// p, g, m, v: n floats each; p, m and v are updated in place.
void adam_update_avx512(float* p, const float* g, float* m, float* v, int64_t n, const AdamCoefficients& c);
void adam_update_avx2(float* p, const float* g, float* m, float* v, int64_t n, const AdamCoefficients& c);

}  // namespace tandem::cpu
