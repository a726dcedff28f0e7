// The tanh GELU of kernels/cpu/activation_cpu.h in AVX-512 (16 lanes) and AVX2 + FMA (8 lanes)
// registers, float32. The library is compiled for a baseline x86-64 (SSE4.2), where Eigen's
// vectorized tanh and exp run 4 lanes wide: gelu_tanh_backward took 324 us for 196,608 floats on
// one core here, 65 us when the same Eigen code is compiled for AVX-512 (a standalone loop,
// 2026-11-28). Eigen cannot be compiled per function (its packet type is chosen by the
// translation unit's flags, and an inline Eigen function compiled for AVX-512 in one file may be
// the copy the linker keeps for all), so these use intrinsics under target attributes, with
// their own exp:
//   exp(a) = 2^n e^r, n = round(a / ln 2), r = a - n ln 2 (ln 2 in two parts, |r| <= ln2 / 2),
//   e^r by its Taylor series to r^7 (the first term left out, r^8 / 8!, is below 6e-9 e^r), a
//   clamped to [-87, 80] so that 2^n and the sigmoid below stay normal floats.
// The GELU is written through the sigmoid, x / (1 + exp(-2u)) = x (1 + tanh u) / 2 with
// u = sqrt(2/pi) (x + 0.044715 x^3), and its derivative as in activation_cpu.h; the results agree
// with the Eigen path to a few float32 ulps (tests/gemm/test_cpu_gemm.cpp checks every ISA against
// float64). Only activation_vector.cpp's functions carry target attributes; callers pick one by
// active_isa() (kernels/cpu/gemm/cpu_isa.h).
#pragma once
#include <cstdint>

namespace tandem::cpu {

// y = gelu_tanh(x), gx = gy * gelu_tanh'(x); n floats each; x == y allowed.
void gelu_tanh_avx512(const float* x, float* y, int64_t n);
void gelu_tanh_avx2(const float* x, float* y, int64_t n);
void gelu_tanh_backward_avx512(const float* x, const float* gy, float* gx, int64_t n);
void gelu_tanh_backward_avx2(const float* x, const float* gy, float* gx, int64_t n);

}  // namespace tandem::cpu
