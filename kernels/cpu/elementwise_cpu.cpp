// Unary elementwise CPU kernels and their backward: contiguous buffers in per-thread chunks
// through Eigen arrays (vectorized exp/log/tanh/logistic). Binary ops and where:
// elementwise_binary_cpu.cpp.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "kernels/cpu/activation_cpu.h"
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

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kInvSqrt2Pi = 0.3989422804014327;

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
    case UnaryOp::Relu: cpu::relu_run(xp, yp, n); break;
    case UnaryOp::Sigmoid: y = x.logistic(); break;
    case UnaryOp::Tanh: y = x.tanh(); break;
    case UnaryOp::Gelu:
      for (int64_t i = 0; i < n; ++i) yp[i] = T(0.5) * xp[i] * (T(1) + std::erf(xp[i] / T(kSqrt2)));
      break;
    case UnaryOp::GeluTanh: cpu::gelu_tanh_run(xp, yp, n); break;
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
    case UnaryOp::Relu: cpu::relu_backward_run(xp, gyp, gxp, n); break;
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
    case UnaryOp::GeluTanh: cpu::gelu_tanh_backward_run(xp, gyp, gxp, n); break;
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
