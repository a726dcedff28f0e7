// One warp-wide tensor-core product, D[16 x 8] += A[16 x 16] B[16 x 8], half or bfloat16 inputs,
// float accumulators: PTX's mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}. Each of the 32 lanes
// holds fixed elements of each operand (PTX ISA, "Matrix Fragments for mma.m16n8k16"); with
// g = lane / 4 and t = lane % 4:
//   A (4 words, two 16-bit values each, the lower-indexed column in the low half):
//     a[0] = A[g][2t, 2t+1]   a[1] = A[g+8][2t, 2t+1]   a[2] = A[g][2t+8, 2t+9]   a[3] = A[g+8][2t+8, 2t+9]
//   B (2 words, the lower-indexed row in the low half):
//     b[0] = B[2t, 2t+1][g]   b[1] = B[2t+8, 2t+9][g]
//   C and D (4 floats):
//     c[0] = C[g][2t]  c[1] = C[g][2t+1]  c[2] = C[g+8][2t]  c[3] = C[g+8][2t+1]
// So a C fragment of columns [16c, 16c+8) and the one of [16c+8, 16c+16) are, packed in pairs, the
// A fragment of columns [16c, 16c+16): a product's result feeds the next product from registers.
// Every lane of the warp calls it with the same T. Under nvcc on sm_80 and later it is the one
// instruction; elsewhere (the emulation build, which compiles kernels as C++) the same arithmetic
// gathers each lane's rows and columns from the other lanes by shuffles, in float, in k order.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/kernel_utils.cuh"

namespace tandem::cuda {

// The PTX type of a 16-bit input and its raw-bits struct (convertible both ways on host and device).
template <typename T> struct MmaType;
template <> struct MmaType<__nv_bfloat16> {
  static constexpr bool kBf16 = true;
  using Raw = __nv_bfloat16_raw;
};
template <> struct MmaType<__half> {
  static constexpr bool kBf16 = false;
  using Raw = __half_raw;
};

// Two values of T in one 32-bit word, `lo` in the low half.
template <typename T>
__device__ __forceinline__ uint32_t pack_pair(T lo, T hi) {
  const typename MmaType<T>::Raw l = lo, h = hi;
  return uint32_t(l.x) | (uint32_t(h.x) << 16);
}
template <typename T>
__device__ __forceinline__ uint32_t pack_floats(float lo, float hi) {
  return pack_pair<T>(from_acc<T>(lo), from_acc<T>(hi));
}
template <typename T>
__device__ __forceinline__ float unpack_half(uint32_t word, int which) {
  typename MmaType<T>::Raw raw;
  raw.x = uint16_t(which ? word >> 16 : word & 0xffffu);
  return to_acc(T(raw));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (MmaType<T>::kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}
#else
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  const int lane = int(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  for (int word = 0; word < 8; ++word) {  // k = 2 word + half: A's words 0/2, B's words 0/1
    const int owner = word % 4, high = word / 4;
    // Rows g and g + 8 of A at k = 2 word, 2 word + 1 (lane 4 g + owner holds them).
    const uint32_t a_lo = __shfl_sync(0xffffffffu, a[high ? 2 : 0], 4 * g + owner);
    const uint32_t a_hi = __shfl_sync(0xffffffffu, a[high ? 3 : 1], 4 * g + owner);
    // Columns 2t and 2t + 1 of B at the same k (lanes 4 (2t) + owner and 4 (2t + 1) + owner).
    const uint32_t b_0 = __shfl_sync(0xffffffffu, b[high], 4 * (2 * t) + owner);
    const uint32_t b_1 = __shfl_sync(0xffffffffu, b[high], 4 * (2 * t + 1) + owner);
    for (int half = 0; half < 2; ++half) {
      const float x0 = unpack_half<T>(a_lo, half), x1 = unpack_half<T>(a_hi, half);
      const float y0 = unpack_half<T>(b_0, half), y1 = unpack_half<T>(b_1, half);
      c[0] += x0 * y0;
      c[1] += x0 * y1;
      c[2] += x1 * y0;
      c[3] += x1 * y1;
    }
  }
}
#endif

}  // namespace tandem::cuda
