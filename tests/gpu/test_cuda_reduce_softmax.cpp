// CUDA reductions (sum, mean, amax, amin, argmax, argmin), softmax / log_softmax and the NLL
// rows behind cross_entropy, against the CPU reference (ctest label `gpu`; skips without a
// device). test_cuda_backend.cpp already compares every op in float32 at small random shapes;
// this file adds what that misses:
//   - every launch plan of kernels/cuda/reduce_cuda.cu (r <= 1, lane groups of 1/4/32 per row,
//     block per row, rows split across blocks, thread per column output, column tiles with and
//     without splitting r), > 65535 rows, misaligned rows, and one 10^7-element sum;
//   - float64 (tight), float16 and bfloat16 (against the CPU's float32 result on the same rounded
//     inputs, tolerance from the dtype's rounding), int64 / int32 / uint8 / bool where the CPU
//     takes them;
//   - NaN propagation and ties (first index) for max/min/argmax/argmin, also across chunks;
//   - softmax rows of length 1, 10, 1000, 1024, 1025, 5000 and 33000 with -inf, NaN and large
//     offsets; backward through the backend;
//   - cross_entropy with ignored rows, label smoothing, all rows ignored, spatial targets, and
//     out-of-range targets; empty tensors.
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

#include "gpu_test_skip.h"
#include "engine/core/error.h"
#include "engine/ops/ops.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_query.h"

