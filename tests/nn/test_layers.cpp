// Layer forwards against hand-computed values, and their argument errors.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "engine/nn/nn.h"
#include "tensor/generator.h"
#include "tensor/ops/ops.h"

using namespace tandem;
using namespace tandem::nn;

namespace {
Tensor f64(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector(v, s); }
}  // namespace

TEST(Linear, ComputesXWTransposePlusB) {
  Linear fc(3, 2, true, DType::Float64);
  fc.weight.detach().copy_(f64({1, 2, 3, -1, 0, 1}, {2, 3}));
  fc.bias.detach().copy_(f64({0.5, -0.5}, {2}));
  Tensor y = fc(f64({1, 1, 1, 2, 0, -1}, {2, 3}));
  // rows: [1+2+3+0.5, -1+0+1-0.5], [2-3+0.5, -2-1-0.5]
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{6.5, -0.5, -0.5, -3.5}));
  EXPECT_THROW(fc(f64({1, 2}, {1, 2})), ShapeError);
  EXPECT_THROW(Linear(0, 2), ValueError);
  Linear no_bias(3, 2, false);
  EXPECT_FALSE(no_bias.bias.defined());
  EXPECT_EQ(no_bias.state_dict().keys(), (std::vector<std::string>{"weight"}));
}

TEST(Conv2d, SumsTheWindowWithOnesWeights) {
  Conv2d conv(1, 1, 2, 1, 0, 1, 1, true, DType::Float64);
  init::ones_(conv.weight);
  init::constant_(conv.bias, 1.0);
  Tensor x = f64({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor y = conv(x);
  EXPECT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{13, 17, 25, 29}));  // window sums + 1
  Conv2d padded(2, 3, {3, 1}, 2, {1, 0});
  EXPECT_EQ(padded.weight.shape(), (Shape{3, 2, 3, 1}));
  EXPECT_EQ(padded(Tensor::zeros({4, 2, 7, 5})).shape(), (Shape{4, 3, 4, 3}));
  EXPECT_THROW(conv(Tensor::zeros({1, 2, 3, 3}, DType::Float64)), ShapeError);
  EXPECT_THROW(conv(Tensor::zeros({1, 3, 3}, DType::Float64)), ShapeError);
  EXPECT_THROW(Conv2d(1, 1, 0), ValueError);
  EXPECT_THROW(Conv2d(2, 2, 3, 1, 0, 1, 2), ValueError);  // groups != 1 not supported yet
}

TEST(Pooling, MaxAndAverage) {
  Tensor x = f64({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {1, 1, 4, 4});
  MaxPool2d maxpool(2);
  AvgPool2d avgpool(2);
  EXPECT_EQ(maxpool(x).to_vector<double>(), (std::vector<double>{6, 8, 14, 16}));
  EXPECT_EQ(avgpool(x).to_vector<double>(), (std::vector<double>{3.5, 5.5, 11.5, 13.5}));
  MaxPool2d strided(3, 1);
  EXPECT_EQ(strided(x).to_vector<double>(), (std::vector<double>{11, 12, 15, 16}));
  EXPECT_EQ(maxpool.stride.h, 2);  // stride defaults to the kernel
  EXPECT_THROW(MaxPool2d(2, 1, 2), ValueError);  // padding over half the kernel
  EXPECT_THROW(maxpool(Tensor::zeros({4, 4})), ShapeError);
}

TEST(LayerNorm, NormalizesEachRow) {
  LayerNorm ln({4}, 1e-5, true, true, DType::Float64);
  Tensor y = ln(f64({1, 2, 3, 4, 10, 10, 10, 14}, {2, 4}));
  auto v = y.to_vector<double>();
  for (int r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (int c = 0; c < 4; ++c) mean += v[size_t(r * 4 + c)] / 4;
    for (int c = 0; c < 4; ++c) var += std::pow(v[size_t(r * 4 + c)] - mean, 2) / 4;
    EXPECT_NEAR(mean, 0.0, 1e-12);
    EXPECT_NEAR(var, 1.0, 1e-4);
  }
  // row 0: (x - 2.5) / sqrt(1.25 + eps)
  EXPECT_NEAR(v[0], -1.5 / std::sqrt(1.25 + 1e-5), 1e-12);
  EXPECT_THROW(LayerNorm(Shape{}), ValueError);
  EXPECT_EQ(LayerNorm({3}, 1e-5, true, false).state_dict().keys(), (std::vector<std::string>{"weight"}));
  EXPECT_TRUE(LayerNorm({3}, 1e-5, false).state_dict().empty());
}

TEST(Dropout, TrainZeroesAndScalesEvalIsIdentity) {
  manual_seed(7);
  Dropout drop(0.5);
  Tensor x = Tensor::ones({10000}, DType::Float64);
  auto v = drop(x).to_vector<double>();
  int zeros = 0;
  for (double e : v) {
    EXPECT_TRUE(e == 0.0 || e == 2.0) << e;
    zeros += e == 0.0;
  }
  EXPECT_NEAR(zeros / 10000.0, 0.5, 0.03);
  drop.eval();
  EXPECT_EQ(drop(x).to_vector<double>(), std::vector<double>(10000, 1.0));
  EXPECT_THROW(Dropout(1.5), ValueError);
  EXPECT_THROW(Dropout(-0.1), ValueError);
}

TEST(Activations, ReluGeluFlatten) {
  Tensor x = f64({-1, 0, 1, 2}, {2, 2});
  EXPECT_EQ(ReLU()(x).to_vector<double>(), (std::vector<double>{0, 0, 1, 2}));
  auto exact = GELU()(x).to_vector<double>();
  EXPECT_NEAR(exact[2], 0.8413447460685429, 1e-12);  // 1 * Phi(1)
  EXPECT_NEAR(exact[0], -0.15865525393145707, 1e-12);
  auto tanh_approx = GELU("tanh")(x).to_vector<double>();
  EXPECT_NEAR(tanh_approx[2], 0.8411919906082768, 1e-12);
  EXPECT_THROW(GELU("fast"), ValueError);
  EXPECT_EQ(Flatten()(Tensor::zeros({2, 3, 4, 5})).shape(), (Shape{2, 60}));
  EXPECT_EQ(Flatten(0, 1)(Tensor::zeros({2, 3, 4})).shape(), (Shape{6, 4}));
}

TEST(Embedding, LooksUpRows) {
  Embedding emb(4, 2, DType::Float64);
  emb.weight.detach().copy_(f64({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2}));
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{3, 0, 3}, {3});
  EXPECT_EQ(emb(ids).to_vector<double>(), (std::vector<double>{30, 31, 0, 1, 30, 31}));
  EXPECT_THROW(emb(Tensor::from_vector(std::vector<int64_t>{4}, {1})), ValueError);
}
