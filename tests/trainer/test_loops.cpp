// Loop counts: how many steps, optimizer steps, validations and sanity batches each option
// gives, counted through the module's and a callback's hooks. 64 training examples in batches
// of 8 are 8 batches per epoch; 32 validation examples are 4 batches.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/trainer/callbacks/model_checkpoint.h"
#include "engine/trainer/callbacks/model_summary.h"
#include "engine/trainer/callbacks/progress_bar.h"
#include "tests/accelerators/expect_error.h"
#include "trainer_test_util.h"

namespace tandem::trainer {
namespace {

using testing::CountingCallback;
using testing::quiet_options;
using testing::SyntheticDataModule;
using testing::TempDir;
using testing::TinyClassifier;

TEST(TrainerLoops, MaxEpochsRunsEveryBatchAndValidatesEachEpoch) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 3;
  auto counter = std::make_shared<CountingCallback>();
  o.callbacks = {counter};
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(model.count["training_step"], 24);
  EXPECT_EQ(model.count["optimizer_step"], 24);
  EXPECT_EQ(trainer.global_step(), 24);
  EXPECT_EQ(trainer.current_epoch(), 3);
  EXPECT_EQ(model.count["on_train_epoch_start"], 3);
  EXPECT_EQ(model.count["on_train_epoch_end"], 3);
  EXPECT_EQ(model.count["validation_step"], 2 + 3 * 4);  // sanity check (2) + 4 per epoch
  EXPECT_EQ(counter->count["sanity_check_start"], 1);
  EXPECT_EQ(counter->count["sanity_validation_end"], 1);
  EXPECT_EQ(counter->count["validation_end"], 3);
  EXPECT_EQ(model.count["on_fit_start"], 1);
  EXPECT_EQ(model.count["on_fit_end"], 1);
  EXPECT_EQ(dm.setup_calls, 1);
}

TEST(TrainerLoops, MaxStepsStopsMidEpoch) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_steps = 5;  // max_epochs unset: no epoch limit
  Trainer trainer(o);
  EXPECT_EQ(trainer.max_epochs(), -1);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(model.count["training_step"], 5);
  EXPECT_EQ(trainer.global_step(), 5);
}

TEST(TrainerLoops, MaxEpochsDefaultsTo1000WithoutMaxSteps) {
  TempDir dir;
  Trainer trainer(quiet_options(dir.path));
  EXPECT_EQ(trainer.max_epochs(), 1000);
}

TEST(TrainerLoops, LimitBatchesAsCountAndFraction) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 2;
  o.limit_train_batches = 3;      // int: 3 batches
  o.limit_val_batches = 0.5;      // float: half of 4
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(model.count["training_step"], 6);
  EXPECT_EQ(trainer.num_training_batches(), 3);
  EXPECT_EQ(trainer.num_val_batches(), 2);
  EXPECT_EQ(model.count["validation_step"], 2 + 2 * 2);
}

TEST(TrainerLoops, LimitValZeroDisablesValidation) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 1;
  o.limit_val_batches = 0;
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(model.count["validation_step"], 0);
  EXPECT_EQ(model.count["training_step"], 8);
}

TEST(TrainerLoops, ValCheckIntervalFractionValidatesWithinTheEpoch) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 1;
  o.num_sanity_val_steps = 0;
  o.val_check_interval = 0.25;  // every 2 of 8 batches
  auto counter = std::make_shared<CountingCallback>();
  o.callbacks = {counter};
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(counter->count["validation_end"], 4);
  EXPECT_EQ(model.count["validation_step"], 16);
}

TEST(TrainerLoops, ValCheckIntervalCountValidatesEveryNBatches) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 2;
  o.num_sanity_val_steps = 0;
  o.val_check_interval = 3;  // batches 3 and 6 of each epoch
  auto counter = std::make_shared<CountingCallback>();
  o.callbacks = {counter};
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(counter->count["validation_end"], 4);
}

TEST(TrainerLoops, ValCheckIntervalCountsAcrossEpochsWithoutEveryNEpoch) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 2;
  o.num_sanity_val_steps = 0;
  o.check_val_every_n_epoch.reset();
  o.val_check_interval = 5;  // total batches 5, 10, 15 of 16
  auto counter = std::make_shared<CountingCallback>();
  o.callbacks = {counter};
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(counter->count["validation_end"], 3);
}

TEST(TrainerLoops, CheckValEveryNEpoch) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 4;
  o.num_sanity_val_steps = 0;
  o.check_val_every_n_epoch = 2;  // after epochs 1 and 3
  auto counter = std::make_shared<CountingCallback>();
  o.callbacks = {counter};
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(counter->count["validation_end"], 2);
}