namespace tandem::testing {
namespace {

const Device kGpu = Device::cuda(0);
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Relative rounding error of one store in `dt`, and of the GPU's accumulation type for `dt`.
double unit_roundoff(DType dt) {
  switch (dt) {
    case DType::Float64: return 0x1p-53;
    case DType::Float16: return 0x1p-11;
    case DType::BFloat16: return 0x1p-8;
    default: return 0x1p-24;
  }
}
double acc_roundoff(DType dt) { return dt == DType::Float64 ? 0x1p-53 : 0x1p-24; }

// A CPU tensor of `dt` from float values (rounded once for half types).
Tensor make_input(const std::vector<float>& v, const Shape& shape, DType dt) {
  return Tensor::from_vector(v, shape).to(dt);
}
std::vector<float> normal_values(int64_t n, std::mt19937& rng, float scale = 1.0f, float offset = 0.0f) {
  std::normal_distribution<float> dist(offset, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}
// What the CPU reference computes on: half types as float32 (exactly the values they hold).
Tensor reference_input(const Tensor& x) {
  return x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16 ? x.to(DType::Float32) : x;
}

// |got - want| <= tol(k) for every k; NaN matches NaN, equal infinities match.
void expect_close(const std::vector<double>& got, const std::vector<double>& want,
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
void expect_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  EXPECT_EQ(got.shape(), want.shape()) << what;
  expect_close(got.to_vector<double>(), want.to_vector<double>(), [](size_t) { return 0.0; }, what);
}

// sum over i of |x[o, i, j]| for every output (o, j).
std::vector<double> abs_sums(const std::vector<double>& x, int64_t outer, int64_t r, int64_t inner) {
  std::vector<double> s(size_t(outer * inner), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < inner; ++j) s[size_t(o * inner + j)] += std::abs(x[size_t((o * r + i) * inner + j)]);
  return s;
}

// [outer, r, inner] shapes, one or more per launch plan of reduce_cuda.cu.
struct Plan {
  int64_t outer, r, inner;
  const char* path;
};
const std::vector<Plan>& plans() {
  static const std::vector<Plan> p = {
      {1, 1, 1, "r == 1"}, {5, 1, 7, "r == 1 columns"},
      {1000, 3, 1, "a lane per row"}, {70001, 5, 1, "a lane per row, > 65535 rows"},
      {3001, 37, 1, "4 lanes per row, misaligned rows"}, {513, 1000, 1, "a warp per row"},
      {2000, 1501, 1, "a block per row, misaligned rows"}, {3, 100003, 1, "rows split across blocks"},
      {70000, 3, 40, "thread per column output"}, {300000, 4, 2, "thread per column output, short r"},
      {3000, 50, 7, "column tiles"}, {1, 100000, 3, "column tiles, r split"},
      {2, 5000, 300, "two column tiles, r split"}, {1, 2000, 1000, "four column tiles, r split"}};
  return p;
}
std::string label(const Plan& p, DType dt, const char* op) {
  return std::string(op) + " " + dtype_name(dt) + " [" + std::to_string(p.outer) + ", " + std::to_string(p.r) + ", " +
         std::to_string(p.inner) + "] (" + p.path + ")";
}

// ---------------------------------------------------------------- reductions
TEST(CudaReduce, SumAndMeanMatchCpuOnEveryLaunchPlan) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  for (const Plan& p : plans())
    for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
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
  for (const Plan& p : plans()) {
    const Shape shape{p.outer, p.r, p.inner};
    for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
      Tensor x = make_input(ties_and_nans(p, rng, true), shape, dt), ref_in = reference_input(x), xg = x.to(kGpu);
      expect_equal(amax(xg, {1}), amax(ref_in, {1}).to(dt), label(p, dt, "amax"));
      expect_equal(amin(xg, {1}), amin(ref_in, {1}).to(dt), label(p, dt, "amin"));
      expect_equal(argmax(xg, 1), argmax(ref_in, 1), label(p, dt, "argmax"));
      expect_equal(argmin(xg, 1), argmin(ref_in, 1), label(p, dt, "argmin"));
    }
    for (DType dt : {DType::Int64, DType::Int32, DType::UInt8, DType::Bool}) {
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

// ---------------------------------------------------------------- softmax
const int64_t kRowLengths[] = {1, 10, 1000, 1024, 1025, 5000, 33000};

// rows x cols of normal(0, 3) values; row 0 shifted by +1000, row 1 with -inf at every third
// column, row 2 all -inf, row 3 with one NaN (rows 2 and 3 come out NaN, as on the CPU).
std::vector<float> softmax_rows(int64_t rows, int64_t cols, std::mt19937& rng, bool specials) {
  std::vector<float> v = normal_values(rows * cols, rng, 3.0f);
  if (!specials) return v;
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < cols; ++j) {
    v[size_t(j)] += 1000.0f;
    if (j % 3 == 0) v[size_t(cols + j)] = -inf;
    v[size_t(2 * cols + j)] = -inf;
  }
  v[size_t(3 * cols + cols / 2)] = std::numeric_limits<float>::quiet_NaN();
  return v;
}
int64_t rows_for(int64_t cols) { return std::clamp<int64_t>(1'500'000 / cols, 8, 70'000); }

TEST(CudaSoftmax, ForwardMatchesCpuForShortAndLongRows) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(21);
  for (int64_t cols : kRowLengths)
    for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
      const int64_t rows = rows_for(cols);
      Tensor x = make_input(softmax_rows(rows, cols, rng, true), {rows, cols}, dt), ref_in = reference_input(x);
      const std::vector<double> xv = ref_in.to_vector<double>();
      const double u_out = unit_roundoff(dt), u_acc = acc_roundoff(dt);
      const double floor = dt == DType::Float16 ? 0x1p-24 : 0.0;  // float16's subnormal spacing
      for (bool log : {false, true}) {
        Tensor got = log ? log_softmax(x.to(kGpu), 1) : softmax(x.to(kGpu), 1);
        const std::vector<double> w = (log ? log_softmax(ref_in, 1) : softmax(ref_in, 1)).to_vector<double>();
        const std::string what = std::string(log ? "log_softmax " : "softmax ") + dtype_name(dt) + " rows of " +
                                 std::to_string(cols);
        expect_close(got.to_vector<double>(), w, [&](size_t k) {
          return log ? 4 * u_out * std::abs(w[k]) + 8 * u_acc * (std::abs(xv[k]) + std::abs(w[k])) + 256 * u_acc
                     : (4 * u_out + 128 * u_acc) * std::abs(w[k]) + floor;
        }, what);
      }
    }
}

TEST(CudaSoftmax, BackwardMatchesCpuForShortAndLongRows) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(22);
  Backend& cpu = backend_for(Device::cpu());
  for (int64_t cols : kRowLengths)
    for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16})
      for (bool log : {false, true}) {
        const int64_t rows = rows_for(cols);
        Tensor x = make_input(softmax_rows(rows, cols, rng, false), {rows, cols}, dt).to(kGpu);
        Tensor y = log ? log_softmax(x, 1) : softmax(x, 1);
        Tensor gy = make_input(normal_values(rows * cols, rng), {rows, cols}, dt).to(kGpu);
        Tensor gx = Tensor::empty({rows, cols}, dt, kGpu);
        cuda_backend().softmax_backward(y.view_desc(), gy.view_desc(), rows, cols, gx.view_desc(), log);
        // The reference sees the same (rounded) y and gy.
        Tensor y_ref = reference_input(y.to(Device::cpu())), gy_ref = reference_input(gy.to(Device::cpu()));
        Tensor want = Tensor::empty({rows, cols}, y_ref.dtype());
        cpu.softmax_backward(y_ref.view_desc(), gy_ref.view_desc(), rows, cols, want.view_desc(), log);
        const std::vector<double> yv = y_ref.to_vector<double>(), gv = gy_ref.to_vector<double>(),
                                  w = want.to_vector<double>();
        // Per row: the weight each element gives the row sum s, s itself, and sum |terms|.
        std::vector<double> s(size_t(rows), 0.0), s_abs(size_t(rows), 0.0);
        for (int64_t k = 0; k < rows * cols; ++k) {
          const double term = log ? gv[size_t(k)] : gv[size_t(k)] * yv[size_t(k)];
          s[size_t(k / cols)] += term;
          s_abs[size_t(k / cols)] += std::abs(term);
        }
        const double u_out = unit_roundoff(dt), u_acc = acc_roundoff(dt);
        const double floor = dt == DType::Float16 ? 0x1p-24 : 0.0;  // float16's subnormal spacing
        expect_close(gx.to_vector<double>(), w, [&](size_t k) {
          const double weight = log ? std::exp(yv[k]) : std::abs(yv[k]);
          const size_t row = k / size_t(cols);
          return 4 * u_out * std::abs(w[k]) + 8 * u_acc * (std::abs(gv[k]) + weight * std::abs(s[row])) +
                 256 * u_acc * weight * s_abs[row] + floor;
        }, std::string(log ? "log_softmax" : "softmax") + " backward " + dtype_name(dt) + " rows of " +
               std::to_string(cols));
      }
}

