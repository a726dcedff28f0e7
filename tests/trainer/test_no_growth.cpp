// A host that builds, trains and drops models in a loop (a sweep, a simulation that retrains a
// surrogate) must not grow. Each round builds a model (with dropout) and a Trainer, fits a few
// steps, validates, predicts, runs a fit that a nan loss stops mid-step (its graph is never
// backwarded), evaluates with grad on, and registers gradient hooks; then drops everything. The
// tensor storages alive after a round must be exactly those alive after the first one, so a
// reference cycle anywhere (a backward closure holding its own output, a hook holding its
// parameter) shows up as storages that outlive their round.
#include <gtest/gtest.h>

#include "base/error.h"
#include "tensor/ops/ops.h"
#include "tensor/storage.h"
#include "trainer_test_util.h"

namespace tandem::trainer {
namespace {

using testing::quiet_options;
using testing::SyntheticDataModule;
using testing::TempDir;
using testing::TinyClassifier;

void build_train_and_drop(const std::string& root) {
  TrainerOptions o = quiet_options(root);
  o.max_epochs = 1;
  o.enable_checkpointing = true;
  {
    Trainer trainer(o);
    TinyClassifier model;
    SyntheticDataModule dm;
    trainer.fit(model, dm);
    trainer.validate(model, dm);
    ASSERT_EQ(trainer.predict(model, dm).size(), 4u);
  }
  {
    Trainer trainer(o);
    TinyClassifier model;
    model.nan_at_step = 3;
    SyntheticDataModule dm;
    EXPECT_THROW(trainer.fit(model, dm), NonFiniteLossError);
  }
  TinyClassifier model;
  int fired = 0;
  for (const Tensor& p : model.parameters())
    p.register_post_accumulate_grad_hook([&fired](const Tensor& leaf) { fired += leaf.grad().defined() ? 1 : 0; });
  const Tensor x = Tensor::randn({8, 4});
  const Tensor target = Tensor::from_vector<int64_t>({0, 1, 2, 0, 1, 2, 0, 1}, {8});
  cross_entropy(model.forward(x), target).backward();
  EXPECT_EQ(fired, 4);
  model.eval();
  const Tensor unused_loss = cross_entropy(model.forward(x), target);  // grad on, never backwarded
  EXPECT_TRUE(unused_loss.requires_grad());
}

TEST(NoGrowth, BuildingTrainingAndDroppingModelsLeavesNoStorageBehind) {
  TempDir dir;
  build_train_and_drop(dir.path);  // the first round may set up what lives for the process
  const LiveStorage after_first = Storage::live();
  for (int round = 2; round <= 6; ++round) {
    build_train_and_drop(dir.path);
    const LiveStorage now = Storage::live();
    ASSERT_EQ(now.count, after_first.count) << "round " << round << " left storages behind";
    ASSERT_EQ(now.bytes, after_first.bytes) << "round " << round;
  }
}

TEST(NoGrowth, LiveStorageCountsWhatIsAlive) {
  const LiveStorage before = Storage::live();
  {
    Tensor a = Tensor::zeros({10}, DType::Float32);
    Tensor view = a.narrow(0, 2, 3);  // shares a's storage
    float external[6] = {};
    Tensor borrowed = Tensor::from_external(external, {6}, DType::Float32);
    const LiveStorage during = Storage::live();
    EXPECT_EQ(during.count, before.count + 2);
    EXPECT_EQ(during.bytes, before.bytes + 40 + 24);
  }
  EXPECT_EQ(Storage::live().count, before.count);
  EXPECT_EQ(Storage::live().bytes, before.bytes);
}

}  // namespace
}  // namespace tandem::trainer
