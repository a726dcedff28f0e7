#include "engine/strategies/bagua/min_max_uint8.h"

#include "base/error.h"
#include "kernels/backend.h"
#include "kernels/min_max_uint8_layout.h"
#include "tensor/autograd/grad_mode.h"

namespace tandem::bagua {

namespace {

void check_block(int64_t block) {
  TANDEM_CHECK(block >= 1, ValueError, "min/max uint8 compression: block must be >= 1 element, got " +
                                           std::to_string(block));
}

TensorView host_view(const void* data, DType dtype, int64_t n) {
  return TensorView{const_cast<void*>(data), dtype, {n}, {1}};
}

}  // namespace

int64_t compressed_bytes(int64_t numel, int64_t block) {
  check_block(block);
  TANDEM_CHECK(numel >= 0, ValueError, "min/max uint8 compression: negative element count");
  return min_max_uint8_bytes(numel, block);
}

void compress_min_max_uint8(const float* values, int64_t n, int64_t block, uint8_t* out) {
  const int64_t bytes = compressed_bytes(n, block);
  backend_for(DeviceType::CPU).compress_min_max_uint8(host_view(values, DType::Float32, n), block,
                                                      host_view(out, DType::UInt8, bytes));
}

void decompress_min_max_uint8(const uint8_t* packed, int64_t n, int64_t block, float* out) {
  const int64_t bytes = compressed_bytes(n, block);
  backend_for(DeviceType::CPU).decompress_min_max_uint8(host_view(packed, DType::UInt8, bytes), block,
                                                        host_view(out, DType::Float32, n));
}

Tensor compress_min_max_uint8(const Tensor& values, int64_t block) {
  TANDEM_CHECK(values.dtype() == DType::Float32 || values.dtype() == DType::Float64, DTypeError,
               std::string("min/max uint8 compression takes float32 or float64 values, got ") +
                   dtype_name(values.dtype()));
  const int64_t bytes = compressed_bytes(values.numel(), block);
  NoGradGuard no_grad;
  const Tensor x = values.detach().to(DType::Float32).contiguous();
  Tensor packed = Tensor::empty({bytes}, DType::UInt8, x.device());
  backend_for(x.device().type).compress_min_max_uint8(x.view_desc(), block, packed.view_desc());
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
  const Tensor codes = packed.to(out.device()).contiguous();
  const bool in_place = out.dtype() == DType::Float32 && out.is_contiguous();
  Tensor decoded = in_place ? out : Tensor::empty(out.shape(), DType::Float32, out.device());
  backend_for(out.device().type).decompress_min_max_uint8(codes.view_desc(), block, decoded.view_desc());
  if (!in_place) {
    Tensor target = out;
    target.copy_(decoded);
  }
}

}  // namespace tandem::bagua
