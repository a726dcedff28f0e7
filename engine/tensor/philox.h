// Counter-based Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
// A random number is a pure function of (key, counter), so the CPU and the CUDA backend
// produce the same stream: element i of a draw at (seed, offset) uses the block
// counter = {lo32(offset + i/4), hi32(offset + i/4), 0, 0}, key = {lo32(seed), hi32(seed)},
// and takes lane i % 4. A draw of n elements advances the offset by ceil(n / 4).
// Written host/device so kernels/cuda can include it unchanged.
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define TANDEM_HD __host__ __device__ __forceinline__
#else
#define TANDEM_HD inline
#endif

namespace tandem::philox {

struct U32x4 { uint32_t v[4]; };

TANDEM_HD void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = uint64_t(a) * uint64_t(b);
  hi = uint32_t(p >> 32);
  lo = uint32_t(p);
}

// Ten rounds of Philox4x32 on counter c with key k.
TANDEM_HD U32x4 philox4x32_10(U32x4 c, uint32_t k0, uint32_t k1) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  constexpr uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(M0, c.v[0], hi0, lo0);
    mulhilo(M1, c.v[2], hi1, lo1);
    c = U32x4{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
    k0 += W0;
    k1 += W1;
  }
  return c;
}

// The 32 random bits for element i of the draw starting at block `offset`.
TANDEM_HD uint32_t bits(uint64_t seed, uint64_t offset, uint64_t i) {
  uint64_t block = offset + i / 4;
  U32x4 c{{uint32_t(block), uint32_t(block >> 32), 0u, 0u}};
  U32x4 r = philox4x32_10(c, uint32_t(seed), uint32_t(seed >> 32));
  return r.v[i % 4];
}

// Uniform in [0, 1) with 24 random bits (exactly representable in float32).
TANDEM_HD float uniform01(uint32_t b) { return float(b >> 8) * (1.0f / 16777216.0f); }

// Standard normal for element i: Box-Muller on the lane pair (2j, 2j+1) of i's block;
// even lanes take the cosine branch, odd lanes the sine branch.
TANDEM_HD float normal(uint64_t seed, uint64_t offset, uint64_t i) {
  uint64_t pair = i & ~uint64_t(1);
  float u1 = uniform01(bits(seed, offset, pair));
  float u2 = uniform01(bits(seed, offset, pair + 1));
  float radius = sqrtf(-2.0f * logf(1.0f - u1));  // 1 - u1 is in (0, 1]: log is finite
  float theta = 6.283185307179586f * u2;
  return (i & 1) ? radius * sinf(theta) : radius * cosf(theta);
}

}  // namespace tandem::philox
