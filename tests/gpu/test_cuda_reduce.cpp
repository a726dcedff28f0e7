// CUDA reductions (sum, mean, amax, amin, argmax, argmin) against the CPU reference (ctest label
// `gpu`; skips without a device). test_cuda_backend.cpp already compares every op in float32 at
// small random shapes; this file adds what that misses:
//   - every launch plan of kernels/cuda/reduce_cuda.cu (r <= 1, lane groups of 1/4/32 per row,
//     block per row, rows split across blocks, thread per column output, column tiles with and
//     without splitting r), > 65535 rows, misaligned rows, and one 10^7-element sum;
//   - float64 (tight), float16 and bfloat16 (against the CPU's float32 result on the same rounded
//     inputs, tolerance from the dtype's rounding), int64 / int32 / uint8 / bool where the CPU
//     takes them; float32 on every plan, the other dtypes on every third or fourth plan in turn;
//   - NaN propagation and ties (first index) for max/min/argmax/argmin, also across chunks;
//   - empty and length-one dimensions.
// Float32 sums: the GPU accumulates in float in a tree order, the CPU in double, so sums are
// compared with a tolerance of 1e-5 * sum |x| (float64: 1e-12 * sum |x|).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "gpu_test_skip.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_query.h"
#include "reduce_test_util.h"
#include "tensor/ops/ops.h"

namespace tandem::testing::reduce_family {
namespace {

// sum over i of |x[o, i, j]| for every output (o, j).
std::vector<double> abs_sums(const std::vector<double>& x, int64_t outer, int64_t r, int64_t inner) {
  std::vector<double> s(size_t(outer * inner), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < inner; ++j) s[size_t(o * inner + j)] += std::abs(x[size_t((o * r + i) * inner + j)]);
  return s;
}

// [outer, r, inner] shapes, one or more per launch plan of reduce_cuda.cu, each just past the
// thresholds that choose its plan (kTargetBlocks / 2 = 1056 rows or column blocks before r is
// split, kTargetThreads = 540,672 outputs for a thread per output), so the suite stays small
// under the sanitizers.
struct Plan {
  int64_t outer, r, inner;
  const char* path;
};
const std::vector<Plan>& plans() {
  static const std::vector<Plan> p = {
      {1, 1, 1, "r == 1"}, {5, 1, 7, "r == 1 columns"},
      {1000, 3, 1, "a lane per row"}, {70001, 5, 1, "a lane per row, > 65535 rows"},
      {3001, 37, 1, "4 lanes per row, misaligned rows"}, {65, 1000, 1, "a warp per row"},
      {1100, 1029, 1, "a block per row, misaligned rows"}, {3, 100003, 1, "rows split across blocks"},
      {13600, 3, 40, "thread per column output"}, {272000, 4, 2, "thread per column output, short r"},
      {1100, 50, 7, "column tiles"}, {1, 100000, 3, "column tiles, r split"},
      {2, 1000, 300, "two column tiles, r split"}, {1, 400, 1000, "four column tiles, r split"}};
  return p;
}
// The dtypes a test runs on plan `index`: float32 on every plan, the other float types in turn
// (each still meets several plans of every kind), so the emulated kernels run 2 passes a plan
// instead of 4 under the sanitizers. Integer dtypes: one a plan, in turn.
std::vector<DType> float_dtypes_for(size_t index) {
  static const DType others[] = {DType::Float64, DType::Float16, DType::BFloat16};
  return {DType::Float32, others[index % 3]};
}
DType integer_dtype_for(size_t index) {
  static const DType all[] = {DType::Int64, DType::Int32, DType::UInt8, DType::Bool};
  return all[index % 4];
}

std::string label(const Plan& p, DType dt, const char* op) {
  return std::string(op) + " " + dtype_name(dt) + " [" + std::to_string(p.outer) + ", " + std::to_string(p.r) + ", " +
         std::to_string(p.inner) + "] (" + p.path + ")";
}

// ---------------------------------------------------------------- reductions
TEST(CudaReduce, SumAndMeanMatchCpuOnEveryLaunchPlan) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  for (size_t i = 0; i < plans().size(); ++i)
    for (DType dt : float_dtypes_for(i)) {
      const Plan& p = plans()[i];
      const Shape shape{p.outer, p.r, p.inner};
      Tensor x = make_input(normal_values(p.outer * p.r * p.inner, rng), shape, dt);
      Tensor ref_in = reference_input(x), xg = x.to(kGpu);
      const std::vector<double> scale = abs_sums(ref_in.to_vector<double>(), p.outer, p.r, p.inner);
      const double acc = dt == DType::Float64 ? 1e-12 : 1e-5, out = 2 * unit_roundoff(dt);
      for (bool is_mean : {false, true}) {
        Tensor got = is_mean ? mean(xg, {1}) : sum(xg, {1});
        Tensor want = is_mean ? mean(ref_in, {1}) : sum(ref_in, {1});
        EXPECT_EQ(got.dtype(), dt);
        const std::vector<double> w = want.to_vector<double>();
        const double div = is_mean ? double(p.r) : 1.0;
        expect_close(got.to_vector<double>(), w, [&](size_t k) { return out * std::abs(w[k]) + acc * scale[k] / div; },
                     label(p, dt, is_mean ? "mean" : "sum"));
      }
    }
}

TEST(CudaReduce, TenMillionFloatSumAgainstDoubleAccumulation) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(12);
  const int64_t n = 10'000'000;
  std::vector<float> v = normal_values(n + 1, rng, 1.0f, 0.5f);
  Tensor full = Tensor::from_vector(v, {n + 1}), full_gpu = full.to(kGpu);
  // From element 0 (aligned) and from element 1 (4 bytes off 16-byte alignment, on both devices).
  double abs_sum = 0;  // of all n + 1 values: a bound for both views
  for (float e : v) abs_sum += std::abs(double(e));
  for (int64_t offset : {0, 1}) {
    Tensor x = full.narrow(0, offset, n), xg = full_gpu.narrow(0, offset, n);
    EXPECT_NEAR(sum(xg).item(), sum(x).item(), 1e-5 * abs_sum) << "offset " << offset;
    EXPECT_NEAR(mean(xg).item(), mean(x).item(), 1e-5 * abs_sum / double(n)) << "offset " << offset;
  }
}

