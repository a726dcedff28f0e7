// Helpers for the CUDA family tests (test_cuda_norm.cpp, test_cuda_optim.cpp, test_cuda_memory.cpp, ...):
// random host tensors, device copies, dtype rounding and element-wise comparisons that
// report the first offending index.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_skip.h"
#include "kernels/backend.h"
#include "kernels/cuda/device_query.h"
#include "tensor/tensor.h"

namespace tandem::testing {

// The side of the float32 GEMMs a test queues to keep a stream busy, so that what it queues next
// runs long after the host moved on. The emulator runs queued work at once, on the calling thread
// (kernels/cuda/emulation/emulated_runtime.cpp), so there nothing can wait behind it and small
// GEMMs do: 4096^3 ones cost minutes on the CPU, most of all in the sanitized build.
constexpr int64_t long_work_size(int64_t on_a_gpu) { return TANDEM_CUDA_EMULATION ? 256 : on_a_gpu; }

inline const Device kGpu = Device::cuda(0);
inline Backend& gpu_backend() { return backend_for(kGpu); }
inline Backend& cpu_backend() { return backend_for(Device::cpu()); }

// float32 tensor of mean + std * N(0, 1) values on the CPU.
inline Tensor randn_host(const Shape& shape, std::mt19937& rng, double mean = 0.0, double stddev = 1.0) {
  std::normal_distribution<float> dist{float(mean), float(stddev)};
  std::vector<float> v(size_t(shape_numel(shape)));
  for (float& e : v) e = dist(rng);
  return Tensor::from_vector(v, shape);
}
inline Tensor uniform_host(const Shape& shape, std::mt19937& rng, double lo, double hi) {
  std::uniform_real_distribution<float> dist{float(lo), float(hi)};
  std::vector<float> v(size_t(shape_numel(shape)));
  for (float& e : v) e = dist(rng);
  return Tensor::from_vector(v, shape);
}

// The float32 values of `t` after rounding to `dtype` (what a half-precision kernel reads).
inline Tensor rounded_to(const Tensor& t, DType dtype) { return t.to(dtype).to(DType::Float32); }

// Unit roundoff of a dtype: half the distance from 1 to the next value.
inline double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::Float16: return std::ldexp(1.0, -11);
    case DType::BFloat16: return std::ldexp(1.0, -8);
    case DType::Float64: return std::ldexp(1.0, -53);
    default: return std::ldexp(1.0, -24);
  }
}

inline std::vector<double> host_values(const Tensor& t) { return t.to_vector<double>(); }

// Every |got - want| <= abs_tol + rel_tol * |want|; NaN only where want is NaN.
inline void expect_close(const Tensor& got, const Tensor& want, double abs_tol, double rel_tol, const std::string& what) {
  const std::vector<double> g = host_values(got), w = host_values(want);
  ASSERT_EQ(g.size(), w.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i])) {
      ASSERT_TRUE(std::isnan(g[i])) << what << " [" << i << "]: got " << g[i] << ", want NaN";
      continue;
    }
    ASSERT_LE(std::fabs(g[i] - w[i]), abs_tol + rel_tol * std::fabs(w[i]))
        << what << " [" << i << "]: got " << g[i] << ", want " << w[i];
  }
}

inline double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : host_values(t)) m = std::fmax(m, std::fabs(v));
  return m;
}

// Same bytes, element by element (float32 and float64 compare their bit patterns, so -0 and
// +0 differ).
template <typename T>
inline void expect_bit_identical(const Tensor& got, const Tensor& want, const std::string& what) {
  const std::vector<T> g = got.to_vector<T>(), w = want.to_vector<T>();
  ASSERT_EQ(g.size(), w.size()) << what;
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_EQ(std::memcmp(&g[i], &w[i], sizeof(T)), 0) << what << " [" << i << "]: got " << g[i] << ", want " << w[i];
}

}  // namespace tandem::testing
