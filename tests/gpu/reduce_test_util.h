// Helpers shared by the CUDA reduction and softmax/loss tests (test_cuda_reduce.cpp,
// test_cuda_softmax_loss.cpp): inputs rounded once to the dtype under test, what the CPU
// reference computes on, and element-wise comparisons with a per-element tolerance.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tandem::testing::reduce_family {

inline const Device kGpu = Device::cuda(0);
inline const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Relative rounding error of one store in `dt`, and of the GPU's accumulation type for `dt`.
inline double unit_roundoff(DType dt) {
  switch (dt) {
    case DType::Float64: return 0x1p-53;
    case DType::Float16: return 0x1p-11;
    case DType::BFloat16: return 0x1p-8;
    default: return 0x1p-24;
  }
}
inline double acc_roundoff(DType dt) { return dt == DType::Float64 ? 0x1p-53 : 0x1p-24; }

// A CPU tensor of `dt` from float values (rounded once for half types).
inline Tensor make_input(const std::vector<float>& v, const Shape& shape, DType dt) {
  return Tensor::from_vector(v, shape).to(dt);
}
inline std::vector<float> normal_values(int64_t n, std::mt19937& rng, float scale = 1.0f, float offset = 0.0f) {
  std::normal_distribution<float> dist(offset, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}
// What the CPU reference computes on: half types as float32 (exactly the values they hold).
inline Tensor reference_input(const Tensor& x) {
  return x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16 ? x.to(DType::Float32) : x;
}

// |got - want| <= tol(k) for every k; NaN matches NaN, equal infinities match.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                  const std::function<double(size_t)>& tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    const bool ok = (std::isnan(got[k]) && std::isnan(want[k])) || got[k] == want[k] ||
                    std::abs(got[k] - want[k]) <= tol(k);
    if (!ok && ++bad <= 5)
      ADD_FAILURE() << what << " [" << k << "]: got " << got[k] << ", want " << want[k] << " (tol " << tol(k) << ")";
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " differ";
}
inline void expect_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  EXPECT_EQ(got.shape(), want.shape()) << what;
  expect_close(got.to_vector<double>(), want.to_vector<double>(), [](size_t) { return 0.0; }, what);
}

}  // namespace tandem::testing::reduce_family
