// SGD against hand-computed steps (literal values worked out from torch.optim.SGD's
// documented algorithm) and against a scalar re-implementation of that algorithm over
// several steps with varying gradients.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "engine/optim/sgd.h"
#include "kernels/backend.h"
#include "optim_test_util.h"
#include "expect_near_all.h"
#include "tensor/ops/ops.h"

using tandem::testing::expect_near_all;

using namespace tandem;
using namespace tandem::optim;
using tandem::test::param64;
using tandem::test::set_grad64;
using tandem::test::values;

namespace {

// Runs three steps with a constant gradient 1 on p0 = 1 and returns p after each step.
std::vector<double> three_steps(SGDOptions o) {
  Tensor p = param64({1.0});
  SGD opt({p}, o);
  std::vector<double> out;
  for (int i = 0; i < 3; ++i) {
    set_grad64(p, {1.0});
    opt.step();
    out.push_back(p.item());
  }
  return out;
}

// The documented algorithm, one scalar at a time.
struct SgdReference {
  SGDOptions o;
  bool has_buf = false;
  double buf = 0;
  double step(double p, double g) {
    double d = g + o.weight_decay * p;
    if (o.momentum != 0) {
      buf = has_buf ? o.momentum * buf + (1 - o.dampening) * d : d;
      has_buf = true;
      d = o.nesterov ? d + o.momentum * buf : buf;
    }
    return p - o.lr * d;
  }
};

}  // namespace

TEST(SGD, PlainStepIsLrTimesGrad) {
  expect_near_all(three_steps({.lr = 0.1}), {0.9, 0.8, 0.7});
}

TEST(SGD, MomentumHandComputed) {
  // buf: 1, 1.9, 2.71; p: 1 - 0.1, 0.9 - 0.19, 0.71 - 0.271
  expect_near_all(three_steps({.lr = 0.1, .momentum = 0.9}), {0.9, 0.71, 0.439});
}

TEST(SGD, NesterovHandComputed) {
  // d = g + m * buf: 1.9, 2.71, 3.439
  expect_near_all(three_steps({.lr = 0.1, .momentum = 0.9, .nesterov = true}), {0.81, 0.539, 0.1951});
}

TEST(SGD, DampeningSkipsTheFirstStep) {
  // buf: 1 (first step copies g), 0.9 + 0.5 = 1.4, 1.26 + 0.5 = 1.76
  expect_near_all(three_steps({.lr = 0.1, .momentum = 0.9, .dampening = 0.5}), {0.9, 0.76, 0.584});
}

TEST(SGD, WeightDecayAddsToTheGradient) {
  // d = 1 + 0.1 p: 1.1, 1.089, 1.07811
  expect_near_all(three_steps({.lr = 0.1, .weight_decay = 0.1}), {0.89, 0.7811, 0.673289});
}

TEST(SGD, MatchesReferenceOverFiveStepsForEveryOptionMix) {
  const std::vector<SGDOptions> configs = {
      {.lr = 0.05},
      {.lr = 0.05, .momentum = 0.9},
      {.lr = 0.05, .momentum = 0.8, .dampening = 0.3},
      {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01},
      {.lr = 0.05, .momentum = 0.7, .weight_decay = 0.1, .nesterov = true},
      {.lr = 0.2, .momentum = 0.5, .dampening = 0.5, .weight_decay = 0.05},
  };
  const std::vector<double> p0 = {1.0, -2.0, 0.5, 3.0};
  for (size_t c = 0; c < configs.size(); ++c) {
    Tensor p = param64(p0);
    SGD opt({p}, configs[c]);
    std::vector<SgdReference> ref(p0.size(), SgdReference{configs[c]});
    std::vector<double> expect = p0;
    for (int step = 0; step < 5; ++step) {
      std::vector<double> g(p0.size());
      for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(double(step * 7 + i)) + 0.1 * double(step);
      set_grad64(p, g);
      opt.step();
      for (size_t i = 0; i < g.size(); ++i) expect[i] = ref[i].step(expect[i], g[i]);
      SCOPED_TRACE("config " + std::to_string(c) + " step " + std::to_string(step));
      expect_near_all(values(p), expect);
    }
  }
}