TEST(CudaSoftmax, EmptyTensors) {
  SKIP_WITHOUT_GPU();
  for (const Shape& shape : {Shape{0, 5}, Shape{5, 0}, Shape{0}})
    for (bool log : {false, true}) {
      Tensor x = Tensor::zeros(shape, DType::Float32, kGpu);
      Tensor y = log ? log_softmax(x, -1) : softmax(x, -1);
      EXPECT_EQ(y.shape(), shape);
      EXPECT_EQ(y.numel(), 0);
    }
}

// ---------------------------------------------------------------- cross entropy / NLL
// Targets in [0, classes) with every fifth row set to `ignore`.
Tensor targets_with_ignored(int64_t rows, int64_t classes, int64_t ignore, std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> cls(0, classes - 1);
  std::vector<int64_t> t(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) t[size_t(i)] = i % 5 == 4 ? ignore : cls(rng);
  return Tensor::from_vector(t, {rows});
}

TEST(CudaCrossEntropy, LossAndGradientMatchCpuWithIgnoredRowsAndLabelSmoothing) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(31);
  const int64_t rows = 257, classes = 37;
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16})
    for (int64_t ignore : {int64_t(-100), int64_t(3)})
      for (double ls : {0.0, 0.1, 1.0})
        for (Reduction red : {Reduction::None, Reduction::Sum, Reduction::Mean}) {
          Tensor logits = make_input(normal_values(rows * classes, rng, 2.0f), {rows, classes}, dt);
          Tensor target = targets_with_ignored(rows, classes, ignore, rng);
          Tensor lg = logits.to(kGpu).detach().requires_grad_(), lc = reference_input(logits).detach().requires_grad_();
          Tensor got = cross_entropy(lg, target.to(kGpu), red, ignore, ls);
          Tensor want = cross_entropy(lc, target, red, ignore, ls);
          const std::string what = std::string("cross_entropy ") + dtype_name(dt) + " ignore " +
                                   std::to_string(ignore) + " ls " + std::to_string(ls) + " reduction " +
                                   std::to_string(int(red));
          const double u_out = unit_roundoff(dt), u_acc = acc_roundoff(dt);
          const std::vector<double> w = want.to_vector<double>();
          // Half types: log-probabilities are stored rounded, so a loss is off by up to a few
          // roundings of the largest |logp| (a few times the loss itself).
          expect_close(got.to_vector<double>(), w, [&](size_t k) {
            return (8 * u_out + 64 * u_acc) * (1 + std::abs(w[k]));
          }, what + " loss");
          // Gradients: the backward reads the rounded log_softmax output y; exp(y) * sum(g) then
          // moves by up to |y| exp(y) u |g| <= u |g| / e per element.
          double g_scale = 1.0;
          if (red == Reduction::None) {
            std::vector<float> gv = normal_values(rows, rng);
            for (float e : gv) g_scale = std::max(g_scale, double(std::abs(e)));
            Tensor g = make_input(gv, {rows}, dt);
            got.backward(g.to(kGpu));
            want.backward(reference_input(g));
          } else {
            got.backward();
            want.backward();
          }
          const std::vector<double> gw = lc.grad().to_vector<double>();
          expect_close(lg.grad().to_vector<double>(), gw, [&](size_t k) {
            return 4 * u_out * (std::abs(gw[k]) + g_scale) + 64 * u_acc * (1 + std::abs(gw[k]));
          }, what + " gradient");
        }
}

