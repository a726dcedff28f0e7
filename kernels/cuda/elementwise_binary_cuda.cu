// CudaBackend::binary and where: out = a op b and out = cond ? a : b, with a, b (and cond)
// broadcast to out's shape through their strides (stride 0 on broadcast dims).
//
// binary runs for float32/float64/float16/bfloat16/int32/int64/uint8 (bool as uint8, as on the
// CPU); half types compute in float and round once. Results follow kernels/cpu/elementwise_binary_cpu.cpp:
//   maximum(x, y) = x > y || x != x ? x : y (a NaN in either operand gives NaN), minimum alike;
//   pow(x, y) = T(pow(double(x), double(y))); integer arithmetic wraps like the CPU's T(x + y);
//   div on integers is a DTypeError; comparisons write Bool (0/1 bytes).
// One kernel per (dtype, arithmetic | comparison) runs the strided map (elementwise_map.cuh):
// 16-byte packs when the innermost dim is contiguous or broadcast in every operand (same-shape
// operands, bias rows), scalar strided elements otherwise. The op is a runtime switch taken
// once per pack.
//
// where only moves bits, so it runs on 1/2/4/8-byte words whatever the dtype.
#include <cmath>
#include <type_traits>

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

// pow on integers: the CPU's T(std::pow(double(x), double(y))). For y >= 0 the true power is an
// integer, so rounding the GPU's pow (within 2 ulp) to the nearest integer recovers the correctly
// rounded double the CPU converts; for y < 0 it is 1/x^|y|: +-1 for x = +-1, else 0 (x = 0 gives
// infinity). Values out of T's range convert as x86's cvttsd2si does (the integer minimum; low
// byte of the int32 conversion for uint8), which is what the CPU reference produces there.
template <typename T>
__device__ __forceinline__ T integer_pow(T x, T y) {
  double r = rint(pow(double(x), double(y)));
  if constexpr (std::is_signed_v<T>) {
    if (y < T(0)) r = x == T(1) ? 1.0 : (x == T(-1) ? ((y & 1) ? -1.0 : 1.0) : (x == T(0) ? HUGE_VAL : 0.0));
  }
  if constexpr (std::is_same_v<T, int64_t>) {
    return r >= -9223372036854775808.0 && r < 9223372036854775808.0 ? static_cast<int64_t>(r) : INT64_MIN;
  } else {
    const int32_t i = r > -2147483649.0 && r < 2147483648.0 ? static_cast<int32_t>(r) : INT32_MIN;
    return static_cast<T>(i);  // uint8: the low byte
  }
}

// o[j] = f(a[j], b[j]) for the N elements of a pack.
template <int N, typename T, typename Out, typename F>
__device__ __forceinline__ void each(const T (&a)[N], const T (&b)[N], Out (&o)[N], F f) {
#pragma unroll
  for (int j = 0; j < N; ++j) o[j] = f(a[j], b[j]);
}

// o[j] = a[j] op b[j] for an arithmetic op (Add .. Minimum); integer Div is refused on the host.
template <int N, typename T>
__device__ __forceinline__ void arithmetic(BinaryOp op, const T (&a)[N], const T (&b)[N], T (&o)[N]) {
  switch (op) {
    case BinaryOp::Add: each(a, b, o, [](T x, T y) { return from_acc<T>(to_acc(x) + to_acc(y)); }); break;
    case BinaryOp::Sub: each(a, b, o, [](T x, T y) { return from_acc<T>(to_acc(x) - to_acc(y)); }); break;
    case BinaryOp::Mul: each(a, b, o, [](T x, T y) { return from_acc<T>(to_acc(x) * to_acc(y)); }); break;
    case BinaryOp::Div:
      if constexpr (!std::is_integral_v<T>) each(a, b, o, [](T x, T y) { return from_acc<T>(to_acc(x) / to_acc(y)); });
      break;
    case BinaryOp::Pow:
      if constexpr (std::is_integral_v<T>) {
        each(a, b, o, [](T x, T y) { return integer_pow<T>(x, y); });
      } else {
        each(a, b, o, [](T x, T y) { return from_acc<T>(pow(double(to_acc(x)), double(to_acc(y)))); });
      }
      break;
    case BinaryOp::Maximum:
      each(a, b, o, [](T x, T y) {
        const auto u = to_acc(x), v = to_acc(y);
        return u > v || u != u ? x : y;
      });
      break;
    case BinaryOp::Minimum:
      each(a, b, o, [](T x, T y) {
        const auto u = to_acc(x), v = to_acc(y);
        return u < v || u != u ? x : y;
      });
      break;
    default: break;
  }
}

