// The activations a linear layer fuses (ReLU and the tanh GELU), forward and backward, over one
// contiguous run of elements: the one definition the unary kernels (elementwise_cpu.cpp) and
// the fused linear layer (linear_cpu.cpp, on each block its GEMM finishes) both run, so fused and
// unfused give the same values. Eigen arrays, vectorized; intermediates of the GELU live on the
// stack in blocks of kActivationBlock (a whole-run temporary was a heap allocation per call).
// The float32 GELU runs in AVX-512 or AVX2 registers where active_isa() says so
// (vector_math.h), 2-5x faster than Eigen at the library's baseline SSE width.
#pragma once
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/vector_math.h"
#include "kernels/cpu/gemm/cpu_isa.h"

namespace tandem::cpu {

constexpr int64_t kActivationBlock = 512;
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluTanhCubic = 0.044715;

template <typename T> using ActArr = Eigen::Array<T, Eigen::Dynamic, 1>;
template <typename T> using ActBlock = Eigen::Array<T, Eigen::Dynamic, 1, Eigen::ColMajor, kActivationBlock, 1>;
template <typename T> using ActIn = Eigen::Map<const ActArr<T>>;
template <typename T> using ActOut = Eigen::Map<ActArr<T>>;

template <typename Fn>
void for_activation_blocks(int64_t n, Fn&& fn) {
  for (int64_t b = 0; b < n; b += kActivationBlock) fn(b, std::min(kActivationBlock, n - b));
}

// y = max(x, 0); x == y allowed.
template <typename T>
void relu_run(const T* x, T* y, int64_t n) {
  ActOut<T>(y, n) = ActIn<T>(x, n).max(T(0));
}

// gx = gy where x > 0, else 0 (x may be ReLU's output: it is > 0 exactly where its input is). A
// select on loaded values: Eigen's select() compiled to a compare and branch per element,
// mispredicted on about half of a ReLU's inputs (7% of the MLP step).
template <typename T>
void relu_backward_run(const T* x, const T* gy, T* gx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T g = gy[i];
    gx[i] = x[i] > T(0) ? g : T(0);
  }
}

// y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); x == y allowed.
template <typename T>
void gelu_tanh_run(const T* x, T* y, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    const CpuIsa isa = active_isa();
    if (isa == CpuIsa::Avx512) return gelu_tanh_avx512(x, y, n);
    if (isa == CpuIsa::Avx2) return gelu_tanh_avx2(x, y, n);
  }
  for_activation_blocks(n, [&](int64_t b, int64_t m) {
    ActIn<T> xb(x + b, m);
    const ActBlock<T> inner = (T(kSqrt2OverPi) * (xb + T(kGeluTanhCubic) * xb.cube())).tanh();
    ActOut<T>(y + b, m) = T(0.5) * xb * (T(1) + inner);
  });
}

// gx = gy * d gelu_tanh(x) / dx. With s = sigmoid(2u) = (1 + tanh u) / 2: d/dx [x s] =
// s (1 + 2 x du (1 - s)); the tanh form 0.5 (1 + th) + 0.5 x (1 - th^2) du cancels
// catastrophically where th is near -1.
template <typename T>
void gelu_tanh_backward_run(const T* x, const T* gy, T* gx, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    const CpuIsa isa = active_isa();
    if (isa == CpuIsa::Avx512) return gelu_tanh_backward_avx512(x, gy, gx, n);
    if (isa == CpuIsa::Avx2) return gelu_tanh_backward_avx2(x, gy, gx, n);
  }
  for_activation_blocks(n, [&](int64_t b, int64_t m) {
    ActIn<T> xb(x + b, m);
    const ActBlock<T> u = T(kSqrt2OverPi) * (xb + T(kGeluTanhCubic) * xb.cube());
    const ActBlock<T> s = T(1) / (T(1) + (T(-2) * u).exp());
    const ActBlock<T> du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluTanhCubic) * xb.square());
    ActOut<T>(gx + b, m) = ActIn<T>(gy + b, m) * (s * (T(1) + T(2) * xb * du * (T(1) - s)));
  });
}

}  // namespace tandem::cpu
