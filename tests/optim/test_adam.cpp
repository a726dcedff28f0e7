// Adam and AdamW against values hand-computed from the published algorithm
// (m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t), p -= lr * m_hat / (sqrt(v_hat) + eps)),
// with gradients 1, -2, 0.5 on p0 = 1 over steps 1..3, so bias correction is exercised at
// every step. The literals were computed in double precision from that algorithm.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "engine/optim/adam.h"
#include "optim_test_util.h"
#include "expect_near_all.h"

using tandem::testing::expect_near_all;

using namespace tandem;
using namespace tandem::optim;
using tandem::test::param64;
using tandem::test::set_grad64;

namespace {

template <typename Opt, typename Options>
std::vector<double> run(Options o) {
  Tensor p = param64({1.0});
  Opt opt({p}, o);
  std::vector<double> out;
  for (double g : {1.0, -2.0, 0.5}) {
    set_grad64(p, {g});
    opt.step();
    out.push_back(p.item());
  }
  return out;
}

}  // namespace

TEST(Adam, BiasCorrectedStepsOneToThree) {
  // Step 1: m_hat = g, v_hat = g^2, so the step is lr * g / (|g| + eps) = 0.1 / (1 + 1e-8).
  expect_near_all(run<Adam>(AdamOptions{.lr = 0.1}), {0.900000001, 0.9366103534720749, 0.9502794196738216});
}

TEST(Adam, L2WeightDecayEntersTheGradient) {
  expect_near_all(run<Adam>(AdamOptions{.lr = 0.1, .weight_decay = 0.1}),
                  {0.9000000009090909, 0.9310642948391922, 0.937642154937361});
}

TEST(AdamW, DecoupledWeightDecayShrinksTheParameter) {
  // Step 1: p = 1 * (1 - 0.1 * 0.1) - 0.1 / (1 + 1e-8).
  expect_near_all(run<AdamW>(AdamWOptions{.lr = 0.1, .weight_decay = 0.1}),
                  {0.890000001, 0.9177103534620747, 0.9222023161292007});
}

TEST(AdamW, CustomBetasAndEps) {
  expect_near_all(run<AdamW>(AdamWOptions{.lr = 0.01, .betas = {0.8, 0.99}, .eps = 1e-6, .weight_decay = 0.5}),
                  {0.98500000999999, 0.9842850355055004, 0.9807897607995184});
}

TEST(AdamW, DefaultWeightDecayIsOneHundredth) {
  Tensor p = param64({1.0});
  AdamW opt({p});
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].options["weight_decay"].get<double>(), 1e-2);
  EXPECT_EQ(opt.name(), "AdamW");
  Adam adam({param64({1.0})});
  EXPECT_DOUBLE_EQ(adam.param_groups()[0].options["weight_decay"].get<double>(), 0.0);
  EXPECT_EQ(adam.param_groups()[0].options["betas"], nlohmann::json({0.9, 0.999}));
}

TEST(Adam, StateHoldsStepAndMoments) {
  Tensor p = param64({1.0, 2.0});
  Adam opt({p}, {.lr = 0.1});
  for (int i = 0; i < 2; ++i) {
    set_grad64(p, {1.0, -1.0});
    opt.step();
  }
  const StateDict& s = opt.state_of(p);
  EXPECT_EQ(s.keys(), (std::vector<std::string>{"step", "exp_avg", "exp_avg_sq"}));
  EXPECT_EQ(s.at("step").dtype(), DType::Float32);
  EXPECT_DOUBLE_EQ(s.at("step").item(), 2.0);
  // m = 0.9 * 0.1 + 0.1 = 0.19, v = 0.999 * 0.001 + 0.001 = 0.001999
  auto m = s.at("exp_avg").to_vector<double>(), v = s.at("exp_avg_sq").to_vector<double>();
  EXPECT_NEAR(m[0], 0.19, 1e-15);
  EXPECT_NEAR(m[1], -0.19, 1e-15);
  EXPECT_NEAR(v[0], 0.001999, 1e-15);
}

TEST(Adam, InvalidHyperParametersThrowValueError) {
  Tensor p = param64({1.0});
  auto message_of = [&](AdamOptions o) -> std::string {
    try {
      Adam opt({p}, o);
    } catch (const ValueError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message_of({.lr = -1}).find("Adam: lr must be >= 0, got -1"), std::string::npos);
  EXPECT_NE(message_of({.betas = {1.0, 0.999}}).find("beta1 must be in [0, 1), got 1"), std::string::npos);
  EXPECT_NE(message_of({.betas = {0.9, -0.5}}).find("beta2 must be in [0, 1), got -0.5"), std::string::npos);
  EXPECT_NE(message_of({.eps = -1e-8}).find("eps must be >= 0"), std::string::npos);
  EXPECT_NE(message_of({.weight_decay = -1}).find("weight_decay must be >= 0"), std::string::npos);
  EXPECT_THROW(AdamW({p}, {.betas = {0.9, 1.0}}), ValueError);
  EXPECT_THROW(Adam(std::vector<ParamGroup>{{{p}, {{"betas", {0.9}}}}}), ValueError);
}
