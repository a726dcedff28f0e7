// What one reduction computes, separated from how the work is laid out (reduce_kernels.cuh).
// A policy P says, for input element type P::In:
//   Acc      the running value (float for half types, double for double, the type itself for
//            integers; a (value, index) pair for argmax/argmin);
//   identity the value that changes nothing when combined;
//   load     turns element x[i] (with its index i along the reduced axis) into an Acc;
//   combine  merges two Accs. Every combine here is commutative and associative up to float
//            rounding, and the kernels apply it in a fixed tree order, so results never depend
//            on timing;
//   finish   turns the final Acc into the output element (Out), given the reduced length r.
// NaN rules follow the CPU reference (kernels/cpu/reduce_cpu.cpp): max/min return NaN when any
// element is NaN; argmax/argmin return the index of the first NaN if there is one, else the
// index of the first extreme element.
#pragma once
#include <math_constants.h>

#include <cstdint>

#include "kernels/cuda/kernel_utils.cuh"

namespace tandem::cuda::reduce_detail {

constexpr unsigned kFullMask = 0xffffffffu;

template <typename A> __device__ __forceinline__ bool is_nan(A) { return false; }
__device__ __forceinline__ bool is_nan(float v) { return isnan(v); }
__device__ __forceinline__ bool is_nan(double v) { return isnan(v); }

// Largest and smallest values of an accumulation type (infinities for floats): the identities
// of max and min.
template <typename A> struct Extremes;
template <> struct Extremes<float> {
  __device__ static float lowest() { return -CUDART_INF_F; }
  __device__ static float highest() { return CUDART_INF_F; }
};
template <> struct Extremes<double> {
  __device__ static double lowest() { return -CUDART_INF; }
  __device__ static double highest() { return CUDART_INF; }
};
template <> struct Extremes<int64_t> {
  __device__ static int64_t lowest() { return INT64_MIN; }
  __device__ static int64_t highest() { return INT64_MAX; }
};
template <> struct Extremes<int32_t> {
  __device__ static int32_t lowest() { return INT32_MIN; }
  __device__ static int32_t highest() { return INT32_MAX; }
};
template <> struct Extremes<uint8_t> {
  __device__ static uint8_t lowest() { return 0; }
  __device__ static uint8_t highest() { return 255; }
};

// __shfl_down_sync has no overload for 1-byte types: those travel as int.
template <typename A>
__device__ __forceinline__ A shfl_down(A v, int delta, int width) {
  if constexpr (sizeof(A) < 4) {
    return A(__shfl_down_sync(kFullMask, int(v), unsigned(delta), width));
  } else {
    return __shfl_down_sync(kFullMask, v, unsigned(delta), width);
  }
}

// Sum (kMean = false) or mean (kMean = true). Mean divides in double so that r > 2^24 is exact.
template <typename T, bool kMean>
struct SumPolicy {
  using In = T;
  using Acc = acc_t<T>;
  using Out = T;
  __device__ static Acc identity() { return Acc(0); }
  __device__ static Acc load(T v, int64_t) { return to_acc(v); }
  __device__ static Acc combine(Acc a, Acc b) { return a + b; }
  __device__ static Acc shuffle_down(Acc a, int delta, int width) { return shfl_down(a, delta, width); }
  __device__ static Out finish(Acc a, int64_t r) {
    if constexpr (kMean) {
      return from_acc<T>(double(a) / double(r));
    } else {
      return from_acc<T>(a);
    }
  }
};

// Max (kMin = false) or min. A NaN on either side wins; on a tie the left operand stays (only
// the sign of a zero can tell the two apart).
template <typename T, bool kMin>
struct ExtremumPolicy {
  using In = T;
  using Acc = acc_t<T>;
  using Out = T;
  __device__ static Acc identity() { return kMin ? Extremes<Acc>::highest() : Extremes<Acc>::lowest(); }
  __device__ static Acc load(T v, int64_t) { return to_acc(v); }
  __device__ static Acc combine(Acc a, Acc b) {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    return (kMin ? b < a : b > a) ? b : a;
  }
  __device__ static Acc shuffle_down(Acc a, int delta, int width) { return shfl_down(a, delta, width); }
  __device__ static Out finish(Acc a, int64_t) { return from_acc<T>(a); }
};

template <typename A>
struct ValueIndex {
  A value;
  int64_t index;
};

// Argmax (kMin = false) or argmin: the best (value, index) pair, where NaN beats every number,
// a strictly better value beats a worse one, and among equals the lower index wins. That
// order does not depend on which operand comes first, so any combine tree gives the CPU's
// sequential answer exactly.
template <typename T, bool kMin>
struct ArgExtremumPolicy {
  using In = T;
  using Value = acc_t<T>;
  using Acc = ValueIndex<Value>;
  using Out = int64_t;
  __device__ static Acc identity() {
    return Acc{kMin ? Extremes<Value>::highest() : Extremes<Value>::lowest(), INT64_MAX};
  }
  __device__ static Acc load(T v, int64_t i) { return Acc{to_acc(v), i}; }
  __device__ static Acc combine(Acc a, Acc b) {
    const bool a_nan = is_nan(a.value), b_nan = is_nan(b.value);
    if (a_nan || b_nan) {
      if (a_nan && b_nan) return a.index <= b.index ? a : b;
      return a_nan ? a : b;
    }
    if (kMin ? b.value < a.value : b.value > a.value) return b;
    if (kMin ? a.value < b.value : a.value > b.value) return a;
    return a.index <= b.index ? a : b;
  }
  __device__ static Acc shuffle_down(Acc a, int delta, int width) {
    return Acc{shfl_down(a.value, delta, width), shfl_down(a.index, delta, width)};
  }
  __device__ static Out finish(Acc a, int64_t) { return a.index; }
};

}  // namespace tandem::cuda::reduce_detail