// Small-integer values (many ties) with NaNs: at a varying position, at position 0, throughout
// one output, and in a late chunk of the split plans.
std::vector<float> ties_and_nans(const Plan& p, std::mt19937& rng, bool with_nans) {
  std::uniform_int_distribution<int> small(-3, 3);
  std::vector<float> v(size_t(p.outer * p.r * p.inner));
  for (float& x : v) x = float(small(rng));
  if (!with_nans) return v;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t outputs = p.outer * p.inner;
  for (int64_t k = 0; k < outputs; ++k) {
    const int64_t o = k / p.inner, j = k % p.inner;
    auto at = [&](int64_t i) -> float& { return v[size_t((o * p.r + i) * p.inner + j)]; };
    if (k % 5 == 1) at((k * 7919 + 3) % p.r) = nan;
    if (k % 5 == 2) at(0) = nan;
    if (k % 5 == 3 && p.r > 2) { at(p.r - 1) = nan; at(p.r / 2) = nan; }
    if (k == outputs - 1 && outputs > 3)
      for (int64_t i = 0; i < p.r; ++i) at(i) = nan;
  }
  return v;
}

TEST(CudaReduce, MaxMinArgmaxArgminFollowTheCpusNaNAndTieRules) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  for (size_t i = 0; i < plans().size(); ++i) {
    const Plan& p = plans()[i];
    const Shape shape{p.outer, p.r, p.inner};
    for (DType dt : float_dtypes_for(i)) {
      Tensor x = make_input(ties_and_nans(p, rng, true), shape, dt), ref_in = reference_input(x), xg = x.to(kGpu);
      expect_equal(amax(xg, {1}), amax(ref_in, {1}).to(dt), label(p, dt, "amax"));
      expect_equal(amin(xg, {1}), amin(ref_in, {1}).to(dt), label(p, dt, "amin"));
      expect_equal(argmax(xg, 1), argmax(ref_in, 1), label(p, dt, "argmax"));
      expect_equal(argmin(xg, 1), argmin(ref_in, 1), label(p, dt, "argmin"));
    }
    {
      const DType dt = integer_dtype_for(i);
      std::vector<float> v = ties_and_nans(p, rng, false);
      for (float& e : v) e = dt == DType::Bool ? float(e > 0) : dt == DType::UInt8 ? e + 3 : e * 1e6f;
      Tensor x = make_input(v, shape, dt), xg = x.to(kGpu);
      expect_equal(argmax(xg, 1), argmax(x, 1), label(p, dt, "argmax"));
      expect_equal(argmin(xg, 1), argmin(x, 1), label(p, dt, "argmin"));
      if (dt == DType::Int64) {
        expect_equal(amax(xg, {1}), amax(x, {1}), label(p, dt, "amax"));
        expect_equal(amin(xg, {1}), amin(x, {1}), label(p, dt, "amin"));
        expect_equal(sum(xg, {1}), sum(x, {1}), label(p, dt, "sum"));
      }
    }
  }
}