TEST(SGD, Float32ParametersUseTheSameFormula) {
  Tensor p = Tensor::from_vector(std::vector<float>{1.0f, 2.0f}, {2});
  p.requires_grad_(true);
  SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  for (int i = 0; i < 2; ++i) {
    p.set_grad(Tensor::from_vector(std::vector<float>{1.0f, 1.0f}, {2}));
    opt.step();
  }
  auto v = p.to_vector<float>();
  EXPECT_NEAR(v[0], 0.71f, 1e-6);
  EXPECT_NEAR(v[1], 1.71f, 1e-6);
}

TEST(SGD, SkipsParametersWithoutGradient) {
  Tensor a = param64({1.0}), b = param64({2.0});
  SGD opt({a, b}, {.lr = 0.1, .momentum = 0.9});
  set_grad64(a, {1.0});
  opt.step();
  EXPECT_DOUBLE_EQ(b.item(), 2.0);
  EXPECT_TRUE(opt.state_of(b).empty());
  EXPECT_TRUE(opt.state_of(a).contains("momentum_buffer"));
}

TEST(SGD, NoMomentumKeepsNoState) {
  Tensor a = param64({1.0});
  SGD opt({a}, {.lr = 0.1});
  set_grad64(a, {1.0});
  opt.step();
  EXPECT_TRUE(opt.state_of(a).empty());
}

TEST(SGD, ParamGroupsHaveTheirOwnLr) {
  Tensor a = param64({1.0}), b = param64({1.0});
  SGD opt(std::vector<ParamGroup>{{{a}, {{"lr", 0.5}}}, {{b}, {}}}, {.lr = 0.1});
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].lr(), 0.5);
  EXPECT_DOUBLE_EQ(opt.param_groups()[1].lr(), 0.1);
  EXPECT_EQ(opt.param_groups()[1].options["momentum"].get<double>(), 0.0);  // default filled in
  set_grad64(a, {1.0});
  set_grad64(b, {1.0});
  opt.step();
  EXPECT_DOUBLE_EQ(a.item(), 0.5);
  EXPECT_DOUBLE_EQ(b.item(), 0.9);
}

