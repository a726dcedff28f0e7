#include "engine/strategies/bagua/min_max_uint8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/autograd/grad_mode.h"
#include "engine/core/error.h"

namespace tandem::bagua {

namespace {

constexpr int64_t kHeaderBytes = 2 * sizeof(float);

int64_t block_count(int64_t n, int64_t block) { return n == 0 ? 0 : (n + block - 1) / block; }

void check_block(int64_t block) {
  TANDEM_CHECK(block >= 1, ValueError, "min/max uint8 compression: block must be >= 1 element, got " +
                                           std::to_string(block));
}

}  // namespace

int64_t compressed_bytes(int64_t numel, int64_t block) {
  check_block(block);
  TANDEM_CHECK(numel >= 0, ValueError, "min/max uint8 compression: negative element count");
  return block_count(numel, block) * kHeaderBytes + numel;
}

void compress_min_max_uint8(const float* values, int64_t n, int64_t block, uint8_t* out) {
  check_block(block);
  const int64_t blocks = block_count(n, block);
  uint8_t* codes = out + blocks * kHeaderBytes;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * block, count = std::min(block, n - first);
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    bool finite = true;
    for (int64_t i = first; i < first + count; ++i) {
      if (!std::isfinite(values[i])) finite = false;
      lo = std::min(lo, values[i]);
      hi = std::max(hi, values[i]);
    }
    if (!finite) lo = hi = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(out + b * kHeaderBytes, &lo, sizeof lo);
    std::memcpy(out + b * kHeaderBytes + sizeof lo, &hi, sizeof hi);
    // The range in double: max - min of two finite floats may overflow float32.
    const double range = finite ? double(hi) - double(lo) : 0.0;
    const double inverse = range > 0.0 ? 255.0 / range : 0.0;
    for (int64_t i = first; i < first + count; ++i) {
      const double code = finite ? std::nearbyint((double(values[i]) - double(lo)) * inverse) : 0.0;
      codes[i] = static_cast<uint8_t>(std::clamp(code, 0.0, 255.0));
    }
  }
}

void decompress_min_max_uint8(const uint8_t* packed, int64_t n, int64_t block, float* out) {
  check_block(block);
  const int64_t blocks = block_count(n, block);
  const uint8_t* codes = packed + blocks * kHeaderBytes;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * block, count = std::min(block, n - first);
    float lo, hi;
    std::memcpy(&lo, packed + b * kHeaderBytes, sizeof lo);
    std::memcpy(&hi, packed + b * kHeaderBytes + sizeof lo, sizeof hi);
    const double scale = (double(hi) - double(lo)) / 255.0;  // NaN for a flagged block
    for (int64_t i = first; i < first + count; ++i) {
      out[i] = codes[i] == 255 ? hi : static_cast<float>(double(lo) + double(codes[i]) * scale);
    }
  }
}

Tensor compress_min_max_uint8(const Tensor& values, int64_t block) {
  TANDEM_CHECK(values.dtype() == DType::Float32 || values.dtype() == DType::Float64, DTypeError,
               std::string("min/max uint8 compression takes float32 or float64 values, got ") + dtype_name(values.dtype()));
  NoGradGuard no_grad;
  const Tensor host = values.detach().to(Device::cpu()).to(DType::Float32).contiguous();
  Tensor packed = Tensor::zeros({compressed_bytes(host.numel(), block)}, DType::UInt8, Device::cpu());
  compress_min_max_uint8(static_cast<const float*>(host.raw_data()), host.numel(), block,
                         static_cast<uint8_t*>(packed.raw_data()));
  return packed;
}

void decompress_min_max_uint8(const Tensor& packed, const Tensor& out, int64_t block) {
  TANDEM_CHECK(out.dtype() == DType::Float32 || out.dtype() == DType::Float64, DTypeError,
               std::string("min/max uint8 decompression writes float32 or float64, got ") + dtype_name(out.dtype()));
  TANDEM_CHECK(packed.dtype() == DType::UInt8 && packed.numel() == compressed_bytes(out.numel(), block), ValueError,
               "min/max uint8 decompression: the packed tensor has " + std::to_string(packed.numel()) + " " +
                   dtype_name(packed.dtype()) + " elements, but " + std::to_string(out.numel()) +
                   " values in blocks of " + std::to_string(block) + " need " +
                   std::to_string(compressed_bytes(out.numel(), block)) + " uint8");
  NoGradGuard no_grad;
  const Tensor host_packed = packed.to(Device::cpu()).contiguous();
  Tensor decoded = Tensor::zeros(out.shape(), DType::Float32, Device::cpu());
  decompress_min_max_uint8(static_cast<const uint8_t*>(host_packed.raw_data()), out.numel(), block,
                           static_cast<float*>(decoded.raw_data()));
  Tensor target = out;
  target.copy_(decoded);
}

}  // namespace tandem::bagua
