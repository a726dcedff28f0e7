// Unary elementwise CPU kernels and their backward: contiguous buffers in per-thread chunks
// through Eigen arrays (vectorized exp/log/tanh/logistic). Binary ops and where:
// elementwise_binary_cpu.cpp.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_backend.h"

namespace tandem {

namespace {

template <typename T> using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
template <typename T> using CMap = Eigen::Map<const Arr<T>>;
template <typename T> using MMap = Eigen::Map<Arr<T>>;

// Runs fn(begin, count) over [0, n) in one chunk per thread.
template <typename Fn>
void parallel_chunks(int64_t n, Fn&& fn) {
  cpu::parallel_for(n, cpu::kParallelGrain / 2, [&](int64_t begin, int64_t end) { fn(begin, end - begin); });
}

// The ops with intermediate arrays (the tanh GELU) run over blocks of kBlock elements whose
// intermediates live on the stack: a whole-chunk temporary was a heap allocation of the tensor's
// size on every call (page faults each step; the gpt-nano step spent about a fifth of its time in
// GELU's backward) and an extra pass over memory. The expressions per element are unchanged.
constexpr int64_t kBlock = 512;
template <typename T> using BlockArr = Eigen::Array<T, Eigen::Dynamic, 1, Eigen::ColMajor, kBlock, 1>;

template <typename Fn>
void for_blocks(int64_t n, Fn&& fn) {
  for (int64_t b = 0; b < n; b += kBlock) fn(b, std::min(kBlock, n - b));
}

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kInvSqrt2Pi = 0.3989422804014327;
constexpr double kSqrt2OverPi = 0.7978845608028654;

template <typename T>
void unary_chunk(UnaryOp op, const T* xp, T* yp, int64_t n, const UnaryParams& p) {
  CMap<T> x(xp, n);
  MMap<T> y(yp, n);
  switch (op) {
    // x * -1, not -x: Eigen 3.4 negates packets as 0 - x, which turns -(+0) into +0.
    case UnaryOp::Neg: y = x * T(-1); break;
    case UnaryOp::Exp: y = x.exp(); break;
    case UnaryOp::Log: y = x.log(); break;
    case UnaryOp::Sqrt: y = x.sqrt(); break;
    case UnaryOp::Abs: y = x.abs(); break;
    case UnaryOp::Relu: y = x.max(T(0)); break;
    case UnaryOp::Sigmoid: y = x.logistic(); break;
    case UnaryOp::Tanh: y = x.tanh(); break;
    case UnaryOp::Gelu:
      for (int64_t i = 0; i < n; ++i) yp[i] = T(0.5) * xp[i] * (T(1) + std::erf(xp[i] / T(kSqrt2)));
      break;
    case UnaryOp::GeluTanh:
      for_blocks(n, [&](int64_t b, int64_t m) {
        CMap<T> xb(xp + b, m);
        const BlockArr<T> inner = (T(kSqrt2OverPi) * (xb + T(0.044715) * xb.cube())).tanh();
        MMap<T>(yp + b, m) = T(0.5) * xb * (T(1) + inner);
      });
      break;
    case UnaryOp::Pow: y = x.pow(T(p.scalar)); break;
    case UnaryOp::Clamp: y = x.max(T(p.lo)).min(T(p.hi)); break;
    case UnaryOp::Affine: y = T(p.alpha) * x + T(p.beta); break;
    case UnaryOp::Reciprocal: y = T(p.alpha) / x; break;
  }
}

template <typename T>
void unary_backward_chunk(UnaryOp op, const T* xp, const T* yp, const T* gyp, T* gxp, int64_t n,
                          const UnaryParams& p) {
  CMap<T> x(xp, n), gy(gyp, n);
  MMap<T> gx(gxp, n);
  switch (op) {
    case UnaryOp::Neg: gx = gy * T(-1); break;
    case UnaryOp::Exp: gx = gy * CMap<T>(yp, n); break;
    case UnaryOp::Log: gx = gy / x; break;
    case UnaryOp::Sqrt: gx = gy / (T(2) * CMap<T>(yp, n)); break;
    case UnaryOp::Abs: gx = gy * x.sign(); break;
    // ReLU and clamp pass gy where x is inside, as a select on loaded values: Eigen's select()
    // compiled to a compare and branch per element, mispredicted on about half of a ReLU's
    // inputs (7% of the MLP step).
    case UnaryOp::Relu:
      for (int64_t i = 0; i < n; ++i) {
        const T g = gyp[i];
        gxp[i] = xp[i] > T(0) ? g : T(0);
      }
      break;
    case UnaryOp::Sigmoid: { CMap<T> y(yp, n); gx = gy * y * (T(1) - y); break; }
    case UnaryOp::Tanh: { CMap<T> y(yp, n); gx = gy * (T(1) - y.square()); break; }
    case UnaryOp::Gelu:
      for (int64_t i = 0; i < n; ++i) {
        T v = xp[i];
        T cdf = T(0.5) * (T(1) + std::erf(v / T(kSqrt2)));
        T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * v * v);
        gxp[i] = gyp[i] * (cdf + v * pdf);
      }
      break;
    case UnaryOp::GeluTanh: {
      // With s = sigmoid(2u) = (1 + tanh u) / 2: d/dx [x s] = s (1 + 2 x du (1 - s)). The tanh
      // form 0.5 (1 + th) + 0.5 x (1 - th^2) du cancels catastrophically where th is near -1.
      for_blocks(n, [&](int64_t b, int64_t m) {
        CMap<T> xb(xp + b, m);
        const BlockArr<T> u = T(kSqrt2OverPi) * (xb + T(0.044715) * xb.cube());
        const BlockArr<T> s = T(1) / (T(1) + (T(-2) * u).exp());
        const BlockArr<T> du = T(kSqrt2OverPi) * (T(1) + T(3 * 0.044715) * xb.square());
        MMap<T>(gxp + b, m) = CMap<T>(gyp + b, m) * (s * (T(1) + T(2) * xb * du * (T(1) - s)));
      });
      break;
    }
    case UnaryOp::Pow: gx = gy * T(p.scalar) * x.pow(T(p.scalar - 1)); break;
    case UnaryOp::Clamp: {
      const T lo = T(p.lo), hi = T(p.hi);
      for (int64_t i = 0; i < n; ++i) {
        const T g = gyp[i], v = xp[i];
        gxp[i] = v >= lo && v <= hi ? g : T(0);
      }
      break;
    }
    case UnaryOp::Affine: gx = T(p.alpha) * gy; break;
    case UnaryOp::Reciprocal: gx = -T(p.alpha) * gy / x.square(); break;
  }
}

}  // namespace

void CpuBackend::unary(UnaryOp op, const TensorView& x, const TensorView& y, const UnaryParams& p) {
  cpu::dispatch_float(x.dtype, "unary", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const T* xp = x.ptr<T>();
    T* yp = y.ptr<T>();
    parallel_chunks(x.numel(), [&](int64_t b, int64_t n) { unary_chunk<T>(op, xp + b, yp + b, n, p); });
  });
}

void CpuBackend::unary_backward(UnaryOp op, const TensorView& x, const TensorView& y, const TensorView& gy,
                                const TensorView& gx, const UnaryParams& p) {
  cpu::dispatch_float(x.dtype, "unary_backward", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const T* xp = x.ptr<T>();
    const T* yp = y.data ? y.ptr<T>() : nullptr;
    const T* gyp = gy.ptr<T>();
    T* gxp = gx.ptr<T>();
    parallel_chunks(x.numel(), [&](int64_t b, int64_t n) {
      unary_backward_chunk<T>(op, xp + b, yp ? yp + b : nullptr, gyp + b, gxp + b, n, p);
    });
  });
}

}  // namespace tandem