// o[j] = a[j] op b[j] for a comparison (Eq .. Ge), as 0/1 bytes, compared in the compute type.
template <int N, typename T>
__device__ __forceinline__ void comparison(BinaryOp op, const T (&a)[N], const T (&b)[N], uint8_t (&o)[N]) {
  switch (op) {
    case BinaryOp::Eq: each(a, b, o, [](T x, T y) { return uint8_t(to_acc(x) == to_acc(y)); }); break;
    case BinaryOp::Ne: each(a, b, o, [](T x, T y) { return uint8_t(to_acc(x) != to_acc(y)); }); break;
    case BinaryOp::Lt: each(a, b, o, [](T x, T y) { return uint8_t(to_acc(x) < to_acc(y)); }); break;
    case BinaryOp::Le: each(a, b, o, [](T x, T y) { return uint8_t(to_acc(x) <= to_acc(y)); }); break;
    case BinaryOp::Gt: each(a, b, o, [](T x, T y) { return uint8_t(to_acc(x) > to_acc(y)); }); break;
    case BinaryOp::Ge: each(a, b, o, [](T x, T y) { return uint8_t(to_acc(x) >= to_acc(y)); }); break;
    default: break;
  }
}

// Operands: a (0), b (1), out (2).
template <typename T, bool kCompare>
struct BinaryFn {
  using out_t = std::conditional_t<kCompare, uint8_t, T>;
  static constexpr int kVec = pack_width(int(sizeof(T)));
  BinaryOp op;
  const T* a;
  const T* b;
  out_t* out;
  template <int N>
  __device__ __forceinline__ void apply(const int64_t (&off)[3], const uint8_t (&mode)[3]) const {
    T av[N], bv[N];
    load_pack<N>(a + off[0], mode[0], av);
    load_pack<N>(b + off[1], mode[1], bv);
    out_t ov[N];
    if constexpr (kCompare) comparison<N>(op, av, bv, ov); else arithmetic<N>(op, av, bv, ov);
    store_pack<N>(out + off[2], ov);
  }
};

// Operands: cond (0, bytes), a (1), b (2), out (3); Word is the dtype's size.
template <typename Word>
struct WhereFn {
  static constexpr int kVec = pack_width(int(sizeof(Word)));
  const uint8_t* cond;
  const Word* a;
  const Word* b;
  Word* out;
  template <int N>
  __device__ __forceinline__ void apply(const int64_t (&off)[4], const uint8_t (&mode)[4]) const {
    uint8_t cv[N];
    Word av[N], bv[N], ov[N];
    load_pack<N>(cond + off[0], mode[0], cv);
    load_pack<N>(a + off[1], mode[1], av);
    load_pack<N>(b + off[2], mode[2], bv);
#pragma unroll
    for (int j = 0; j < N; ++j) ov[j] = cv[j] ? av[j] : bv[j];
    store_pack<N>(out + off[3], ov);
  }
};

template <typename T, bool kCompare>
void run_binary(BinaryOp op, const TensorView& a, const TensorView& b, const TensorView& out) {
  using Fn = BinaryFn<T, kCompare>;
  const cuda::StridedIndexer<3> ix(out.shape, {&a.strides, &b.strides, &out.strides});
  const int bytes = int(sizeof(T)), out_bytes = int(sizeof(typename Fn::out_t));
  const auto plan = cuda::elementwise::plan_vectorized<3>(ix, {a.data, b.data, out.data}, {bytes, bytes, out_bytes},
                                                          Fn::kVec);
  const Fn fn{op, a.ptr<const T>(), b.ptr<const T>(), out.ptr<typename Fn::out_t>()};
  cuda::elementwise::launch_strided_map(fn, ix, out.numel(), plan, "binary launch");
}

template <typename Word>
void run_where(const TensorView& cond, const TensorView& a, const TensorView& b, const TensorView& out) {
  using Fn = WhereFn<Word>;
  const cuda::StridedIndexer<4> ix(out.shape, {&cond.strides, &a.strides, &b.strides, &out.strides});
  const int w = int(sizeof(Word));
  const auto plan = cuda::elementwise::plan_vectorized<4>(ix, {cond.data, a.data, b.data, out.data}, {1, w, w, w},
                                                          Fn::kVec);
  const Fn fn{cond.ptr<const uint8_t>(), a.ptr<const Word>(), b.ptr<const Word>(), out.ptr<Word>()};
  cuda::elementwise::launch_strided_map(fn, ix, out.numel(), plan, "where launch");
}

}  // namespace

void CudaBackend::binary(BinaryOp op, const TensorView& a, const TensorView& b, const TensorView& out) {
  cuda::dispatch_all(a.dtype, "binary", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    if (op == BinaryOp::Div && std::is_integral_v<T>)
      throw DTypeError("div on integer tensors is not supported; cast to a float type first");
    if (out.numel() == 0) return;
    if (op >= BinaryOp::Eq) {
      run_binary<T, true>(op, a, b, out);
    } else {
      run_binary<T, false>(op, a, b, out);
    }
  });
}

void CudaBackend::where(const TensorView& cond, const TensorView& a, const TensorView& b, const TensorView& out) {
  if (out.numel() == 0) return;
  switch (dtype_size(out.dtype)) {
    case 1: return run_where<uint8_t>(cond, a, b, out);
    case 2: return run_where<uint16_t>(cond, a, b, out);
    case 4: return run_where<uint32_t>(cond, a, b, out);
    case 8: return run_where<uint64_t>(cond, a, b, out);
  }
  throw DTypeError(std::string("where: unsupported dtype ") + dtype_name(out.dtype));
}

}  // namespace tandem
