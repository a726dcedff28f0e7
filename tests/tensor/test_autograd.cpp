// Autograd: accumulation, retain_graph, NoGradGuard, detach, hooks, error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/ops.h"

namespace tandem {
namespace {

TEST(Autograd, ChainRuleAndAccumulation) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3}, {3}).requires_grad_();
  Tensor y = sum(x * x * 3.0);  // dy/dx = 6x
  y.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 12, 18}));
  sum(x).backward();  // a second graph accumulates into .grad
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{7, 13, 19}));
  // A leaf used twice in one graph gets the sum of both paths.
  Tensor z = Tensor::from_vector<double>({2}, {1}).requires_grad_();
  sum(z * z + z).backward();
  EXPECT_EQ(z.grad().item(), 5.0);
}

TEST(Autograd, BackwardWithGivenGradient) {
  Tensor x = Tensor::from_vector<double>({1, 2}, {2}).requires_grad_();
  Tensor y = x * 2.0;
  y.backward(Tensor::from_vector<double>({10, 100}, {2}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{20, 200}));
  Tensor y2 = x * 2.0;
  EXPECT_THROW(y2.backward(), AutogradError);  // non-scalar without a gradient
  EXPECT_THROW(y2.backward(Tensor::ones({3}, DType::Float64)), AutogradError);
}

TEST(Autograd, GivenGradientOfAnotherDtypeIsCastLikePyTorch) {
  Tensor x = Tensor::from_vector<double>({1, 2}, {2}).requires_grad_();
  Tensor y = exp(x);
  y.backward(Tensor::from_vector<float>({1.0f, 0.5f}, {2}));  // float32 gradient of a float64 output
  EXPECT_EQ(x.grad().dtype(), DType::Float64);
  auto g = x.grad().to_vector<double>();
  EXPECT_NEAR(g[0], std::exp(1.0), 1e-12);
  EXPECT_NEAR(g[1], 0.5 * std::exp(2.0), 1e-12);
}

TEST(Autograd, SetGradChecksShapeDtypeAndDevice) {
  Tensor p = Tensor::zeros({2, 3}).requires_grad_();
  EXPECT_THROW(p.set_grad(Tensor::zeros({3, 2})), ShapeError);
  try {
    p.set_grad(Tensor::zeros({2, 3}, DType::Float64));
    ADD_FAILURE() << "expected DTypeError";
  } catch (const DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("gradient is float64 but the tensor is float32"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(p.grad().defined());
  p.set_grad(Tensor::ones({2, 3}));
  EXPECT_EQ(p.grad().to_vector<float>(), std::vector<float>(6, 1.0f));
}

TEST(Autograd, SecondBackwardThroughFreedGraphIsAnError) {
  Tensor x = Tensor::from_vector<double>({1, 2}, {2}).requires_grad_();
  Tensor y = sum(exp(x));
  y.backward();
  try {
    y.backward();
    ADD_FAILURE() << "expected AutogradError";
  } catch (const AutogradError& e) {
    EXPECT_NE(std::string(e.what()).find("second time"), std::string::npos);
  }
  Tensor z = sum(exp(x));
  x.set_grad(Tensor());
  z.backward(Tensor(), /*retain_graph=*/true);
  z.backward();
  EXPECT_NEAR(x.grad().to_vector<double>()[1], 2 * std::exp(2.0), 1e-12);
}

TEST(Autograd, NoGradGuardAndDetach) {
  Tensor x = Tensor::ones({2}, DType::Float64).requires_grad_();
  {
    NoGradGuard guard;
    Tensor y = x * 2.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
  }
  EXPECT_TRUE(grad_enabled());
  Tensor d = (x * 2.0).detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_THROW(sum(d).backward(), AutogradError);
  EXPECT_THROW(Tensor::ones({2}, DType::Int64).requires_grad_(), AutogradError);
  EXPECT_THROW((x * 2.0).requires_grad_(false), AutogradError);
}

TEST(Autograd, GradientThroughCastAndDevices) {
  Tensor x = Tensor::from_vector<float>({1.5f, -2.0f}, {2}).requires_grad_();
  sum(cast(x, DType::Float64) * Tensor::from_vector<double>({3, 4}, {2})).backward();
  EXPECT_EQ(x.grad().dtype(), DType::Float32);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{3, 4}));
}

TEST(Autograd, GradientThroughHalfStorageCasts) {
  // float16/bfloat16 are storage types on the CPU: casts in and out are differentiable.
  for (DType half : {DType::Float16, DType::BFloat16}) {
    Tensor x = Tensor::from_vector<float>({1.5f, -2.0f, 0.25f}, {3}).requires_grad_();
    Tensor h = cast(x, half);
    EXPECT_TRUE(h.requires_grad());
    sum(cast(h, DType::Float32) * Tensor::from_vector<float>({3, -4, 0.5f}, {3})).backward();
    EXPECT_EQ(x.grad().dtype(), DType::Float32) << dtype_name(half);
    EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{3, -4, 0.5f})) << dtype_name(half);
  }
}

