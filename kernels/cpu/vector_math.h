// Float32 math the library runs in AVX-512 (16 lanes) or AVX2 + FMA (8 lanes) registers where
// active_isa() says so: the tanh GELU of kernels/cpu/activation_cpu.h, the softmax rows of
// kernels/cpu/softmax_loss_cpu.cpp and the layer-norm rows of kernels/cpu/norm_cpu.cpp. The
// library is compiled for a baseline x86-64 (SSE4.2), where Eigen's vectorized tanh and exp run
// 4 lanes wide and std::exp and the scalar loops one element at a time: gelu_tanh_backward took
// 324 us for 196,608 floats on one core here, 65 us when the same Eigen code is compiled for
// AVX-512 (a standalone loop, 2026-11-28). Eigen cannot be compiled per
// function (its packet type is chosen by the translation unit's flags, and an inline Eigen
// function compiled for AVX-512 in one file may be the copy the linker keeps for all), so these
// use intrinsics under target attributes, with their own exp:
//   exp(a) = 2^n e^r, n = round(a / ln 2), r = a - n ln 2 (ln 2 in two parts, |r| <= ln2 / 2),
//   e^r by its Taylor series to r^7 (the first term left out, r^8 / 8!, is below 6e-9 e^r);
//   a above 80 is taken as 80 (2^n and a sigmoid 1 / (1 + exp(a)) stay normal floats), a below
//   -87 gives 0 (exp(-inf) = 0 exactly, as a masked softmax needs), a NaN gives NaN.
// The GELU is written through the sigmoid, x / (1 + exp(-2u)) = x (1 + tanh u) / 2 with
// u = sqrt(2/pi) (x + 0.044715 x^3), and its derivative as in activation_cpu.h. Results agree
// with the Eigen and libm paths to a few float32 ulps (tests/gemm/test_cpu_gemm.cpp and the op
// table check every ISA against float64). Only vector_math.cpp's functions carry target
// attributes; callers pick one by active_isa() (kernels/cpu/gemm/cpu_isa.h).
#pragma once
#include <cstdint>

namespace tandem::cpu {

// y = gelu_tanh(x), gx = gy * gelu_tanh'(x); n floats each; x == y allowed.
void gelu_tanh_avx512(const float* x, float* y, int64_t n);
void gelu_tanh_avx2(const float* x, float* y, int64_t n);
void gelu_tanh_backward_avx512(const float* x, const float* gy, float* gx, int64_t n);
void gelu_tanh_backward_avx2(const float* x, const float* gy, float* gx, int64_t n);

// out = exp(in - shift), n floats (in == out allowed); returns the sum of out accumulated in
// double, in a fixed order (lanes, then the lanes added in order).
double exp_shifted_sum_avx512(const float* in, float* out, int64_t n, float shift);
double exp_shifted_sum_avx2(const float* in, float* out, int64_t n, float shift);
// The largest of n >= 1 floats (-inf when all are -inf; a NaN may or may not win).
float row_max_avx512(const float* in, int64_t n);
float row_max_avx2(const float* in, int64_t n);
// out = g - exp(y) * sum_g: log_softmax's backward for one row (y its output).
void log_softmax_backward_avx512(const float* y, const float* g, float* out, int64_t n, float sum_g);
void log_softmax_backward_avx2(const float* y, const float* g, float* out, int64_t n, float sum_g);

// One layer-norm row of n >= 1 floats, statistics in double lanes (added in lane order):
// mean and 1 / sqrt(biased variance + eps) (two passes, as norm_cpu.cpp's scalar loop);
// y = float((x - mean) * invstd) * gamma + beta (gamma, beta may be null);
// gx = invstd / n * (n g - sum(g) - xhat sum(g xhat)) with g = gy * gamma rounded to float.
void layer_norm_stats_avx512(const float* x, int64_t n, double eps, double* mean, double* invstd);
void layer_norm_stats_avx2(const float* x, int64_t n, double eps, double* mean, double* invstd);
void layer_norm_apply_avx512(const float* x, float* y, int64_t n, double mean, double invstd, const float* gamma,
                             const float* beta);
void layer_norm_apply_avx2(const float* x, float* y, int64_t n, double mean, double invstd, const float* gamma,
                           const float* beta);
void layer_norm_backward_row_avx512(const float* x, const float* gy, const float* gamma, float* gx, int64_t n,
                                    double mean, double invstd);
void layer_norm_backward_row_avx2(const float* x, const float* gy, const float* gamma, float* gx, int64_t n,
                                  double mean, double invstd);

}  // namespace tandem::cpu
