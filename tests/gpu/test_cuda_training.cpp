// The CUDA backend end to end (label gpu; skips without a device): the Trainer on one GPU against
// the CPU reference from the same seed, mixed precision (autocast dtypes, float32 master
// weights, the 16-mixed loss scaler), the caching allocator's reuse, statistics and
// out-of-memory message, and pinned host-to-device copies.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "../trainer/trainer_test_util.h"
#include "base/error.h"
#include "engine/accelerators/cuda_accelerator.h"
#include "gpu_test_skip.h"
#include "kernels/backend.h"
#include "kernels/cuda/device_query.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/ops.h"

namespace tandem::trainer::testing {
namespace {

// Fits TinyClassifier (dropout on: CUDA draws the CPU's Philox masks) for `steps` steps.
std::vector<float> fit_weights(const std::string& accelerator, const std::string& precision, int steps,
                               double* val_loss = nullptr, const GradScaler** scaler_seen = nullptr) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.accelerator = accelerator;
  o.precision = precision;
  o.max_steps = steps;
  o.max_epochs = -1;
  manual_seed(7);
  TinyClassifier model(0.02, 0.25);
  SyntheticDataModule data(256, 64, 32);
  Trainer trainer(o);
  trainer.fit(model, data);
  if (val_loss) *val_loss = trainer.callback_metrics().at("val_loss");
  if (scaler_seen) *scaler_seen = trainer.grad_scaler();
  for (const auto& p : model.parameters()) {
    EXPECT_EQ(p.dtype(), DType::Float32) << "master weights stay float32";
    EXPECT_EQ(p.device().is_cuda(), accelerator == "cuda");
  }
  model.to(Device::cpu());
  return flat_weights(model);
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - double(b[i])) / (1.0 + std::abs(double(a[i]))));
  return worst;
}

TEST(CudaTraining, FitOnOneGpuMatchesTheCpuFromTheSameSeed) {
  SKIP_WITHOUT_GPU();
  double cpu_val = 0, gpu_val = 0;
  const auto cpu = fit_weights("cpu", "32-true", 24, &cpu_val);
  const auto gpu = fit_weights("cuda", "32-true", 24, &gpu_val);
  // Same data order, same dropout masks, same Adam arithmetic: only summation order differs.
  EXPECT_LT(max_rel_diff(cpu, gpu), 2e-4);
  EXPECT_NEAR(cpu_val, gpu_val, 1e-4 * (1 + std::abs(cpu_val)));
}

TEST(CudaTraining, MixedPrecisionTrainsFloat32MasterWeightsCloseToFloat32) {
  SKIP_WITHOUT_GPU();
  double val32 = 0, val_bf16 = 0, val_fp16 = 0, val_start = 0;
  fit_weights("cuda", "32-true", 8, &val_start);  // one epoch (8 batches of 32): validation has run
  const auto w32 = fit_weights("cuda", "32-true", 48, &val32);
  const auto wbf16 = fit_weights("cuda", "bf16-mixed", 48, &val_bf16);
  const GradScaler* scaler = nullptr;
  const auto wfp16 = fit_weights("cuda", "16-mixed", 48, &val_fp16, &scaler);
  EXPECT_LT(val_bf16, val_start);  // it learns
  EXPECT_LT(val_fp16, val_start);
  // bf16 products carry 8 bits of mantissa, fp16 11: the runs stay near the float32 one.
  EXPECT_LT(max_rel_diff(w32, wbf16), 5e-2);
  EXPECT_LT(max_rel_diff(w32, wfp16), 1e-2);
  EXPECT_NEAR(val_bf16, val32, 0.05);
  EXPECT_NEAR(val_fp16, val32, 0.02);
}

// 16-mixed clips the unscaled gradient (Strategy::optimizer_step unscales, then the trainer clips):
// the norm the step used is clip_val. Clipping the scaled gradient (65536x) and unscaling after
// would leave it 65536 times smaller; no clipping would leave it above clip_val.
TEST(CudaTraining, SixteenMixedClipsTheUnscaledGradient) {
  SKIP_WITHOUT_GPU();
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.accelerator = "cuda";
  o.precision = "16-mixed";
  o.max_steps = 4;
  o.gradient_clip_val = 1e-3;
  auto counter = std::make_shared<CountingCallback>();
  counter->record_grad_norm = true;
  o.callbacks = {counter};
  manual_seed(7);
  TinyClassifier model(0.02, 0.0);
  SyntheticDataModule data(256, 64, 32);
  Trainer trainer(o);
  trainer.fit(model, data);
  int finite = 0;
  for (double n : counter->grad_norms) {
    if (!std::isfinite(n)) continue;  // a step the scaler skipped (inf in fp16)
    ++finite;
    EXPECT_NEAR(n, 1e-3, 1e-5);
  }
  EXPECT_GE(finite, 2);
}