TEST(SGD, InvalidHyperParametersThrowValueErrorNamingTheValue) {
  Tensor p = param64({1.0});
  auto message_of = [&](SGDOptions o) -> std::string {
    try {
      SGD opt({p}, o);
    } catch (const ValueError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message_of({.lr = -0.1}).find("lr must be >= 0, got -0.1"), std::string::npos);
  EXPECT_NE(message_of({.momentum = -1}).find("momentum must be >= 0, got -1"), std::string::npos);
  EXPECT_NE(message_of({.weight_decay = -1e-4}).find("weight_decay must be >= 0"), std::string::npos);
  EXPECT_NE(message_of({.nesterov = true}).find("nesterov momentum requires momentum > 0 and dampening = 0"),
            std::string::npos);
  EXPECT_NE(message_of({.momentum = 0.9, .dampening = 0.1, .nesterov = true}).find("dampening=0.1"), std::string::npos);
  EXPECT_EQ(message_of({.lr = 0.0}), "no error");
}

TEST(SGD, RejectsBadParameterLists) {
  Tensor p = param64({1.0});
  EXPECT_THROW(SGD(std::vector<ParamGroup>{}, {}), ValueError);
  EXPECT_THROW(SGD(std::vector<Tensor>{}, {}), ValueError);
  EXPECT_THROW(SGD(std::vector<ParamGroup>{{{p}, {}}, {{p}, {}}}, {}), ValueError);  // same param twice
  EXPECT_THROW(SGD({p, p}, {}), ValueError);
  Tensor non_leaf = p * 2.0;
  EXPECT_THROW(SGD({non_leaf}, {}), ValueError);
  EXPECT_THROW(SGD({Tensor::zeros({2}, DType::Int64)}, {}), DTypeError);
  EXPECT_THROW(SGD(std::vector<ParamGroup>{{{p}, {{"momentun", 0.9}}}}, {}), ValueError);  // typo'd key
}

TEST(SGD, GradientOfAnotherDtypeIsATypedError) {
  // The fused kernels read .grad with the parameter's element type, so a float32 gradient on
  // a float64 parameter is refused where it is set, and the step leaves the parameter alone.
  Tensor p = param64({1.0, 2.0});
  SGD opt({p}, {.lr = 0.1});
  EXPECT_THROW(p.set_grad(Tensor::ones({2}, DType::Float32)), DTypeError);
  EXPECT_FALSE(p.grad().defined());
  opt.step();
  EXPECT_EQ(values(p), (std::vector<double>{1.0, 2.0}));
}

TEST(Optimizer, ZeroGradSetsToNoneOrZeroes) {
  Tensor p = param64({1.0, 2.0});
  SGD opt({p}, {.lr = 0.1});
  set_grad64(p, {3.0, 4.0});
  opt.zero_grad(false);
  ASSERT_TRUE(p.grad().defined());
  EXPECT_EQ(values(p.grad()), (std::vector<double>{0.0, 0.0}));
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
}

TEST(Optimizer, MultiTensorStepIsOneSingleStepPerListEntry) {
  // Backend::sgd_step_multi / adam_step_multi (what the optimizers call once per group): the
  // default loops over the single-tensor kernels, so the results are those kernels' exactly.
  Backend& cpu = backend_for(Device::cpu());
  Tensor a = param64({1.0, -2.0, 3.0}), b = param64({0.5}), ga = param64({0.1, 0.2, 0.3}), gb = param64({-1.0});
  Tensor a1 = a.detach().clone(), b1 = b.detach().clone();
  Tensor ba = Tensor::zeros({3}, DType::Float64), bb = Tensor::zeros({1}, DType::Float64);
  Tensor ba1 = ba.clone(), bb1 = bb.clone();
  cpu.sgd_step_multi({a.view_desc(), b.view_desc()}, {ga.view_desc(), gb.view_desc()},
                     {ba.view_desc(), bb.view_desc()}, 0.1, 0.9, 0.0, 0.01, true, true);
  TensorView ba1v = ba1.view_desc(), bb1v = bb1.view_desc();
  cpu.sgd_step(a1.view_desc(), ga.view_desc(), &ba1v, 0.1, 0.9, 0.0, 0.01, true, true);
  cpu.sgd_step(b1.view_desc(), gb.view_desc(), &bb1v, 0.1, 0.9, 0.0, 0.01, true, true);
  EXPECT_EQ(values(a), values(a1));
  EXPECT_EQ(values(b), values(b1));
  EXPECT_EQ(values(ba), values(ba1));
  Tensor m = Tensor::zeros({3}, DType::Float64), v = Tensor::zeros({3}, DType::Float64);
  Tensor m1 = m.clone(), v1 = v.clone();
  Tensor a2 = a.detach().clone();
  cpu.adam_step_multi({a.view_desc()}, {ga.view_desc()}, {m.view_desc()}, {v.view_desc()}, 0.01, 0.9, 0.999, 1e-8,
                      0.1, true, 1);
  cpu.adam_step(a2.view_desc(), ga.view_desc(), m1.view_desc(), v1.view_desc(), 0.01, 0.9, 0.999, 1e-8, 0.1, true, 1);
  EXPECT_EQ(values(a), values(a2));
  EXPECT_EQ(values(m), values(m1));
  // Lists of different lengths are a ShapeError.
  EXPECT_THROW(cpu.sgd_step_multi({a.view_desc(), b.view_desc()}, {ga.view_desc()}, {}, 0.1, 0, 0, 0, false, false),
               ShapeError);
  EXPECT_THROW(cpu.adam_step_multi({a.view_desc()}, {ga.view_desc()}, {}, {v.view_desc()}, 0.01, 0.9, 0.999, 1e-8, 0,
                                   false, 1),
               ShapeError);
}
