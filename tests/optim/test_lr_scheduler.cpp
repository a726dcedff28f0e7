// Schedulers against their closed forms at several epochs, composed warmup + cosine,
// multiple groups, state round trips, and invalid settings.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "base/error.h"
#include "engine/optim/lr_scheduler.h"
#include "engine/optim/sgd.h"
#include "optim_test_util.h"
#include "expect_near_all.h"

using tandem::testing::expect_near_all;

using namespace tandem;
using namespace tandem::optim;
using tandem::test::param64;

namespace {
// lr of group 0 at epochs 0..n-1 (the constructor applies epoch 0).
std::vector<double> trace(Optimizer& opt, LRScheduler& s, int n) {
  std::vector<double> out;
  for (int e = 0; e < n; ++e) {
    if (e > 0) s.step();
    EXPECT_EQ(s.last_epoch(), e);
    EXPECT_DOUBLE_EQ(s.get_last_lr()[0], opt.param_groups()[0].lr());
    out.push_back(opt.param_groups()[0].lr());
  }
  return out;
}

double cosine(double base, double eta_min, double e, double T) {
  return eta_min + (base - eta_min) * (1 + std::cos(std::numbers::pi * e / T)) / 2;
}
}  // namespace

TEST(StepLR, DecaysByGammaEveryStepSizeEpochs) {
  SGD opt({param64({1.0})}, {.lr = 1.0});
  StepLR s(opt, 3, 0.1);
  expect_near_all(trace(opt, s, 8), {1, 1, 1, 0.1, 0.1, 0.1, 0.01, 0.01});
}

TEST(CosineAnnealingLR, FollowsTheClosedForm) {
  SGD opt({param64({1.0})}, {.lr = 1.0});
  CosineAnnealingLR s(opt, 10, 0.1);
  auto got = trace(opt, s, 13);
  EXPECT_NEAR(got[0], 1.0, 1e-15);
  EXPECT_NEAR(got[5], 0.55, 1e-12);  // halfway: (1 + 0.1) / 2
  EXPECT_NEAR(got[10], 0.1, 1e-12);  // eta_min at T_max
  for (int e = 0; e < 13; ++e) EXPECT_NEAR(got[size_t(e)], cosine(1.0, 0.1, e, 10), 1e-12) << "epoch " << e;
  EXPECT_GT(got[12], got[10]);  // past T_max the cosine rises again, as PyTorch's
}

TEST(LinearLR, WarmsUpLinearlyThenHolds) {
  SGD opt({param64({1.0})}, {.lr = 0.4});
  LinearLR s(opt, 0.25, 1.0, 4);
  expect_near_all(trace(opt, s, 7), {0.1, 0.175, 0.25, 0.325, 0.4, 0.4, 0.4});
}

TEST(LinearLR, CanDecayToo) {
  SGD opt({param64({1.0})}, {.lr = 1.0});
  LinearLR s(opt, 1.0, 0.5, 2);
  expect_near_all(trace(opt, s, 4), {1.0, 0.75, 0.5, 0.5});
}

TEST(SequentialLR, WarmupThenCosine) {
  SGD opt({param64({1.0})}, {.lr = 0.8});
  auto s = warmup_cosine(opt, 4, 14, 0.1, 0.0);
  auto got = trace(opt, *s, 16);
  for (int e = 0; e < 4; ++e) EXPECT_NEAR(got[size_t(e)], 0.8 * (0.1 + 0.9 * e / 4.0), 1e-12) << "epoch " << e;
  for (int e = 4; e < 16; ++e) EXPECT_NEAR(got[size_t(e)], cosine(0.8, 0.0, e - 4, 10), 1e-12) << "epoch " << e;
  EXPECT_NEAR(got[4], 0.8, 1e-12);
  EXPECT_NEAR(got[14], 0.0, 1e-12);
}

TEST(SequentialLR, ThreeStagesWithExplicitMilestones) {
  SGD opt({param64({1.0})}, {.lr = 1.0});
  auto warm = std::make_shared<LinearLR>(opt, 0.5, 1.0, 2);
  auto flat = std::make_shared<StepLR>(opt, 100, 0.1);
  auto decay = std::make_shared<StepLR>(opt, 1, 0.5);
  SequentialLR s(opt, {warm, flat, decay}, {2, 5});
  expect_near_all(trace(opt, s, 8), {0.5, 0.75, 1, 1, 1, 1, 0.5, 0.25});
}

TEST(LRScheduler, EachGroupScalesItsOwnBaseLr) {
  Tensor a = param64({1.0}), b = param64({1.0});
  SGD opt(std::vector<ParamGroup>{{{a}, {{"lr", 1.0}}}, {{b}, {{"lr", 0.1}}}}, {});
  StepLR s(opt, 1, 0.5);
  s.step();
  s.step();
  EXPECT_EQ(s.base_lrs(), (std::vector<double>{1.0, 0.1}));
  EXPECT_NEAR(s.get_last_lr()[0], 0.25, 1e-15);
  EXPECT_NEAR(s.get_last_lr()[1], 0.025, 1e-15);
  EXPECT_DOUBLE_EQ(opt.param_groups()[1].options["initial_lr"].get<double>(), 0.1);
}

TEST(LRScheduler, TheScheduledLrDrivesTheOptimizer) {
  Tensor p = param64({1.0});
  SGD opt({p}, {.lr = 1.0});
  StepLR s(opt, 1, 0.1);
  s.step();  // lr = 0.1
  tandem::test::set_grad64(p, {1.0});
  opt.step();
  EXPECT_NEAR(p.item(), 0.9, 1e-15);
}

TEST(LRScheduler, StateDictRoundTripResumes) {
  SGD opt({param64({1.0})}, {.lr = 1.0});
  auto s = warmup_cosine(opt, 3, 10);
  for (int i = 0; i < 5; ++i) s->step();
  nlohmann::json saved = s->state_dict();
  EXPECT_EQ(saved["last_epoch"], 5);
  EXPECT_EQ(saved["_schedulers"].size(), 2u);

  SGD opt2({param64({1.0})}, {.lr = 1.0});
  auto s2 = warmup_cosine(opt2, 3, 10);
  s2->load_state_dict(saved);
  EXPECT_EQ(s2->last_epoch(), 5);
  s->step();
  s2->step();
  EXPECT_DOUBLE_EQ(s->get_last_lr()[0], s2->get_last_lr()[0]);
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].lr(), opt2.param_groups()[0].lr());
}

TEST(LRScheduler, InvalidSettingsThrowValueError) {
  SGD opt({param64({1.0})}, {.lr = 1.0});
  EXPECT_THROW(StepLR(opt, 0), ValueError);
  EXPECT_THROW(StepLR(opt, 2, -0.5), ValueError);
  EXPECT_THROW(CosineAnnealingLR(opt, 0), ValueError);
  EXPECT_THROW(CosineAnnealingLR(opt, 10, -1), ValueError);
  EXPECT_THROW(LinearLR(opt, 0.0), ValueError);
  EXPECT_THROW(LinearLR(opt, 0.5, 1.5), ValueError);
  EXPECT_THROW(LinearLR(opt, 0.5, 1.0, 0), ValueError);
  auto a = std::make_shared<StepLR>(opt, 1);
  EXPECT_THROW(SequentialLR(opt, {a, a}, {}), ValueError);
  EXPECT_THROW(SequentialLR(opt, {a, a, a}, {3, 2}), ValueError);
  EXPECT_THROW(warmup_cosine(opt, 10, 10), ValueError);
  try {
    LinearLR(opt, 2.0);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("start_factor must be in (0, 1], got 2"), std::string::npos) << e.what();
  }
}