TEST(TrainerLoops, SanityStepsAllWithMinusOne) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 1;
  o.limit_train_batches = 1;
  o.num_sanity_val_steps = -1;
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(model.count["validation_step"], 4 + 4);
  // Sanity metrics are thrown away; the epoch's validation is what remains.
  EXPECT_TRUE(trainer.callback_metrics().count("val_loss"));
}

TEST(TrainerLoops, AccumulateGradBatchesStepsEveryNAndAtEpochEnd) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 2;
  o.accumulate_grad_batches = 3;  // steps after batches 3, 6 and the last (8)
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(model.count["training_step"], 16);
  EXPECT_EQ(model.count["optimizer_step"], 6);
  EXPECT_EQ(trainer.global_step(), 6);
}

TEST(TrainerLoops, AccumulationAveragesGradients) {
  // Two batches of 4 accumulated equal one batch of 8 (same examples, no dropout, SGD).
  class SgdModel : public TinyClassifier {
   public:
    SgdModel() : TinyClassifier(0.1, 0.0) {}
    OptimizerConfig configure_optimizers() override {
      OptimizerConfig c;
      c.optimizer = std::make_shared<optim::SGD>(parameters(), optim::SGDOptions{.lr = 0.1});
      return c;
    }
  };
  class UnshuffledData : public SyntheticDataModule {
   public:
    explicit UnshuffledData(int64_t batch) : SyntheticDataModule(8, 8, batch) {}
    std::shared_ptr<data::DataLoader> train_dataloader() override { return val_dataloader_always(); }
  };
  TempDir dir;
  manual_seed(3);
  SgdModel a;
  manual_seed(3);
  SgdModel b;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 1;
  o.limit_val_batches = 0;
  {
    Trainer t(o);
    UnshuffledData dm(8);
    t.fit(a, dm);
  }
  o.accumulate_grad_batches = 2;
  {
    Trainer t(o);
    UnshuffledData dm(4);
    t.fit(b, dm);
    EXPECT_EQ(t.global_step(), 1);
  }
  const auto wa = testing::flat_weights(a), wb = testing::flat_weights(b);
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i) EXPECT_NEAR(wa[i], wb[i], 1e-6) << i;
}

TEST(TrainerLoops, FastDevRunRunsOneBatchOfEachAndWritesNothing) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.enable_checkpointing = true;
  o.fast_dev_run = true;
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(model.count["training_step"], 1);
  EXPECT_EQ(model.count["validation_step"], 1);  // no sanity check
  EXPECT_EQ(trainer.global_step(), 1);
  trainer.test(model, dm, "", false);
  EXPECT_EQ(model.count["test_step"], 1);
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(dir.path) / "lightning_logs"));
  EXPECT_EQ(trainer.log_dir(), dir.path);
}

TEST(TrainerLoops, FastDevRunN) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.fast_dev_run = 3;
  o.max_epochs = 5;  // overridden: one epoch
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(model.count["training_step"], 3);
  EXPECT_EQ(model.count["validation_step"], 3);
  EXPECT_EQ(model.count["on_train_epoch_start"], 1);
}

TEST(TrainerLoops, GradientClippingByNorm) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_steps = 4;
  o.gradient_clip_val = 0.01;
  auto counter = std::make_shared<CountingCallback>();
  counter->record_grad_norm = true;
  o.callbacks = {counter};
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  ASSERT_EQ(counter->grad_norms.size(), 4u);
  for (double n : counter->grad_norms) EXPECT_LE(n, 0.01 * (1 + 1e-4));

  TrainerOptions unclipped = quiet_options(dir.path);
  unclipped.max_steps = 4;
  auto counter2 = std::make_shared<CountingCallback>();
  counter2->record_grad_norm = true;
  unclipped.callbacks = {counter2};
  Trainer t2(unclipped);
  TinyClassifier model2;
  t2.fit(model2, dm);
  for (double n : counter2->grad_norms) EXPECT_GT(n, 0.01);
}

TEST(TrainerLoops, GradientClippingByValue) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_steps = 3;
  o.gradient_clip_val = 0.001;
  o.gradient_clip_algorithm = "value";
  auto counter = std::make_shared<CountingCallback>();
  counter->record_grad_norm = true;
  o.callbacks = {counter};
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  ASSERT_EQ(counter->grad_max_abs.size(), 3u);
  for (double m : counter->grad_max_abs) EXPECT_LE(m, 0.001 + 1e-9);
}

TEST(TrainerLoops, StepIntervalSchedulerStepsPerOptimizerStep) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_steps = 5;
  Trainer trainer(o);
  TinyClassifier model;
  model.scheduler_interval = "step";
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(trainer.lr_scheduler()->last_epoch(), 5);
  EXPECT_DOUBLE_EQ(trainer.optimizer()->param_groups()[0].lr(), 0.05 * 0.25);  // StepLR(2, 0.5) at 5
}

