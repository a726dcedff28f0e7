// BatchNorm in train and eval mode: running statistics updated as PyTorch's
// (running = 0.9 * running + 0.1 * batch, unbiased variance), num_batches_tracked counted,
// eval normalizing with the running statistics.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "engine/nn/nn.h"
#include "tensor/ops/ops.h"

using namespace tandem;
using namespace tandem::nn;

namespace {
// [N=4, C=2]: channel 0 = 1, 2, 3, 6 (mean 3, biased var 3.5, unbiased 14/3);
// channel 1 = -1, -1, 1, 1 (mean 0, biased var 1, unbiased 4/3).
Tensor batch() { return Tensor::from_vector(std::vector<float>{1, -1, 2, -1, 3, 1, 6, 1}, {4, 2}); }
}  // namespace

TEST(BatchNorm, TrainingUpdatesRunningStatsAndCounts) {
  BatchNorm1d bn(2);
  Tensor y = bn(batch());
  auto rm = bn.running_mean.to_vector<float>(), rv = bn.running_var.to_vector<float>();
  EXPECT_EQ(rm[0], 0.1f * 3.0f);  // 0.9 * 0 + 0.1 * batch mean, exactly
  EXPECT_EQ(rm[1], 0.0f);
  EXPECT_NEAR(rv[0], 0.9 + 0.1 * 14.0 / 3.0, 1e-5);
  EXPECT_NEAR(rv[1], 0.9 + 0.1 * 4.0 / 3.0, 1e-5);
  EXPECT_EQ(bn.num_batches_tracked.item(), 1.0);
  // Training output uses the batch's biased variance.
  auto v = y.to_vector<float>();
  EXPECT_NEAR(v[0], (1.0 - 3.0) / std::sqrt(3.5 + 1e-5), 1e-5);
  EXPECT_NEAR(v[1], -1.0 / std::sqrt(1.0 + 1e-5), 1e-5);
  bn(batch());
  EXPECT_EQ(bn.num_batches_tracked.item(), 2.0);
  EXPECT_NEAR(bn.running_mean.to_vector<float>()[0], 0.9 * 0.3 + 0.3, 1e-6);
}

TEST(BatchNorm, EvalUsesRunningStatsAndLeavesThemAlone) {
  BatchNorm1d bn(2);
  bn(batch());
  bn.eval();
  const auto rm = bn.running_mean.to_vector<float>(), rv = bn.running_var.to_vector<float>();
  auto v = bn(batch()).to_vector<float>();
  for (int n = 0; n < 4; ++n)
    for (int c = 0; c < 2; ++c) {
      const double x = batch().to_vector<float>()[size_t(n * 2 + c)];
      EXPECT_NEAR(v[size_t(n * 2 + c)], (x - rm[size_t(c)]) / std::sqrt(rv[size_t(c)] + 1e-5), 1e-5);
    }
  EXPECT_EQ(bn.running_mean.to_vector<float>(), rm);
  EXPECT_EQ(bn.num_batches_tracked.item(), 1.0);
}

TEST(BatchNorm, CumulativeAverageWithoutMomentum) {
  BatchNorm1d bn(2, 1e-5, std::nullopt);
  bn(batch());                        // factor 1: running_mean = 3
  bn(affine(batch(), 1.0, 2.0));      // factor 1/2: (3 + 5) / 2 = 4
  EXPECT_NEAR(bn.running_mean.to_vector<float>()[0], 4.0, 1e-6);
  EXPECT_NEAR(bn.running_mean.to_vector<float>()[1], 1.0, 1e-6);
}

TEST(BatchNorm, WithoutRunningStatsAlwaysUsesTheBatch) {
  BatchNorm1d bn(2, 1e-5, 0.1, /*affine=*/false, /*track_running_stats=*/false);
  EXPECT_TRUE(bn.state_dict().empty());
  bn.eval();
  auto v = bn(batch()).to_vector<float>();
  EXPECT_NEAR(v[0], (1.0 - 3.0) / std::sqrt(3.5 + 1e-5), 1e-5);
}

TEST(BatchNorm, TwoDimensionalAndThreeDimensionalInputs) {
  BatchNorm2d bn2(3);
  // Channel c holds the value c + n*0.5 + h: the batch mean per channel is c + 0.25 + 0.5.
  std::vector<float> v;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < 2; ++h)
        for (int w = 0; w < 2; ++w) v.push_back(float(c) + 0.5f * float(n) + float(h));
  bn2(Tensor::from_vector(v, {2, 3, 2, 2}));
  auto rm = bn2.running_mean.to_vector<float>();
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(rm[size_t(c)], 0.1 * (c + 0.75), 1e-6);
  // unbiased variance over 8 values: 0.5n + h has values {0,0,1,1,0.5,0.5,1.5,1.5}, mean 0.75.
  double ss = 4 * 0.75 * 0.75 + 4 * 0.25 * 0.25;
  EXPECT_NEAR(bn2.running_var.to_vector<float>()[0], 0.9 + 0.1 * ss / 7.0, 1e-5);

  BatchNorm1d bn1(2);
  EXPECT_EQ(bn1(Tensor::ones({4, 2, 5})).shape(), (Shape{4, 2, 5}));
  EXPECT_THROW(bn1(Tensor::ones({4, 3})), ShapeError);          // wrong channel count
  EXPECT_THROW(bn1(Tensor::ones({4, 2, 2, 2})), ShapeError);    // 4-D into BatchNorm1d
  EXPECT_THROW(bn2(Tensor::ones({4, 3, 2})), ShapeError);       // 3-D into BatchNorm2d
  EXPECT_THROW(BatchNorm2d(0), ValueError);
  EXPECT_THROW(BatchNorm2d(2, 1e-5, 1.5), ValueError);
}

TEST(BatchNorm, GradientsReachWeightAndBias) {
  BatchNorm1d bn(2);
  Tensor loss = sum(bn(batch()) * Tensor::from_vector(std::vector<float>{1, 2}, {2}));
  loss.backward();
  ASSERT_TRUE(bn.weight.grad().defined());
  // d loss / d bias_c = N * coefficient_c
  EXPECT_NEAR(bn.bias.grad().to_vector<float>()[0], 4.0f, 1e-5);
  EXPECT_NEAR(bn.bias.grad().to_vector<float>()[1], 8.0f, 1e-5);
}
