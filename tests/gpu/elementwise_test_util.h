// Helpers shared by the CUDA elementwise tests (test_cuda_elementwise*.cpp): moving tensors,
// raw bytes, operand layouts (contiguous, transposed, strided, misaligned views of the same
// values on both devices) and ulp distances in the half types.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_skip.h"
#include "kernels/backend.h"
#include "kernels/cuda/device_query.h"
#include "tensor/ops/ops.h"

// In their own namespace: test_cuda_backend links every tests/gpu/test_cuda_*.cpp, and other
// families' helper headers define similar names in tandem::testing.
namespace tandem::testing::elementwise {

inline Device gpu() { return Device::cuda(0); }

// The tensor's elements in row-major order as raw bytes (copied to the host).
inline std::vector<uint8_t> bytes_of(const Tensor& t) {
  Tensor h = t.to(Device::cpu()).contiguous();
  std::vector<uint8_t> out(size_t(h.numel()) * dtype_size(h.dtype()));
  if (!out.empty()) std::memcpy(out.data(), h.raw_data(), out.size());
  return out;
}

// A CPU tensor of `dtype` holding the given raw bytes.
inline Tensor from_bytes(const void* data, DType dtype, const Shape& shape) {
  Tensor t = Tensor::empty(shape, dtype);
  if (t.numel()) std::memcpy(t.raw_data(), data, size_t(t.numel()) * dtype_size(dtype));
  return t;
}

// Normal(0, scale) values (or uniform [0.5, 2) when positive), in float32 on the CPU.
inline Tensor random_values(const Shape& shape, std::mt19937& rng, bool positive = false, double scale = 2.0) {
  std::vector<float> v(size_t(shape_numel(shape)));
  std::normal_distribution<float> normal(0.0f, float(scale));
  std::uniform_real_distribution<float> uniform(0.5f, 2.0f);
  for (float& x : v) x = positive ? uniform(rng) : normal(rng);
  return Tensor::from_vector(v, shape);
}

// An operand layout: how a tensor of a given logical shape is laid out in memory. `make`
// allocates a base holding `values` (CPU, contiguous) arranged for the layout and returns the
// view; applying the same view to the base moved to the GPU gives the same logical tensor.
enum class Layout { Contiguous, Transposed, Strided, Misaligned };

inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Strided: return "strided";
    case Layout::Misaligned: return "misaligned";
  }
  return "?";
}

struct LaidOut {
  Tensor cpu;  // the view on the CPU
  Tensor dev;  // the same view on the GPU
};

// Transposed needs >= 2 dims (otherwise it falls back to contiguous).
inline LaidOut lay_out(const Tensor& values, Layout layout, Device device) {
  const Shape shape = values.shape();
  const int nd = int(shape.size());
  std::function<Tensor(const Tensor&)> view;
  Tensor base;
  switch (nd >= 2 || layout != Layout::Transposed ? layout : Layout::Contiguous) {
    case Layout::Contiguous:
      base = values.contiguous();
      view = [](const Tensor& b) { return b; };
      break;
    case Layout::Transposed:  // memory order has the last two dims swapped
      base = values.transpose(nd - 2, nd - 1).contiguous();
      view = [nd](const Tensor& b) { return b.transpose(nd - 2, nd - 1); };
      break;
    case Layout::Strided: {  // every other element of a doubled last dim
      if (nd == 0) {
        base = values.contiguous();
        view = [](const Tensor& b) { return b; };
        break;
      }
      Shape wide = shape;
      wide.back() *= 2;
      base = Tensor::zeros(wide, values.dtype());
      base.slice(nd - 1, 0, wide.back(), 2).copy_(values);
      view = [nd, wide](const Tensor& b) { return b.slice(nd - 1, 0, wide.back(), 2); };
      break;
    }
    case Layout::Misaligned: {  // contiguous, one element past an aligned start
      const int64_t n = values.numel();
      base = Tensor::zeros({n + 1}, values.dtype());
      base.narrow(0, 1, n).copy_(values.reshape({n}));
      view = [n, shape](const Tensor& b) { return b.narrow(0, 1, n).view(shape); };
      break;
    }
  }
  return {view(base), view(base.to(device))};
}

// Distance in units in the last place between two float16 or bfloat16 values given as bits:
// 0 for equal values, for +0 vs -0 and for two NaNs; huge for a NaN against a number. Adjacent
// finite values are 1 apart, the largest finite value and infinity too.
inline int64_t ulp_distance16(uint16_t a, uint16_t b, DType dtype) {
  const uint16_t inf_bits = dtype == DType::BFloat16 ? 0x7f80 : 0x7c00;
  auto is_nan = [&](uint16_t h) { return (h & 0x7fff) > inf_bits; };
  if (is_nan(a) || is_nan(b)) return is_nan(a) && is_nan(b) ? 0 : INT64_MAX;
  auto ordered = [](uint16_t h) { return (h & 0x8000) ? -int64_t(h & 0x7fff) : int64_t(h); };
  return std::llabs(ordered(a) - ordered(b));
}

}  // namespace tandem::testing::elementwise
