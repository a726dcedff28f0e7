// The device side of CUDA for kernels compiled by g++ in the emulation build
// (-DTANDEM_CUDA=EMULATE). CMake force-includes this header (-include) into every
// kernels/cuda/*.cu, so the kernel source is the one nvcc compiles, unchanged:
//   - __shared__ is `static thread_local` (one copy per running block, see block_runtime.h);
//     it must be defined before the CUDA headers, which keep a definition they find;
//   - __global__/__device__/__host__ are empty (the CUDA headers do that for host compilers);
//   - threadIdx/blockIdx/blockDim/gridDim read the running fiber's coordinates;
//   - barriers, warp collectives, atomics and the intrinsics our kernels call are below.
// Types (dim3, __half, __nv_bfloat16 and their host-side conversions) come from the real
// CUDA headers.
#pragma once

#define __shared__ static thread_local
#define __launch_bounds__(...)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/emulation/block_runtime.h"

#define threadIdx (::tandem::emu::t_thread->thread_idx)
#define blockIdx (::tandem::emu::t_block->block_idx)
#define blockDim (::tandem::emu::t_block->block_dim)
#define gridDim (::tandem::emu::t_block->grid_dim)
constexpr int warpSize = 32;

// ---------------------------------------------------------------- barriers and warp collectives
inline void __syncthreads() { ::tandem::emu::block_barrier(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::tandem::emu::warp_collective(::tandem::emu::WarpOp::Sync, mask, 0, 0, 32);
}
inline unsigned __activemask() { return ::tandem::emu::active_lanes(); }

namespace tandem::emu {
template <typename T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "warp collectives move values of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <typename T>
T from_bits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}
template <typename T>
T shuffle(WarpOp op, unsigned mask, T v, int arg, int width) {
  return from_bits<T>(warp_collective(op, mask, to_bits(v), arg, width));
}
}  // namespace tandem::emu

template <typename T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = warpSize) {
  return ::tandem::emu::shuffle(::tandem::emu::WarpOp::ShuffleIndex, mask, v, src_lane, width);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  return ::tandem::emu::shuffle(::tandem::emu::WarpOp::ShuffleUp, mask, v, int(delta), width);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  return ::tandem::emu::shuffle(::tandem::emu::WarpOp::ShuffleDown, mask, v, int(delta), width);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize) {
  return ::tandem::emu::shuffle(::tandem::emu::WarpOp::ShuffleXor, mask, v, lane_mask, width);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return unsigned(::tandem::emu::warp_collective(::tandem::emu::WarpOp::Ballot, mask, predicate != 0, 0, 32));
}
inline int __any_sync(unsigned mask, int predicate) {
  return int(::tandem::emu::warp_collective(::tandem::emu::WarpOp::Any, mask, predicate != 0, 0, 32));
}
inline int __all_sync(unsigned mask, int predicate) {
  return int(::tandem::emu::warp_collective(::tandem::emu::WarpOp::All, mask, predicate != 0, 0, 32));
}
template <typename T>
unsigned __match_any_sync(unsigned mask, T v) {
  return unsigned(::tandem::emu::warp_collective(::tandem::emu::WarpOp::MatchAny, mask,
                                                 ::tandem::emu::to_bits(v), 0, 32));
}

// ---------------------------------------------------------------- atomics (device-wide: std::atomic_ref)
template <typename T>
T atomicAdd(T* address, T v) {
  return std::atomic_ref<T>(*address).fetch_add(v);
}
template <typename T>
T atomicSub(T* address, T v) {
  return std::atomic_ref<T>(*address).fetch_sub(v);
}
template <typename T>
T atomicExch(T* address, T v) {
  return std::atomic_ref<T>(*address).exchange(v);
}
template <typename T>
T atomicCAS(T* address, T expected, T desired) {
  std::atomic_ref<T>(*address).compare_exchange_strong(expected, desired);
  return expected;  // the old value, whether or not it was replaced
}
namespace tandem::emu {
// Stores v while replaces(old, v); returns the old value (CUDA's atomicMax/atomicMin).
template <typename T, typename Replaces>
T atomic_replace_if(T* address, T v, Replaces replaces) {
  std::atomic_ref<T> a(*address);
  T old = a.load();
  while (replaces(old, v) && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
}  // namespace tandem::emu
template <typename T>
T atomicMax(T* address, T v) {
  return ::tandem::emu::atomic_replace_if(address, v, [](T old, T x) { return old < x; });
}
template <typename T>
T atomicMin(T* address, T v) {
  return ::tandem::emu::atomic_replace_if(address, v, [](T old, T x) { return x < old; });
}

// ---------------------------------------------------------------- intrinsics
template <typename T>
T __ldg(const T* p) {
  return *p;
}
inline float __int_as_float(int v) { return ::tandem::emu::from_bits<float>(uint32_t(v)); }
inline int __float_as_int(float v) { return int(uint32_t(::tandem::emu::to_bits(v))); }
inline float __uint_as_float(unsigned v) { return ::tandem::emu::from_bits<float>(v); }
inline unsigned __float_as_uint(float v) { return unsigned(::tandem::emu::to_bits(v)); }
inline double __longlong_as_double(long long v) { return ::tandem::emu::from_bits<double>(uint64_t(v)); }
inline long long __double_as_longlong(double v) { return (long long)::tandem::emu::to_bits(v); }
inline int __ffs(int v) { return __builtin_ffs(v); }
inline int __ffsll(long long v) { return __builtin_ffsll(v); }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz(unsigned(v)); }
inline int __clzll(long long v) { return v == 0 ? 64 : __builtin_clzll((unsigned long long)v); }
inline unsigned __umulhi(unsigned a, unsigned b) { return unsigned((uint64_t(a) * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x != x ? 0.0f : (x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x)); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
// Device code calls min/max unqualified on integers (CUDA declares them globally).
template <typename A, typename B>
constexpr auto min(A a, B b) -> std::common_type_t<A, B> {
  return b < a ? b : a;
}
template <typename A, typename B>
constexpr auto max(A a, B b) -> std::common_type_t<A, B> {
  return a < b ? b : a;
}