TEST(Autograd, PostAccumulateHookFiresOnceWhenGradIsFinal) {
  Tensor w = Tensor::from_vector<double>({1, 2}, {2}).requires_grad_();
  Tensor b = Tensor::from_vector<double>({3}, {1}).requires_grad_();
  std::vector<std::string> order;
  std::vector<double> seen;
  w.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    EXPECT_TRUE(leaf.same_impl(w));
    order.push_back("w");
    seen = leaf.grad().to_vector<double>();
  });
  b.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back("b"); });
  // w is used on two paths; its hook must fire once, after both contributions are summed.
  Tensor y = sum(w * 3.0) + sum(w * w) + sum(b);
  y.backward();
  EXPECT_EQ(std::count(order.begin(), order.end(), "w"), 1);
  EXPECT_EQ(std::count(order.begin(), order.end(), "b"), 1);
  EXPECT_EQ(seen, (std::vector<double>{5, 7}));  // 3 + 2w
  // Hooks on non-leaves are refused.
  EXPECT_THROW((w * 2.0).register_post_accumulate_grad_hook([](const Tensor&) {}), AutogradError);
}

TEST(Autograd, RemovedPostAccumulateHookNoLongerFires) {
  Tensor w = Tensor::from_vector<double>({1, 2}, {2}).requires_grad_();
  int kept = 0, removed = 0;
  w.register_post_accumulate_grad_hook([&](const Tensor&) { ++kept; });
  HookHandle handle = w.register_post_accumulate_grad_hook([&](const Tensor&) { ++removed; });
  sum(w * w).backward();
  handle.remove();
  handle.remove();  // a second remove does nothing
  sum(w * w).backward();
  EXPECT_EQ(kept, 2);
  EXPECT_EQ(removed, 1);
  EXPECT_EQ(w.impl().post_accumulate_hooks.size(), 1u);
}

TEST(Autograd, HooksAndGraphsDoNotKeepTheirTensorsAlive) {
  std::weak_ptr<TensorImpl> weight, softmax_out;
  HookHandle late_handle;
  {
    Tensor w = Tensor::randn({3, 4}).requires_grad_();
    w.register_post_accumulate_grad_hook([](const Tensor& leaf) { EXPECT_TRUE(leaf.grad().defined()); });
    late_handle = w.register_post_accumulate_grad_hook([](const Tensor&) {});
    // A graph that is never backwarded (a loss dropped after a nan, an evaluation with grad on),
    // through log_softmax over the last dim, whose backward saves its output.
    Tensor out = log_softmax(matmul(Tensor::randn({2, 3}), w), -1);
    softmax_out = out.impl_ptr();
    Tensor loss = sum(out);
    weight = w.impl_ptr();
  }
  EXPECT_TRUE(weight.expired());
  EXPECT_TRUE(softmax_out.expired());
  late_handle.remove();  // its tensor is gone: nothing to do
}

TEST(Autograd, HooksFireInReverseOrderOfUse) {
  // Later layers' parameters become final first (what DDP bucketing relies on).
  Tensor w1 = Tensor::ones({2, 2}, DType::Float64).requires_grad_();
  Tensor w2 = Tensor::ones({2, 2}, DType::Float64).requires_grad_();
  std::vector<int> order;
  w1.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back(1); });
  w2.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back(2); });
  Tensor x = Tensor::ones({3, 2}, DType::Float64);
  sum(linear(relu(linear(x, w1)), w2)).backward();
  EXPECT_EQ(order, (std::vector<int>{2, 1}));
}

TEST(Autograd, GradBuffersAreNeverShared) {
  // Add's backward sends the same gradient tensor to both inputs; each .grad must still be its
  // own buffer, since optimizers and clipping modify .grad in place.
  Tensor a = Tensor::ones({3}, DType::Float64).requires_grad_();
  Tensor b = Tensor::ones({3}, DType::Float64).requires_grad_();
  sum(a + b).backward();
  ASSERT_NE(a.grad().raw_data(), b.grad().raw_data());
  a.grad().fill_(5.0);
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{1, 1, 1}));
  // A gradient passed by the caller is copied, not adopted.
  Tensor c = Tensor::ones({2}, DType::Float64).requires_grad_();
  Tensor given = Tensor::full({2}, 3.0, DType::Float64);
  c.backward(given);
  c.grad().fill_(0.0);
  EXPECT_EQ(given.to_vector<double>(), (std::vector<double>{3, 3}));
}

TEST(Autograd, UnusedBranchGetsNoGradient) {
  Tensor x = Tensor::ones({2}, DType::Float64).requires_grad_();
  Tensor unused = Tensor::ones({2}, DType::Float64).requires_grad_();
  Tensor y = sum(x * 2.0);
  Tensor z = unused * 3.0;  // not part of y's graph
  (void)z;
  y.backward();
  EXPECT_FALSE(unused.grad().defined());
  EXPECT_TRUE(x.grad().defined());
}

}  // namespace
}  // namespace tandem