TEST(TrainerLoops, EpochIntervalSchedulerStepsPerEpoch) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 3;
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(trainer.lr_scheduler()->last_epoch(), 3);
}

TEST(TrainerLoops, NanLossStopsWithStepAndEpoch) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.enable_checkpointing = true;
  o.max_epochs = 3;
  Trainer trainer(o);
  TinyClassifier model;
  model.nan_at_step = 10;  // epoch 1, batch 2
  SyntheticDataModule dm;
  expect_error<NonFiniteLossError>([&] { trainer.fit(model, dm); }, {"nan", "epoch 1", "batch 2", "global step 10"});
  for (float w : testing::flat_weights(model)) ASSERT_TRUE(std::isfinite(w));
  // Only the finite checkpoint of epoch 0 exists.
  const auto ckpt_dir = std::filesystem::path(trainer.log_dir()) / "checkpoints";
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(ckpt_dir)) files.push_back(e.path().filename().string());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0], "epoch=0-step=8.safetensors");
}

TEST(TrainerLoops, PredictReturnsOneOutputPerBatch) {
  TempDir dir;
  Trainer trainer(quiet_options(dir.path));
  TinyClassifier model;
  SyntheticDataModule dm;
  const std::vector<Tensor> out = trainer.predict(model, dm);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].shape(), (Shape{8, 3}));
  EXPECT_FALSE(out[0].requires_grad());
}

TEST(TrainerLoops, Precision64TrainsInFloat64) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.precision = "64-true";
  o.max_steps = 2;
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  for (const auto& p : model.parameters()) EXPECT_EQ(p.dtype(), DType::Float64);
  EXPECT_EQ(trainer.global_step(), 2);
}

}  // namespace
}  // namespace tandem::trainer

namespace tandem::trainer {
namespace {

template <typename T>
int count_callbacks(const Trainer& t) {
  int n = 0;
  for (const auto& cb : t.callbacks()) n += dynamic_cast<T*>(cb.get()) != nullptr;
  return n;
}

TEST(TrainerSwitches, EnableFlagsAddOrLeaveOutTheDefaultCallbacks) {
  testing::TempDir dir;
  TrainerOptions on = testing::quiet_options(dir.path);
  on.enable_progress_bar = on.enable_model_summary = on.enable_checkpointing = true;
  Trainer with(on);
  EXPECT_EQ(count_callbacks<ProgressBar>(with), 1);
  EXPECT_EQ(count_callbacks<ModelSummary>(with), 1);
  EXPECT_EQ(count_callbacks<ModelCheckpoint>(with), 1);
  // Checkpointing runs last, after the display callbacks (Lightning's order).
  EXPECT_NE(dynamic_cast<ModelCheckpoint*>(with.callbacks().back().get()), nullptr);

  Trainer without(testing::quiet_options(dir.path));
  EXPECT_TRUE(without.callbacks().empty());
  EXPECT_EQ(without.checkpoint_callback(), nullptr);
}

TEST(TrainerSwitches, CheckpointingOffWritesNoCheckpoint) {
  testing::TempDir dir;
  TrainerOptions o = testing::quiet_options(dir.path);
  o.max_epochs = 2;
  Trainer trainer(o);
  testing::TinyClassifier model;
  testing::SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_TRUE(std::filesystem::exists(trainer.log_dir() + "/metrics.csv"));
  EXPECT_FALSE(std::filesystem::exists(trainer.log_dir() + "/checkpoints"));

  TrainerOptions conflicting = testing::quiet_options(dir.path);
  conflicting.callbacks = {std::make_shared<ModelCheckpoint>()};
  expect_error<ConfigError>([&] { Trainer t(conflicting); }, {"enable_checkpointing=false", "ModelCheckpoint"});
}

TEST(TrainerSwitches, DeterministicRunsAreBitIdentical) {
  // Shuffled data, dropout and Adam: two runs from the same seed end with the same bits, with no
  // option asking for it (--trainer.deterministic is accepted and changes nothing).
  testing::TempDir dir;
  std::vector<std::vector<float>> weights;
  for (int run = 0; run < 2; ++run) {
    manual_seed(11);
    TrainerOptions o = testing::quiet_options(dir.path);
    o.max_epochs = 2;
    Trainer trainer(o);
    testing::TinyClassifier model;
    testing::SyntheticDataModule dm;
    trainer.fit(model, dm);
    weights.push_back(testing::flat_weights(model));
  }
  ASSERT_EQ(weights[0].size(), weights[1].size());
  EXPECT_EQ(std::memcmp(weights[0].data(), weights[1].data(), weights[0].size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace tandem::trainer
