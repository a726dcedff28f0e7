// CudaBackend::unary and unary_backward: y = op(x) and gx = gy * op'(x) over contiguous float
// tensors (float32, float64, float16, bfloat16; half types compute in float and round once on
// store). The formulas, and their NaN behaviour, are those of kernels/cpu/elementwise_cpu.cpp:
//   relu(x) = x < 0 ? 0 : x and clamp = min(max(x, lo), hi) in std::max/std::min order, so a NaN
//   input stays NaN (and relu(-0) = -0); relu'/clamp' are 0 at NaN; abs' = gy * sign(x) with
//   sign(0) = 0 and sign(NaN) = NaN (Eigen's sign).
// One kernel per dtype runs the strided map (elementwise_map.cuh): packs of 16 bytes per thread
// when the pointers are aligned, a scalar tail otherwise. The op is a runtime switch taken once
// per pack (a uniform branch), not a template parameter, to keep the instantiations at 4 + 4.
#include <cmath>

#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/elementwise_map.cuh"

namespace tandem {

namespace {

using cuda::acc_t;
using cuda::from_acc;
using cuda::to_acc;
using cuda::elementwise::load_pack;
using cuda::elementwise::pack_width;
using cuda::elementwise::store_pack;

// The CPU divides by sqrt(2); multiplying by its reciprocal differs by at most an ulp of the erf
// argument and keeps the IEEE division out of the float32 GELU, which must run at memory speed.
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluTanhCoeff = 0.044715;

// Math in the accumulation type: float functions for float, double ones for double.
__device__ __forceinline__ float m_exp(float x) { return expf(x); }
__device__ __forceinline__ double m_exp(double x) { return exp(x); }
__device__ __forceinline__ float m_log(float x) { return logf(x); }
__device__ __forceinline__ double m_log(double x) { return log(x); }
__device__ __forceinline__ float m_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double m_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float m_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double m_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float m_erf(float x) { return erff(x); }
__device__ __forceinline__ double m_erf(double x) { return erf(x); }
__device__ __forceinline__ float m_pow(float x, float e) { return powf(x, e); }
__device__ __forceinline__ double m_pow(double x, double e) { return pow(x, e); }
__device__ __forceinline__ float m_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double m_abs(double x) { return fabs(x); }

// UnaryParams rounded to the compute type once on the host (the CPU uses T(p.scalar) etc.).
template <typename A>
struct UnaryConsts {
  A scalar, scalar_minus_1, lo, hi, alpha, beta;
};
template <typename A>
UnaryConsts<A> consts_of(const UnaryParams& p) {
  return {A(p.scalar), A(p.scalar - 1), A(p.lo), A(p.hi), A(p.alpha), A(p.beta)};
}

// r[j] = f(v[j]) for the N elements of a pack.
template <int N, typename A, typename F>
__device__ __forceinline__ void each(A (&r)[N], const A (&v)[N], F f) {
#pragma unroll
  for (int j = 0; j < N; ++j) r[j] = f(v[j]);
}

template <int N, typename A>
__device__ __forceinline__ void unary_values(UnaryOp op, const A (&v)[N], A (&r)[N], const UnaryConsts<A>& c) {
  switch (op) {
    case UnaryOp::Neg: each(r, v, [](A x) { return -x; }); break;
    case UnaryOp::Exp: each(r, v, [](A x) { return m_exp(x); }); break;
    case UnaryOp::Log: each(r, v, [](A x) { return m_log(x); }); break;
    case UnaryOp::Sqrt: each(r, v, [](A x) { return m_sqrt(x); }); break;
    case UnaryOp::Abs: each(r, v, [](A x) { return m_abs(x); }); break;
    case UnaryOp::Relu: each(r, v, [](A x) { return x < A(0) ? A(0) : x; }); break;
    case UnaryOp::Sigmoid: each(r, v, [](A x) { return A(1) / (A(1) + m_exp(-x)); }); break;
    case UnaryOp::Tanh: each(r, v, [](A x) { return m_tanh(x); }); break;
    case UnaryOp::Gelu: each(r, v, [](A x) { return A(0.5) * x * (A(1) + m_erf(x * A(kInvSqrt2))); }); break;
    case UnaryOp::GeluTanh:
      each(r, v, [](A x) {
        const A inner = m_tanh(A(kSqrt2OverPi) * (x + A(kGeluTanhCoeff) * (x * x * x)));
        return A(0.5) * x * (A(1) + inner);
      });
      break;
    case UnaryOp::Pow: each(r, v, [&](A x) { return m_pow(x, c.scalar); }); break;
    case UnaryOp::Clamp:
      each(r, v, [&](A x) {
        const A t = x < c.lo ? c.lo : x;  // std::max(x, lo)
        return c.hi < t ? c.hi : t;       // std::min(t, hi)
      });
      break;
    case UnaryOp::Affine: each(r, v, [&](A x) { return c.alpha * x + c.beta; }); break;
    case UnaryOp::Reciprocal: each(r, v, [&](A x) { return c.alpha / x; }); break;
  }
}

// gx for one element; x, y, g are the input, the forward output and the incoming gradient.
template <typename A>
__device__ __forceinline__ A unary_grad(UnaryOp op, A x, A y, A g, const UnaryConsts<A>& c) {
  switch (op) {
    case UnaryOp::Neg: return -g;
    case UnaryOp::Exp: return g * y;
    case UnaryOp::Log: return g / x;
    case UnaryOp::Sqrt: return g / (A(2) * y);
    case UnaryOp::Abs: return g * (x != x ? x : A(int(x > A(0)) - int(x < A(0))));
    case UnaryOp::Relu: return x > A(0) ? g : A(0);
    case UnaryOp::Sigmoid: return g * y * (A(1) - y);
    case UnaryOp::Tanh: return g * (A(1) - y * y);
    case UnaryOp::Gelu: {
      const A cdf = A(0.5) * (A(1) + m_erf(x * A(kInvSqrt2)));
      const A pdf = A(kInvSqrt2Pi) * m_exp(A(-0.5) * x * x);
      return g * (cdf + x * pdf);
    }
    case UnaryOp::GeluTanh: {
      // The CPU's cancellation-free form: s = sigmoid(2u), d/dx [x s] = s (1 + 2 x du (1 - s)).
      const A u = A(kSqrt2OverPi) * (x + A(kGeluTanhCoeff) * (x * x * x));
      const A s = A(1) / (A(1) + m_exp(A(-2) * u));
      const A du = A(kSqrt2OverPi) * (A(1) + A(3 * kGeluTanhCoeff) * (x * x));
      return g * (s * (A(1) + A(2) * x * du * (A(1) - s)));
    }
    case UnaryOp::Pow: return g * c.scalar * m_pow(x, c.scalar_minus_1);
    case UnaryOp::Clamp: return x >= c.lo && x <= c.hi ? g : A(0);
    case UnaryOp::Affine: return c.alpha * g;
    case UnaryOp::Reciprocal: return -c.alpha * g / (x * x);
  }
  return A(0);
}

bool grad_reads_x(UnaryOp op) {
  return !(op == UnaryOp::Neg || op == UnaryOp::Affine || op == UnaryOp::Exp || op == UnaryOp::Sqrt ||
           op == UnaryOp::Sigmoid || op == UnaryOp::Tanh);
}
bool grad_reads_y(UnaryOp op) {
  return op == UnaryOp::Exp || op == UnaryOp::Sqrt || op == UnaryOp::Sigmoid || op == UnaryOp::Tanh;
}

// Operands: x (0), y (1).
template <typename T>
struct UnaryFn {
  using A = acc_t<T>;
  static constexpr int kVec = pack_width(int(sizeof(T)));
  UnaryOp op;
  UnaryConsts<A> c;
  const T* x;
  T* y;
  template <int N>
  __device__ __forceinline__ void apply(const int64_t (&off)[2], const uint8_t (&mode)[2]) const {
    T xv[N];
    load_pack<N>(x + off[0], mode[0], xv);
    A v[N], r[N];
#pragma unroll
    for (int j = 0; j < N; ++j) v[j] = to_acc(xv[j]);
    unary_values<N>(op, v, r, c);
    T yv[N];
#pragma unroll
    for (int j = 0; j < N; ++j) yv[j] = from_acc<T>(r[j]);
    store_pack<N>(y + off[1], yv);
  }
};

// Operands: x (0), y (1), gy (2), gx (3). x and y are read only when the op's gradient needs
// them (saves a third of the traffic for Exp, Sigmoid, Tanh, Sqrt, Neg, Affine).
template <typename T>
struct UnaryBackwardFn {
  using A = acc_t<T>;
  static constexpr int kVec = pack_width(int(sizeof(T)));
  UnaryOp op;
  UnaryConsts<A> c;
  bool read_x, read_y;
  const T* x;
  const T* y;
  const T* gy;
  T* gx;
  template <int N>
  __device__ __forceinline__ void apply(const int64_t (&off)[4], const uint8_t (&mode)[4]) const {
    T xv[N], yv[N], gv[N];
    if (read_x) load_pack<N>(x + off[0], mode[0], xv);
    if (read_y) load_pack<N>(y + off[1], mode[1], yv);
    load_pack<N>(gy + off[2], mode[2], gv);
    T out[N];
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const A xa = read_x ? to_acc(xv[j]) : A(0);
      const A ya = read_y ? to_acc(yv[j]) : A(0);
      out[j] = from_acc<T>(unary_grad<A>(op, xa, ya, to_acc(gv[j]), c));
    }
    store_pack<N>(gx + off[3], out);
  }
};

}  // namespace

