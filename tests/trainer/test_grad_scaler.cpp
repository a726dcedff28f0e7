// GradScaler (16-mixed loss scaling): the arithmetic is device-independent, so it is checked
// here on CPU float32 gradients against hand-derived values and PyTorch's update rule.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "base/error.h"
#include "engine/strategies/grad_scaler.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/ops.h"

namespace tandem::trainer {
namespace {

Tensor param_with_grad(std::vector<float> grad) {
  Tensor p = Tensor::zeros({int64_t(grad.size())}).requires_grad_();
  p.set_grad(Tensor::from_vector(grad, {int64_t(grad.size())}));
  return p;
}

TEST(GradScaler, ScalesTheLossAndDividesGradientsBack) {
  GradScaler scaler({/*init_scale=*/1024.0});
  Tensor loss = Tensor::scalar(0.75, DType::Float32);
  EXPECT_DOUBLE_EQ(scaler.scale_loss(loss).item(), 768.0);
  Tensor a = param_with_grad({1024.0f, -2048.0f, 1.0f}), b = param_with_grad({512.0f});
  Tensor no_grad = Tensor::zeros({2}).requires_grad_();  // a parameter the loss did not reach
  EXPECT_TRUE(scaler.unscale({a, b, no_grad}));
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{1.0f, -2.0f, 1.0f / 1024.0f}));
  EXPECT_EQ(b.grad().to_vector<float>(), (std::vector<float>{0.5f}));
  EXPECT_FALSE(no_grad.grad().defined());
}

TEST(GradScaler, UnscalesInPlaceAndScalesThroughOneTensorThatFollowsTheScale) {
  // Gradient buffers keep their addresses (DDP bucket views and CUDA graph replays write there).
  GradScaler scaler({/*init_scale=*/8.0, /*growth_factor=*/2.0, /*backoff_factor=*/0.5, /*growth_interval=*/1});
  Tensor a = param_with_grad({8.0f, -4.0f});
  const void* buffer = a.grad().raw_data();
  EXPECT_TRUE(scaler.unscale({a}));
  EXPECT_EQ(a.grad().raw_data(), buffer);
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{1.0f, -0.5f}));
  // The loss is multiplied by the current scale after every update, and the product is
  // differentiable: d(scaled)/d(loss) = scale.
  Tensor loss = Tensor::scalar(3.0, DType::Float32).requires_grad_();
  EXPECT_DOUBLE_EQ(scaler.scale_loss(loss).item(), 24.0);
  scaler.update(false);  // growth_interval 1: the scale doubles
  Tensor scaled = scaler.scale_loss(loss);
  EXPECT_DOUBLE_EQ(scaled.item(), 48.0);
  scaled.backward();
  EXPECT_DOUBLE_EQ(loss.grad().item(), 16.0);
  scaler.update(true);  // backoff
  EXPECT_DOUBLE_EQ(scaler.scale_loss(loss).item(), 24.0);
}

TEST(GradScaler, UpdateWritesTheNewScaleIntoTheTensorAMultiplyAlreadyRecorded) {
  // A CUDA graph step records loss * scale once and replays it without calling scale_loss
  // again; here the multiply's backward, run after update(), stands in for such a replay and
  // must read the new scale.
  GradScaler scaler({/*init_scale=*/8.0, /*growth_factor=*/2.0, /*backoff_factor=*/0.5, /*growth_interval=*/1});
  Tensor loss = Tensor::scalar(3.0, DType::Float32).requires_grad_();
  Tensor recorded = scaler.scale_loss(loss);
  scaler.update(true);  // backoff: 4
  recorded.backward();
  EXPECT_DOUBLE_EQ(loss.grad().item(), 4.0);
  scaler.update(false);  // growth: 8, and a scale_loss now records no fill of its own
  EXPECT_DOUBLE_EQ(scaler.scale_loss(loss).item(), 24.0);
}

TEST(GradScaler, AnInfOrNanAnywhereReportsTheStepAsSkippable) {
  GradScaler scaler;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(scaler.unscale({param_with_grad({1, 2}), param_with_grad({3, inf})}));
  EXPECT_FALSE(scaler.unscale({param_with_grad({nan}), param_with_grad({1})}));
  EXPECT_FALSE(scaler.unscale({param_with_grad({-inf})}));
  EXPECT_TRUE(scaler.unscale({param_with_grad({3.0e38f}), param_with_grad({-3.0e38f})}));  // large but finite
}

TEST(GradScaler, BacksOffOnOverflowAndGrowsAfterTheInterval) {
  GradScaler scaler({/*init_scale=*/256.0, /*growth_factor=*/2.0, /*backoff_factor=*/0.25, /*growth_interval=*/3});
  scaler.update(false);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 256.0);
  scaler.update(false);  // third good step in a row
  EXPECT_EQ(scaler.scale(), 512.0);
  scaler.update(false);
  scaler.update(false);
  scaler.update(true);  // overflow: back off and restart the count
  EXPECT_EQ(scaler.scale(), 128.0);
  scaler.update(false);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 128.0);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 256.0);
}

TEST(GradScaler, NeverGrowsToInfinity) {
  GradScaler scaler({/*init_scale=*/1.0e308, 2.0, 0.5, 1});
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 1.0e308);
}

TEST(GradScaler, StateRoundTripsAndBadStateIsADataError) {
  GradScaler a({64.0, 2.0, 0.5, 10});
  a.update(true);
  a.update(false);
  GradScaler b;
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(b.scale(), 32.0);
  EXPECT_EQ(b.state_dict()["growth_tracker"], 1);
  EXPECT_THROW(b.load_state_dict(nlohmann::json{{"scale", -1.0}, {"growth_tracker", 0}}), DataError);
  EXPECT_THROW(b.load_state_dict(nlohmann::json{{"scale", "big"}, {"growth_tracker", 0}}), DataError);
  EXPECT_THROW(b.load_state_dict(nlohmann::json::array()), DataError);
}

TEST(GradScaler, InvalidOptionsAreConfigErrors) {
  EXPECT_THROW(GradScaler({0.0}), ConfigError);
  EXPECT_THROW(GradScaler({1.0, 1.0}), ConfigError);
  EXPECT_THROW(GradScaler({1.0, 2.0, 1.5}), ConfigError);
  EXPECT_THROW(GradScaler({1.0, 2.0, 0.5, 0}), ConfigError);
}

// Autocast only ever changes CUDA tensors: on the CPU every op keeps its dtype (the CPU kernels
// have no half arithmetic), inside a guard or not. The CUDA side is tests/gpu.
TEST(Autocast, LeavesCpuTensorsAloneAndRestoresOnExit) {
  Tensor x = Tensor::ones({2, 3}), w = Tensor::ones({4, 3}), b = Tensor::zeros({4});
  {
    autocast::Guard guard(DType::BFloat16);
    EXPECT_EQ(autocast::low_dtype(), DType::BFloat16);
    EXPECT_FALSE(autocast::should_lower({&x, &w, &b}));
    EXPECT_EQ(linear(x, w, b).dtype(), DType::Float32);
    EXPECT_EQ(cross_entropy(linear(x, w, b), Tensor::zeros({2}, DType::Int64)).dtype(), DType::Float32);
    {
      autocast::Guard off(std::nullopt);
      EXPECT_FALSE(autocast::low_dtype().has_value());
    }
    EXPECT_EQ(autocast::low_dtype(), DType::BFloat16);
  }
  EXPECT_FALSE(autocast::low_dtype().has_value());
}

}  // namespace
}  // namespace tandem::trainer
