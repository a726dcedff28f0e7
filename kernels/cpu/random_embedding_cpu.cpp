// Random fills and dropout from the Philox stream (bit-identical to the CUDA backend's), and
// embedding gather/scatter.
#include <cstring>

#include "base/philox.h"
#include "kernels/cpu/cpu_backend.h"

namespace tandem {

void CpuBackend::random_fill(const TensorView& out, uint64_t seed, uint64_t offset, bool normal, double a,
                             double b) {
  cpu::dispatch_float(out.dtype, "random_fill", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    T* o = out.ptr<T>();
    const int64_t n = out.numel();
    cpu::parallel_loop(n, n >= cpu::kParallelGrain, [&](int64_t i) {
      if (normal) {
        o[i] = T(a + b * double(philox::normal(seed, offset, uint64_t(i))));
      } else {
        o[i] = T(a + (b - a) * double(philox::uniform01(philox::bits(seed, offset, uint64_t(i)))));
      }
    });
  });
}

void CpuBackend::dropout(const TensorView& x, double p, uint64_t seed, uint64_t offset, const TensorView& y,
                         const TensorView& mask) {
  cpu::dispatch_float(x.dtype, "dropout", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const T* xp = x.ptr<T>();
    T* yp = y.ptr<T>();
    uint8_t* mp = mask.ptr<uint8_t>();
    const int64_t n = x.numel();
    const T scale = T(1.0 / (1.0 - p));
    const float pf = float(p);
    cpu::parallel_loop(n, n >= cpu::kParallelGrain, [&](int64_t i) {
      const uint8_t keep = philox::uniform01(philox::bits(seed, offset, uint64_t(i))) >= pf;
      mp[i] = keep;
      yp[i] = keep ? xp[i] * scale : T(0);
    });
  });
}

void CpuBackend::embedding(const TensorView& weight, const TensorView& idx, const TensorView& y) {
  const int64_t n = idx.numel(), dim = weight.shape[1];
  const size_t row_bytes = size_t(dim) * dtype_size(weight.dtype);
  const int64_t* ip = idx.ptr<int64_t>();
  const char* w = static_cast<const char*>(weight.data);
  char* o = static_cast<char*>(y.data);
  cpu::parallel_loop(n, n * dim >= cpu::kParallelGrain, [&](int64_t i) {
    std::memcpy(o + size_t(i) * row_bytes, w + size_t(ip[i]) * row_bytes, row_bytes);
  });
}

void CpuBackend::embedding_backward(const TensorView& gy, const TensorView& idx, const TensorView& gw) {
  cpu::dispatch_float(gy.dtype, "embedding_backward", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const int64_t n = idx.numel(), dim = gw.shape[1];
    const int64_t* ip = idx.ptr<int64_t>();
    const T* g = gy.ptr<T>();
    T* w = gw.ptr<T>();
    std::fill(w, w + gw.numel(), T(0));
    for (int64_t i = 0; i < n; ++i)  // serial: repeated indices accumulate in index order
      for (int64_t j = 0; j < dim; ++j) w[ip[i] * dim + j] += g[i * dim + j];
  });
}

}  // namespace tandem