void CudaBackend::unary(UnaryOp op, const TensorView& x, const TensorView& y, const UnaryParams& p) {
  cuda::dispatch_float(x.dtype, "unary", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    const int64_t n = y.numel();
    if (n == 0) return;
    const cuda::StridedIndexer<2> ix(y.shape, {&x.strides, &y.strides});
    const int bytes = int(sizeof(T));
    const auto plan = cuda::elementwise::plan_vectorized<2>(ix, {x.data, y.data}, {bytes, bytes}, UnaryFn<T>::kVec);
    const UnaryFn<T> fn{op, consts_of<acc_t<T>>(p), x.ptr<const T>(), y.ptr<T>()};
    cuda::elementwise::launch_strided_map(fn, ix, n, plan, "unary launch");
  });
}

void CudaBackend::unary_backward(UnaryOp op, const TensorView& x, const TensorView& y, const TensorView& gy,
                                 const TensorView& gx, const UnaryParams& p) {
  cuda::dispatch_float(x.dtype, "unary_backward", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    const int64_t n = gx.numel();
    if (n == 0) return;
    const bool read_x = grad_reads_x(op), read_y = grad_reads_y(op);
    if (read_y && y.data == nullptr)
      throw DeviceError("unary_backward: this op's gradient needs the forward output y, which was not given");
    // y may be an empty view when the op does not need it; gx's strides stand in for it then.
    const Shape& y_strides = read_y ? y.strides : gx.strides;
    const cuda::StridedIndexer<4> ix(gx.shape, {&x.strides, &y_strides, &gy.strides, &gx.strides});
    const int bytes = int(sizeof(T));
    const auto plan = cuda::elementwise::plan_vectorized<4>(
        ix, {read_x ? x.data : nullptr, read_y ? y.data : nullptr, gy.data, gx.data}, {bytes, bytes, bytes, bytes},
        UnaryBackwardFn<T>::kVec);
    const UnaryBackwardFn<T> fn{op,
                                consts_of<acc_t<T>>(p),
                                read_x,
                                read_y,
                                x.ptr<const T>(),
                                read_y ? y.ptr<const T>() : nullptr,
                                gy.ptr<const T>(),
                                gx.ptr<T>()};
    cuda::elementwise::launch_strided_map(fn, ix, n, plan, "unary_backward launch");
  });
}

}  // namespace tandem