TEST(CudaReduce, FirstExtremeAndFirstNaNAcrossChunksOfOneLongReduction) {
  SKIP_WITHOUT_GPU();
  const int64_t n = 3'000'000;  // one row split across many blocks
  std::vector<float> v(size_t(n), 0.0f);
  v[0] = 1.0f;  // so the first minimum is at 1
  v[2'500'000] = 5.0f;
  v[2'900'000] = 5.0f;
  Tensor x = Tensor::from_vector(v, {n}).to(kGpu);
  EXPECT_EQ(argmax(x, 0).item(), 2'500'000);
  EXPECT_EQ(argmin(x, 0).item(), 1);
  EXPECT_EQ(max(x).item(), 5.0);
  v[2'950'000] = std::numeric_limits<float>::quiet_NaN();
  v[2'700'000] = std::numeric_limits<float>::quiet_NaN();
  x = Tensor::from_vector(v, {n}).to(kGpu);
  EXPECT_EQ(argmax(x, 0).item(), 2'700'000);
  EXPECT_EQ(argmin(x, 0).item(), 2'700'000);
  EXPECT_TRUE(std::isnan(max(x).item()));
  EXPECT_TRUE(std::isnan(min(x).item()));
  // Columns with r split: [300000, 2], reduced over dim 0.
  std::vector<float> c(600'000, 0.0f);
  c[2 * 200'000] = 7.0f;
  c[2 * 250'000] = 7.0f;
  c[2 * 100 + 1] = std::numeric_limits<float>::quiet_NaN();
  c[2 * 299'999 + 1] = std::numeric_limits<float>::quiet_NaN();
  Tensor cols = Tensor::from_vector(c, {300'000, 2}).to(kGpu);
  EXPECT_EQ(argmax(cols, 0).to_vector<int64_t>(), (std::vector<int64_t>{200'000, 100}));
  std::vector<float> m = amax(cols, {0}).to_vector<float>();
  EXPECT_EQ(m[0], 7.0f);
  EXPECT_TRUE(std::isnan(m[1]));
}

TEST(CudaReduce, EmptyAndLengthOneDimensions) {
  SKIP_WITHOUT_GPU();
  Tensor none_out = Tensor::zeros({0, 5}, DType::Float32, kGpu);  // outer = 0
  EXPECT_EQ(sum(none_out, {1}).shape(), Shape{0});
  EXPECT_EQ(amax(none_out, {1}).shape(), Shape{0});
  EXPECT_EQ(argmax(none_out, 1).shape(), Shape{0});
  Tensor none_in = Tensor::zeros({5, 0}, DType::Float32, kGpu);  // r = 0
  EXPECT_EQ(sum(none_in, {1}).to_vector<float>(), std::vector<float>(5, 0.0f));
  for (float m : mean(none_in, {1}).to_vector<float>()) EXPECT_TRUE(std::isnan(m));
  EXPECT_THROW(amax(none_in, {1}), ShapeError);
  EXPECT_THROW(argmax(none_in, 1), ShapeError);
  EXPECT_EQ(sum(Tensor::zeros({0}, DType::Float32, kGpu)).item(), 0.0);
  // The kernels' own r == 0 path (the front end fills these itself): sum 0, mean NaN.
  for (DType dt : {DType::Float32, DType::Float16}) {
    Tensor x = Tensor::zeros({2, 0, 3}, dt, kGpu), out = Tensor::empty({2, 3}, dt, kGpu);
    cuda_backend().reduce(ReduceOp::Sum, x.view_desc(), 2, 0, 3, out.view_desc());
    EXPECT_EQ(out.to_vector<float>(), std::vector<float>(6, 0.0f));
    cuda_backend().reduce(ReduceOp::Mean, x.view_desc(), 2, 0, 3, out.view_desc());
    for (float m : out.to_vector<float>()) EXPECT_TRUE(std::isnan(m));
    EXPECT_THROW(cuda_backend().reduce(ReduceOp::Max, x.view_desc(), 2, 0, 3, out.view_desc()), ShapeError);
  }
  // Dtypes the CPU rejects are rejected here too.
  Tensor i32 = Tensor::zeros({4, 3}, DType::Int32, kGpu), o32 = Tensor::empty({4}, DType::Int32, kGpu);
  EXPECT_THROW(cuda_backend().reduce(ReduceOp::Max, i32.view_desc(), 4, 3, 1, o32.view_desc()), DTypeError);
  Tensor i64 = Tensor::zeros({4, 3}, DType::Int64, kGpu), o64 = Tensor::empty({4}, DType::Int64, kGpu);
  EXPECT_THROW(cuda_backend().reduce(ReduceOp::Mean, i64.view_desc(), 4, 3, 1, o64.view_desc()), DTypeError);
}

}  // namespace
}  // namespace tandem::testing::reduce_family
