// dp over CUDA devices (two emulated GPUs in the emulation build): replicas on each device, the
// batch split along dim 0 and run on a thread per device, gradients summed onto cuda:0 in device
// order. Its weights after several Adam steps equal one GPU's at the same batch (and the CPU's),
// with an uneven split and gradient accumulation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "../trainer/trainer_test_util.h"
#include "gpu_test_skip.h"

namespace tandem::trainer::testing {
namespace {

std::vector<float> fit_weights(const std::string& accelerator, int devices, const std::string& strategy) {
  manual_seed(7);
  TinyClassifier model(0.05, 0.0);
  TempDir dir;
  SyntheticDataModule dm(37, 16, 5);  // batches of 5 split 3 + 2; the last batch of 2 splits 1 + 1
  TrainerOptions o = quiet_options(dir.path);
  o.accelerator = accelerator;
  o.devices = devices;
  o.strategy = strategy;
  o.max_epochs = 2;
  o.accumulate_grad_batches = 2;
  o.num_sanity_val_steps = 0;
  Trainer trainer(o);
  trainer.fit(model, dm);
  EXPECT_EQ(model.parameters().front().device().is_cpu(), accelerator == "cpu") << strategy << " trained elsewhere";
  return flat_weights(model);
}

TEST(CudaDataParallel, TwoGpusEqualOneGpuAtTheSameBatch) {
  SKIP_WITHOUT_GPU();
  if (cuda::visible_device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  const std::vector<float> one_gpu = fit_weights("cuda", 1, "single_device");
  const std::vector<float> two_gpus = fit_weights("cuda", 2, "dp");
  const std::vector<float> cpu = fit_weights("cpu", 1, "single_device");
  EXPECT_LE(max_relative_difference(two_gpus, one_gpu), 1e-5);
  EXPECT_LE(max_relative_difference(one_gpu, cpu), 1e-4);  // GPU kernels vs the CPU reference
  manual_seed(7);
  TinyClassifier untouched(0.05, 0.0);
  EXPECT_GT(max_relative_difference(flat_weights(untouched), one_gpu), 1e-3);  // training moved them
}

}  // namespace
}  // namespace tandem::trainer::testing
