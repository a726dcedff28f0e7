// CUDA softmax / log_softmax and the NLL rows behind cross_entropy against the CPU reference
// (ctest label `gpu`; skips without a device), beyond the float32 op table of
// test_cuda_backend.cpp:
//   - softmax rows of length 1, 10, 1000, 1024, 1025, 5000 and 33000 with -inf, NaN and large
//     offsets; backward through the backend;
//   - cross_entropy with ignored rows, label smoothing, all rows ignored, spatial targets, and
//     out-of-range targets; empty tensors.
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
// About 150,000 elements a case: the launch plan follows the row length alone (grid-stride
// loops over rows), so more rows add time, not coverage.
int64_t rows_for(int64_t cols) { return std::clamp<int64_t>(150'000 / cols, 8, 4096); }

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
}  // namespace tandem::testing::reduce_family
