// QAdam (engine/optim/qadam.h) on one process: Adam while warming up, then the update with the
// averaged momentum and the frozen variance, against values derived in double by hand; a step
// bounded by Adam's own bound where the frozen variance is tiny; and the refusal to step without
// the bagua qadam algorithm's averager.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "engine/optim/adam.h"
#include "engine/optim/qadam.h"

namespace tandem::optim {
namespace {

void set_grad(Tensor& p, std::vector<float> g) { p.set_grad(Tensor::from_vector(g, {int64_t(g.size())})); }

TEST(QAdam, RefusesToStepWithoutTheBaguaAverager) {
  Tensor p = Tensor::from_vector<float>({1.0f}, {1}).requires_grad_();
  QAdam q({p}, AdamOptions{}, 2);
  set_grad(p, {0.5f});
  try {
    q.step();
    FAIL() << "QAdam stepped without an averager";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--trainer.strategy=bagua --trainer.strategy.algorithm=qadam"), std::string::npos);
  }
  EXPECT_THROW(QAdam({p}, AdamOptions{}, 0), ConfigError);
}

TEST(QAdam, AdamWhileWarmingUpThenAveragedMomentumAndFrozenVariance) {
  const AdamOptions o{0.1, {0.9, 0.99}, 1e-8, 0.01};
  Tensor a = Tensor::from_vector<float>({1.0f, -2.0f}, {2}).requires_grad_();
  Tensor q = a.detach().clone().requires_grad_();
  Adam adam({a}, o);
  QAdam qadam({q}, o, 2);
  int averaged = 0;
  // The "other ranks" halve the momentum: the mean the averager returns is m / 2.
  qadam.set_momentum_averager([&](const Tensor& m) {
    Tensor target = m;
    target.copy_(Tensor::from_vector<float>({m.to_vector<float>()[0] / 2, m.to_vector<float>()[1] / 2}, {2}));
    ++averaged;
  });
  const std::vector<std::vector<float>> grads{{0.5f, -1.0f}, {0.25f, 2.0f}, {-0.75f, 0.5f}};
  for (int t = 0; t < 2; ++t) {
    set_grad(a, grads[t]);
    set_grad(q, grads[t]);
    adam.step();
    qadam.step();
  }
  EXPECT_EQ(a.to_vector<float>(), q.to_vector<float>()) << "warm-up steps are Adam's";
  EXPECT_EQ(averaged, 0);
  const Tensor v_frozen = qadam.state_of(q).at("exp_avg_sq").clone();
  // Step 3 by hand, in double, from the state after step 2.
  const auto m2 = qadam.state_of(q).at("exp_avg").to_vector<float>();
  const auto v2 = v_frozen.to_vector<float>();
  const auto p2 = q.to_vector<float>();
  set_grad(q, grads[2]);
  qadam.step();
  EXPECT_EQ(averaged, 1);
  const auto p3 = q.to_vector<float>();
  for (size_t i = 0; i < 2; ++i) {
    const double g = grads[2][i] + 0.01 * p2[i];
    const double m = (0.9 * m2[i] + 0.1 * g) / 2;
    const double expected = p2[i] - 0.1 / (1 - std::pow(0.9, 3)) * m / (std::sqrt(v2[i]) / std::sqrt(1 - 0.99 * 0.99) + 1e-8);
    EXPECT_NEAR(p3[i], expected, 1e-6) << i;
    EXPECT_NEAR(qadam.state_of(q).at("exp_avg").to_vector<float>()[i], m, 1e-7);
  }
  EXPECT_EQ(qadam.state_of(q).at("exp_avg_sq").to_vector<float>(), v2) << "the variance is frozen after warm-up";
}

TEST(QAdam, AnElementWithoutVarianceStaysPutAfterWarmUp) {
  Tensor p = Tensor::from_vector<float>({1.0f, 3.0f}, {2}).requires_grad_();
  QAdam qadam({p}, AdamOptions{0.1, {0.9, 0.99}, 1e-8, 0.0}, 1);
  // The averager leaves compression-like noise where the momentum was exactly zero.
  qadam.set_momentum_averager([](const Tensor& m) {
    Tensor target = m;
    target.copy_(Tensor::from_vector<float>({m.to_vector<float>()[0], 1e-3f}, {2}));
  });
  set_grad(p, {0.5f, 0.0f});
  qadam.step();  // warm-up: element 1 has gradient 0, so v = 0 there
  set_grad(p, {0.5f, 0.0f});
  qadam.step();
  EXPECT_EQ(p.to_vector<float>()[1], 3.0f);
  EXPECT_LT(p.to_vector<float>()[0], 0.85f);  // element 0 moved by about lr per step
}

// Element 0's gradient is 1e-10 during the one warm-up step (v = 1e-23), then 1: its unbounded
// step would be lr x 0.1 / 0.19 / (sqrt(1e-23) / sqrt(0.001) + 1e-8) ~ 5e6 x lr. It moves by
// lr x B = lr x 0.1 / sqrt(0.001) instead, while element 1 (the same gradient 0.5 both steps:
// direction exactly 1 < B) takes its step unchanged.
TEST(QAdam, AStepAfterWarmUpIsBoundedAsAdamsIs) {
  const double lr = 0.1;
  Tensor p = Tensor::from_vector<float>({1.0f, 2.0f}, {2}).requires_grad_();
  QAdam qadam({p}, AdamOptions{lr, {0.9, 0.999}, 1e-8, 0.0}, 1);
  qadam.set_momentum_averager([](const Tensor&) {});  // one rank: the mean is its own momentum
  set_grad(p, {1e-10f, 0.5f});
  qadam.step();
  const auto p1 = p.to_vector<float>();
  const auto m1 = qadam.state_of(p).at("exp_avg").to_vector<float>();
  const auto v1 = qadam.state_of(p).at("exp_avg_sq").to_vector<float>();
  ASSERT_GT(v1[0], 0.0f);
  ASSERT_LT(v1[0], 1e-22f);
  set_grad(p, {1.0f, 0.5f});
  qadam.step();
  const double bound = 0.1 / std::sqrt(0.001);
  auto direction = [&](size_t i, double g) {
    const double m = 0.9 * m1[i] + 0.1 * g;
    return m / (1 - 0.81) / (std::sqrt(double(v1[i])) / std::sqrt(0.001) + 1e-8);
  };
  ASSERT_GT(direction(0, 1.0), 1e6 * bound) << "the case this test is about: a huge unbounded step";
  EXPECT_NEAR(direction(1, 0.5), 1.0, 1e-5);
  const auto p2 = p.to_vector<float>();
  EXPECT_NEAR(p2[0], p1[0] - lr * bound, 1e-6);
  EXPECT_NEAR(p2[1], p1[1] - lr * direction(1, 0.5), 1e-6);
}

}  // namespace
}  // namespace tandem::optim