TEST(CudaTraining, AutocastLowersLinearAndRaisesTheLoss) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::vector<float> xv(37 * 19), wv(11 * 19), bv(11);
  for (auto* v : {&xv, &wv, &bv})
    for (float& f : *v) f = nd(rng);
  Tensor x = Tensor::from_vector(xv, {37, 19}).to(Device::cuda(0));
  Tensor w = Tensor::from_vector(wv, {11, 19}).to(Device::cuda(0)).requires_grad_();
  Tensor b = Tensor::from_vector(bv, {11}).to(Device::cuda(0)).requires_grad_();
  Tensor target = Tensor::zeros({37}, DType::Int64, Device::cuda(0));
  for (DType low : {DType::BFloat16, DType::Float16}) {
    Tensor y, loss;
    {
      autocast::Guard guard(low);
      y = linear(x, w, b);
      loss = cross_entropy(y, target);
    }
    EXPECT_EQ(y.dtype(), low);
    EXPECT_EQ(loss.dtype(), DType::Float32);
    loss.backward();
    EXPECT_EQ(w.grad().dtype(), DType::Float32);  // gradients flow back through the cast
    Tensor ref = linear(x.to(Device::cpu()), w.detach().to(Device::cpu()), b.detach().to(Device::cpu()));
    const auto got = y.to(DType::Float32).to(Device::cpu()).to_vector<float>();
    const auto want = ref.to_vector<float>();
    const double tol = low == DType::BFloat16 ? 0.08 : 0.01;  // 19-term dot products of rounded inputs
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << i;
    w.set_grad(Tensor());
    b.set_grad(Tensor());
  }
}

TEST(CudaAllocator, ReusesFreedBlocksAndReportsStatistics) {
  SKIP_WITHOUT_GPU();
  CUDAAccelerator acc;
  const AcceleratorDevice dev{"cuda", 0};
  {  // warm-up in the loop's own pattern: two 4 MB blocks alive at once, both cached afterwards
    Tensor t = Tensor::zeros({1000, 1000}, DType::Float32, Device::cuda(0));
    Tensor u = t + 1.0;
  }
  const DeviceStats before = acc.get_device_stats(dev);
  ASSERT_TRUE(before.count("cuda_malloc_calls") && before.count("reserved_bytes")) << "allocator stats missing";
  for (int i = 0; i < 50; ++i) {
    Tensor t = Tensor::zeros({1000, 1000}, DType::Float32, Device::cuda(0));
    Tensor u = t + 1.0;
  }
  const DeviceStats after = acc.get_device_stats(dev);
  EXPECT_EQ(after.at("cuda_malloc_calls"), before.at("cuda_malloc_calls"));  // all served from the cache
  EXPECT_GE(after.at("allocation_requests"), before.at("allocation_requests") + 100);
  EXPECT_GE(after.at("peak_allocated_bytes"), 2 * 4e6);
  EXPECT_GE(after.at("reserved_bytes"), after.at("allocated_bytes"));
}

TEST(CudaAllocator, OutOfMemoryIsADeviceErrorThatSaysWhatWasAsked) {
  SKIP_WITHOUT_GPU();
  try {
    Tensor::empty({int64_t(1) << 40}, DType::Float32, Device::cuda(0));  // 4 TiB
    ADD_FAILURE() << "expected DeviceError";
  } catch (const DeviceError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("CUDA out of memory on cuda:0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("smaller batch size"), std::string::npos) << msg;
  }
  Tensor still_fine = Tensor::ones({10}, DType::Float32, Device::cuda(0));  // the device still works
  EXPECT_EQ(still_fine.to(Device::cpu()).to_vector<float>(), std::vector<float>(10, 1.0f));
}

TEST(CudaCopies, PinnedStagingNeverAliasesTheNextCopy) {
  SKIP_WITHOUT_GPU();
  const int64_t n = 3'000'017;
  std::vector<float> host(static_cast<size_t>(n), 0.0f);
  std::vector<Tensor> on_device;
  for (int round = 0; round < 4; ++round) {
    for (int64_t i = 0; i < n; ++i) host[size_t(i)] = float(i % 1000) * 0.5f + float(round);
    // The CPU source tensor is freed as soon as .to() returns, before the copy may have run.
    on_device.push_back(Tensor::from_vector(host, {n}).to(Device::cuda(0)));
  }
  for (int round = 0; round < 4; ++round) {
    const auto back = on_device[size_t(round)].to(Device::cpu()).to_vector<float>();
    for (int64_t i = 0; i < n; i += 9973) ASSERT_EQ(back[size_t(i)], float(i % 1000) * 0.5f + float(round)) << round;
  }
}

}  // namespace
}  // namespace tandem::trainer::testing