TEST(CudaCrossEntropy, SpatialTargetsMatchCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(32);
  Tensor logits = Tensor::from_vector(normal_values(2 * 5 * 7 * 9, rng), {2, 5, 7, 9});
  std::vector<int64_t> t(2 * 7 * 9);
  for (size_t i = 0; i < t.size(); ++i) t[i] = i % 11 == 0 ? -100 : int64_t(i % 5);
  Tensor target = Tensor::from_vector(t, {2, 7, 9});
  for (Reduction red : {Reduction::None, Reduction::Mean}) {
    Tensor lg = logits.to(kGpu).detach().requires_grad_(), lc = logits.detach().requires_grad_();
    Tensor got = cross_entropy(lg, target.to(kGpu), red, -100, 0.05), want = cross_entropy(lc, target, red, -100, 0.05);
    EXPECT_EQ(got.shape(), want.shape());
    const std::vector<double> w = want.to_vector<double>();
    expect_close(got.to_vector<double>(), w, [&](size_t k) { return 1e-5 * (1 + std::abs(w[k])); }, "spatial loss");
    (red == Reduction::None ? sum(got) : got).backward();
    (red == Reduction::None ? sum(want) : want).backward();
    const std::vector<double> gw = lc.grad().to_vector<double>();
    expect_close(lg.grad().to_vector<double>(), gw, [&](size_t k) { return 1e-5 * (1 + std::abs(gw[k])); },
                 "spatial gradient");
  }
}

TEST(CudaCrossEntropy, AllRowsIgnoredGivesTheCpusZeroSumAndNaNMean) {
  SKIP_WITHOUT_GPU();
  Tensor logits = Tensor::from_vector(std::vector<float>(24, 0.5f), {6, 4});
  Tensor target = Tensor::full({6}, -100, DType::Int64);
  for (double ls : {0.0, 0.2}) {
    Tensor lg = logits.to(kGpu).detach().requires_grad_();
    Tensor s = cross_entropy(lg, target.to(kGpu), Reduction::Sum, -100, ls);
    EXPECT_EQ(s.item(), cross_entropy(logits, target, Reduction::Sum, -100, ls).item());
    EXPECT_EQ(s.item(), 0.0);
    s.backward();
    EXPECT_EQ(lg.grad().to_vector<float>(), std::vector<float>(24, 0.0f));
    EXPECT_TRUE(std::isnan(cross_entropy(logits.to(kGpu), target.to(kGpu), Reduction::Mean, -100, ls).item()));
    EXPECT_TRUE(std::isnan(cross_entropy(logits, target, Reduction::Mean, -100, ls).item()));  // the CPU agrees
  }
}

