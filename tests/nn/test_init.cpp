// Default initializations as PyTorch's, checked by their statistics, and seed reproducibility.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/error.h"
#include "engine/nn/nn.h"
#include "tensor/generator.h"

using namespace tandem;
using namespace tandem::nn;

namespace {
struct Stats {
  double mean, var, min, max;
};
Stats stats_of(const Tensor& t) {
  auto v = t.to_vector<double>();
  const double n = double(v.size());
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return {mean, ss / n, *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
}
}  // namespace

TEST(Init, LinearWeightIsUniformOverOneOverSqrtFanIn) {
  manual_seed(0);
  Linear fc(1000, 1000);
  const double bound = 1.0 / std::sqrt(1000.0);
  Stats w = stats_of(fc.weight);
  // U(-b, b) has mean 0 and variance b^2 / 3; with 1e6 draws the sample mean's std is ~2e-5.
  EXPECT_NEAR(w.mean, 0.0, 1e-4);
  EXPECT_NEAR(w.var, 1.0 / (3.0 * 1000.0), 0.01 / (3.0 * 1000.0));
  EXPECT_GE(w.min, -bound);
  EXPECT_LE(w.max, bound);
  EXPECT_LT(w.min, -0.999 * bound);  // the whole range is used
  EXPECT_GT(w.max, 0.999 * bound);
  Stats b = stats_of(fc.bias);
  EXPECT_GE(b.min, -bound);
  EXPECT_LE(b.max, bound);
  EXPECT_NEAR(b.mean, 0.0, 3 * bound / std::sqrt(3.0 * 1000.0));
  EXPECT_EQ(fc.weight.shape(), (Shape{1000, 1000}));
  EXPECT_TRUE(fc.weight.requires_grad());
  EXPECT_TRUE(fc.weight.is_leaf());
}

TEST(Init, Conv2dFanInCountsTheKernel) {
  manual_seed(1);
  Conv2d conv(16, 32, 3);
  const double fan_in = 16 * 3 * 3, bound = 1.0 / std::sqrt(fan_in);
  EXPECT_EQ(conv.weight.shape(), (Shape{32, 16, 3, 3}));
  Stats w = stats_of(conv.weight);
  EXPECT_GE(w.min, -bound);
  EXPECT_LE(w.max, bound);
  EXPECT_NEAR(w.var, 1.0 / (3.0 * fan_in), 0.05 / (3.0 * fan_in));  // 4608 draws
  Stats b = stats_of(conv.bias);
  EXPECT_GE(b.min, -bound);
  EXPECT_LE(b.max, bound);
}

TEST(Init, EmbeddingIsStandardNormal) {
  manual_seed(2);
  Embedding emb(1000, 100);
  Stats s = stats_of(emb.weight);
  EXPECT_NEAR(s.mean, 0.0, 0.005);  // 1e5 draws: std of the mean ~0.003
  EXPECT_NEAR(s.var, 1.0, 0.02);
  EXPECT_LT(s.min, -3.5);
  EXPECT_GT(s.max, 3.5);
}

TEST(Init, NormsStartAtOnesAndZeros) {
  BatchNorm2d bn(3);
  LayerNorm ln({4});
  EXPECT_EQ(bn.weight.to_vector<double>(), std::vector<double>(3, 1.0));
  EXPECT_EQ(bn.bias.to_vector<double>(), std::vector<double>(3, 0.0));
  EXPECT_EQ(bn.running_mean.to_vector<double>(), std::vector<double>(3, 0.0));
  EXPECT_EQ(bn.running_var.to_vector<double>(), std::vector<double>(3, 1.0));
  EXPECT_EQ(bn.num_batches_tracked.dtype(), DType::Int64);
  EXPECT_EQ(bn.num_batches_tracked.item(), 0.0);
  EXPECT_EQ(ln.weight.to_vector<double>(), std::vector<double>(4, 1.0));
  EXPECT_EQ(ln.bias.to_vector<double>(), std::vector<double>(4, 0.0));
}

TEST(Init, SameSeedSameModelOtherSeedOtherModel) {
  auto build = [](uint64_t seed) {
    manual_seed(seed);
    return std::make_shared<Sequential>(std::make_shared<Linear>(8, 16), std::make_shared<Conv2d>(2, 3, 3),
                                        std::make_shared<Embedding>(10, 4));
  };
  auto a = build(42), b = build(42), c = build(43);
  auto pa = a->parameters(), pb = b->parameters(), pc = c->parameters();
  ASSERT_EQ(pa.size(), 5u);
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].to_vector<float>(), pb[i].to_vector<float>()) << "parameter " << i;
    EXPECT_NE(pa[i].to_vector<float>(), pc[i].to_vector<float>()) << "parameter " << i;
  }
}

TEST(Init, FunctionsFillInPlaceWithoutAGraph) {
  manual_seed(3);
  Tensor w = Tensor::zeros({200, 300});
  w.requires_grad_(true);
  init::xavier_uniform_(w, 2.0);
  const double xb = 2.0 * std::sqrt(6.0 / 500.0);
  Stats s = stats_of(w);
  EXPECT_GE(s.min, -xb);
  EXPECT_LE(s.max, xb);
  EXPECT_NEAR(s.var, xb * xb / 3.0, 0.03 * xb * xb / 3.0);
  EXPECT_TRUE(w.is_leaf());

  init::kaiming_uniform_(w, 0.0, init::FanMode::FanIn, "relu");
  const double kb = std::sqrt(2.0) * std::sqrt(3.0 / 300.0);
  s = stats_of(w);
  EXPECT_GE(s.min, -kb);
  EXPECT_LE(s.max, kb);
  EXPECT_GT(s.max, 0.99 * kb);

  init::kaiming_normal_(w, 0.0, init::FanMode::FanOut, "relu");
  EXPECT_NEAR(stats_of(w).var, 2.0 / 200.0, 0.05 * 2.0 / 200.0);

  init::normal_(w, 3.0, 0.5);
  s = stats_of(w);
  EXPECT_NEAR(s.mean, 3.0, 0.01);
  EXPECT_NEAR(s.var, 0.25, 0.01);

  init::uniform_(w, 2.0, 5.0);
  s = stats_of(w);
  EXPECT_GE(s.min, 2.0);
  EXPECT_LT(s.max, 5.0);
  EXPECT_NEAR(s.mean, 3.5, 0.02);

  init::zeros_(w);
  EXPECT_EQ(stats_of(w).max, 0.0);
  init::ones_(w);
  EXPECT_EQ(stats_of(w).min, 1.0);

  Tensor d = Tensor::zeros({50, 60}, DType::Float64);
  init::uniform_(d, -1, 1);
  EXPECT_EQ(d.dtype(), DType::Float64);
  EXPECT_LT(stats_of(d).min, -0.9);
}

TEST(Init, GainsAndFans) {
  EXPECT_DOUBLE_EQ(init::calculate_gain("linear"), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain("tanh"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(1.0 / 3.0));
  EXPECT_THROW(init::calculate_gain("swish"), ValueError);
  auto [fi, fo] = init::calculate_fan_in_and_fan_out(Tensor::zeros({8, 4, 3, 5}));
  EXPECT_EQ(fi, 4 * 15);
  EXPECT_EQ(fo, 8 * 15);
  EXPECT_THROW(init::calculate_fan_in_and_fan_out(Tensor::zeros({8})), ValueError);
  EXPECT_THROW(init::uniform_(Tensor::zeros({2}, DType::Int64)), DTypeError);
  EXPECT_THROW(init::uniform_(Tensor::zeros({2}), 1.0, 0.0), ValueError);
}
