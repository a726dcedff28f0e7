// The packed layout of 8-bit min/max block compression (Backend::compress_min_max_uint8), shared
// by the CPU and CUDA twins and by engine/strategies/bagua/min_max_uint8.h, its user.
//
// n values in blocks of `block` elements (the last one may be shorter) pack into
//   [ header of block 0 | header of block 1 | ... | code 0 | code 1 | ... | code n-1 ]
// a header being the block's min and max as two float32 (8 bytes, native byte order; both NaN
// for a block holding a NaN or an infinity), a code one uint8 per value. The headers start at
// byte 0 and are 4-byte aligned when the buffer is.
#pragma once
#include <cstdint>

namespace tandem {

constexpr int64_t kMinMaxUint8HeaderBytes = 8;

// Blocks of `block` elements covering n values; block >= 1.
constexpr int64_t min_max_uint8_blocks(int64_t n, int64_t block) { return n == 0 ? 0 : (n + block - 1) / block; }

// Bytes of the packed form of n values in blocks of `block`.
constexpr int64_t min_max_uint8_bytes(int64_t n, int64_t block) {
  return min_max_uint8_blocks(n, block) * kMinMaxUint8HeaderBytes + n;
}

}  // namespace tandem