TEST(CudaCrossEntropy, OutOfRangeTargetsNeverReadOutOfBounds) {
  SKIP_WITHOUT_GPU();
  Tensor logits = Tensor::from_vector(std::vector<float>{0.f, 1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f, 10.f, 11.f},
                                      {4, 3}, kGpu);
  // The front end checks targets on the host, for the GPU as for the CPU.
  EXPECT_THROW(cross_entropy(logits, Tensor::from_vector<int64_t>({0, 3, 1, 2}, {4}, kGpu)), ValueError);
  EXPECT_THROW(cross_entropy(logits, Tensor::from_vector<int64_t>({0, -1, 1, 2}, {4}, kGpu)), ValueError);
  // A direct backend caller: bad rows get loss NaN, valid 1 and a NaN gradient row; good and
  // ignored rows are exact.
  Tensor logp = log_softmax(logits, 1).detach();
  Tensor target = Tensor::from_vector<int64_t>({2, 3, -7, -100}, {4}, kGpu);
  Tensor loss = Tensor::empty({4}, DType::Float32, kGpu), valid = Tensor::empty({4}, DType::Float32, kGpu);
  cuda_backend().nll_rows(logp.view_desc(), target.view_desc(), -100, 0.3, loss.view_desc(), valid.view_desc());
  const std::vector<float> lp = logp.to_vector<float>(), l = loss.to_vector<float>(), v = valid.to_vector<float>();
  const double row0 = -(1.0 - 0.3) * double(lp[2]) - 0.3 / 3.0 * (double(lp[0]) + double(lp[1]) + double(lp[2]));
  EXPECT_FLOAT_EQ(l[0], float(row0));
  EXPECT_TRUE(std::isnan(l[1]));
  EXPECT_TRUE(std::isnan(l[2]));
  EXPECT_EQ(l[3], 0.0f);
  EXPECT_EQ(v, (std::vector<float>{1, 1, 1, 0}));
  Tensor gloss = Tensor::from_vector(std::vector<float>{2, 1, 1, 1}, {4}, kGpu);
  Tensor glogp = Tensor::empty({4, 3}, DType::Float32, kGpu);
  cuda_backend().nll_rows_backward(gloss.view_desc(), target.view_desc(), -100, 0.3, glogp.view_desc());
  const std::vector<float> g = glogp.to_vector<float>();
  const float smooth = float(-2.0 * 0.3 / 3.0);
  const float hit = smooth + float(-2.0 * (1.0 - 0.3));
  EXPECT_EQ(std::vector<float>(g.begin(), g.begin() + 3), (std::vector<float>{smooth, smooth, hit}));
  for (int k = 3; k < 9; ++k) EXPECT_TRUE(std::isnan(g[size_t(k)])) << k;
  for (int k = 9; k < 12; ++k) EXPECT_EQ(g[size_t(k)], 0.0f) << k;
  cuda_backend().synchronize(0);  // and no asynchronous fault was left behind
}

TEST(CudaCrossEntropy, EmptyBatch) {
  SKIP_WITHOUT_GPU();
  Tensor logits = Tensor::zeros({0, 5}, DType::Float32, kGpu);
  Tensor target = Tensor::zeros({0}, DType::Int64, kGpu);
  EXPECT_EQ(cross_entropy(logits, target, Reduction::None).shape(), Shape{0});
  EXPECT_EQ(cross_entropy(logits, target, Reduction::Sum).item(), 0.0);
}

}  // namespace
}  // namespace tandem::testing
