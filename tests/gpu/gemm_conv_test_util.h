// Helpers shared by the CUDA gemm/linear/conv/pool tests (test_cuda_gemm.cpp, test_cuda_linear.cpp,
// test_cuda_conv_pool.cpp):
// inputs rounded once to the dtype under test, kept as a device copy and as a float64 CPU copy
// of the same rounded values (the reference computes on those), and error measures.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gpu_test_skip.h"
#include "../ops/op_harness.h"
#include "kernels/backend.h"
#include "kernels/cuda/device_query.h"

namespace tandem::testing::gemm_conv {

inline Device gpu() { return Device::cuda(0); }
inline Backend& gpu_backend() { return backend_for(gpu()); }
inline Backend& cpu_backend() { return backend_for(Device::cpu()); }

// Unit roundoff of a dtype (half the distance from 1 to the next value).
inline double unit_roundoff(DType dt) {
  switch (dt) {
    case DType::Float64: return std::ldexp(1.0, -53);
    case DType::Float16: return std::ldexp(1.0, -11);
    case DType::BFloat16: return std::ldexp(1.0, -8);
    default: return std::ldexp(1.0, -24);
  }
}

// Relative error bound of a length-k dot product (GEMM element, column sum) rounded to dt:
// |err| <= tol * sum |a_i b_i| with tol = 2u(output) + 2(k+4)u(accumulator); half types
// accumulate in float. A TF32 product (u = 2^-11) fails the float32 bound.
inline double gemm_tolerance(DType dt, int64_t k) {
  const double u_acc = dt == DType::Float64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
  return 2 * unit_roundoff(dt) + 2 * double(k + 4) * u_acc;
}

// One input: `dev` holds the values rounded to the dtype on the GPU; `ref` the same rounded
// values as float64 on the CPU.
struct Operand {
  Tensor dev, ref;
};
inline Operand operand(const Tensor& values64, DType dt) {
  Tensor rounded = values64.to(dt);
  return {rounded.to(gpu()), rounded.to(DType::Float64)};
}
inline Operand random_operand(const Shape& shape, DType dt, std::mt19937& rng) {
  return operand(randn64(shape, DType::Float64, rng), dt);
}

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// max |got - want| / max(1, max |want|): the error relative to the tensor's scale. NaN in
// either (an unwritten, poisoned element) counts as infinite.
inline double scaled_error(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return INFINITY;
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(got[i] - want[i]);
    if (std::isnan(d)) return INFINITY;
    err = std::max(err, d);
  }
  return err / std::max(1.0, max_abs(want));
}

// Elementwise equality where NaN equals NaN; returns the first mismatch index or -1.
inline int64_t first_mismatch(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
    if (!both_nan && got[i] != want[i]) return int64_t(i);
  }
  return -1;
}

inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> all{DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};
  return all;
}

// Turns TF32 on for a scope and restores the previous setting.
class Tf32Scope {
 public:
  explicit Tf32Scope(bool on) : previous_(allow_tf32()) { set_allow_tf32(on); }
  ~Tf32Scope() { set_allow_tf32(previous_); }
  Tf32Scope(const Tf32Scope&) = delete;
  Tf32Scope& operator=(const Tf32Scope&) = delete;

 private:
  bool previous_;
};

}  // namespace tandem::testing::gemm_conv
