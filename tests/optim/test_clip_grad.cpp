// Gradient clipping against hand computation: gradients (3, 4) and (12) have 2-norm 13,
// 1-norm 19 and inf-norm 12.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "base/error.h"
#include "engine/optim/clip_grad.h"
#include "optim_test_util.h"

using namespace tandem;
using namespace tandem::optim;
using tandem::test::param64;
using tandem::test::set_grad64;
using tandem::test::values;

namespace {
struct Params {
  Tensor a = param64({0.0, 0.0}), b = param64({0.0}), no_grad = param64({5.0});
  Params() {
    set_grad64(a, {3.0, -4.0});
    set_grad64(b, {12.0});
  }
  std::vector<Tensor> all() const { return {a, b, no_grad}; }
};
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

TEST(ClipGradNorm, TwoNormScalesEveryGradient) {
  Params p;
  const double total = clip_grad_norm_(p.all(), 6.5);
  EXPECT_DOUBLE_EQ(total, 13.0);
  const double coef = 6.5 / (13.0 + 1e-6);
  auto ga = values(p.a.grad()), gb = values(p.b.grad());
  EXPECT_NEAR(ga[0], 3.0 * coef, 1e-14);
  EXPECT_NEAR(ga[1], -4.0 * coef, 1e-14);
  EXPECT_NEAR(gb[0], 12.0 * coef, 1e-14);
  EXPECT_NEAR(total_grad_norm(p.all()), 6.5, 1e-6);  // just under max_norm afterwards
  EXPECT_FALSE(p.no_grad.grad().defined());
}

TEST(ClipGradNorm, InfNormUsesTheLargestMagnitude) {
  Params p;
  const double total = clip_grad_norm_(p.all(), 6.0, kInf);
  EXPECT_DOUBLE_EQ(total, 12.0);
  const double coef = 6.0 / (12.0 + 1e-6);
  EXPECT_NEAR(values(p.a.grad())[1], -4.0 * coef, 1e-14);
  EXPECT_NEAR(values(p.b.grad())[0], 12.0 * coef, 1e-14);
}

TEST(ClipGradNorm, OtherNormOrders) {
  Params p;
  EXPECT_DOUBLE_EQ(total_grad_norm(p.all(), 1.0), 19.0);
  EXPECT_NEAR(total_grad_norm(p.all(), 3.0), std::cbrt(27.0 + 64.0 + 1728.0), 1e-12);
}

TEST(ClipGradNorm, LeavesGradientsAloneBelowMaxNorm) {
  Params p;
  EXPECT_DOUBLE_EQ(clip_grad_norm_(p.all(), 13.5), 13.0);
  EXPECT_EQ(values(p.a.grad()), (std::vector<double>{3.0, -4.0}));
  EXPECT_EQ(values(p.b.grad()), (std::vector<double>{12.0}));
}

TEST(ClipGradNorm, Float32GradientsAccumulateInFloat64) {
  Tensor w = Tensor::zeros({1000}, DType::Float32);
  w.requires_grad_(true);
  w.set_grad(Tensor::full({1000}, 0.1, DType::Float32));
  const double expect = std::sqrt(1000.0 * double(0.1f) * double(0.1f));
  EXPECT_NEAR(clip_grad_norm_({w}, 1.0), expect, 1e-12);
  EXPECT_NEAR(total_grad_norm({w}), 1.0, 1e-5);
}

TEST(ClipGradNorm, NoGradientsMeansZeroNorm) {
  EXPECT_DOUBLE_EQ(clip_grad_norm_({param64({1.0})}, 1.0), 0.0);
}

TEST(ClipGradNorm, Errors) {
  Params p;
  EXPECT_THROW(clip_grad_norm_(p.all(), -1.0), ValueError);
  EXPECT_THROW(clip_grad_norm_(p.all(), 1.0, 0.0), ValueError);
  EXPECT_THROW(clip_grad_norm_(p.all(), 1.0, -kInf), ValueError);
  set_grad64(p.b, {std::nan("")});
  EXPECT_THROW(clip_grad_norm_(p.all(), 1.0, 2.0, true), Error);
  EXPECT_TRUE(std::isnan(clip_grad_norm_(p.all(), 1.0)));
}

TEST(ClipGradValue, ClampsEachElement) {
  Params p;
  clip_grad_value_(p.all(), 3.5);
  EXPECT_EQ(values(p.a.grad()), (std::vector<double>{3.0, -3.5}));
  EXPECT_EQ(values(p.b.grad()), (std::vector<double>{3.5}));
  EXPECT_THROW(clip_grad_value_(p.all(), -1.0), ValueError);
}
