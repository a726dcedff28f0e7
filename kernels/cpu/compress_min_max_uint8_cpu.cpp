// 8-bit min/max block compression (Backend::compress_min_max_uint8 and its decompression), the
// reference for the CUDA twin (kernels/cuda/compress_min_max_uint8_cuda.cu), which must give the
// same bytes and the same decoded floats. Blocks one after another, elements in index order.
//
// Every step is a single IEEE operation in double (subtract, divide, multiply, round to the
// nearest even integer) or an explicit fma, so both compilers produce the same bits whatever
// they contract: the only multiply-add (the decode) is written as std::fma here and fma on the
// device. Headers are copied byte-wise (memcpy), as the packed buffer need not be aligned.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/min_max_uint8_layout.h"

namespace tandem {

void CpuBackend::compress_min_max_uint8(const TensorView& x, int64_t block, const TensorView& packed) {
  const float* values = x.ptr<const float>();
  const int64_t n = x.numel(), blocks = min_max_uint8_blocks(n, block);
  uint8_t* out = packed.ptr<uint8_t>();
  uint8_t* codes = out + blocks * kMinMaxUint8HeaderBytes;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * block, count = std::min(block, n - first);
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    bool finite = true;
    for (int64_t i = first; i < first + count; ++i) {
      const float v = values[i];
      if (!std::isfinite(v)) finite = false;
      if (v < lo) lo = v;  // strict: the first of equal extremes (+0, -0) stays
      if (hi < v) hi = v;
    }
    if (!finite) lo = hi = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(out + b * kMinMaxUint8HeaderBytes, &lo, sizeof lo);
    std::memcpy(out + b * kMinMaxUint8HeaderBytes + sizeof lo, &hi, sizeof hi);
    // The range in double: max - min of two finite floats may overflow float32.
    const double range = finite ? double(hi) - double(lo) : 0.0;
    const double inverse = range > 0.0 ? 255.0 / range : 0.0;
    for (int64_t i = first; i < first + count; ++i) {
      const double code = finite ? std::nearbyint((double(values[i]) - double(lo)) * inverse) : 0.0;
      codes[i] = static_cast<uint8_t>(std::clamp(code, 0.0, 255.0));
    }
  }
}

void CpuBackend::decompress_min_max_uint8(const TensorView& packed, int64_t block, const TensorView& out) {
  const int64_t n = out.numel(), blocks = min_max_uint8_blocks(n, block);
  const uint8_t* in = packed.ptr<const uint8_t>();
  const uint8_t* codes = in + blocks * kMinMaxUint8HeaderBytes;
  float* o = out.ptr<float>();
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * block, count = std::min(block, n - first);
    float lo, hi;
    std::memcpy(&lo, in + b * kMinMaxUint8HeaderBytes, sizeof lo);
    std::memcpy(&hi, in + b * kMinMaxUint8HeaderBytes + sizeof lo, sizeof hi);
    const double scale = (double(hi) - double(lo)) / 255.0;  // NaN for a flagged block
    for (int64_t i = first; i < first + count; ++i) {
      o[i] = codes[i] == 255 ? hi : static_cast<float>(std::fma(double(codes[i]), scale, double(lo)));
    }
  }
}

}  // namespace tandem
