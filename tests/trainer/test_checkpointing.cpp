// Checkpoints from the Trainer's side: what trainer_state holds, ckpt_path "last" / "best" /
// a path / missing, and exact resume: a run stopped after epoch k (or mid-epoch) and resumed
// from its checkpoint ends with bit-identical weights to the uninterrupted run (shuffled data,
// dropout, Adam and StepLR, so every piece of state has to come back).
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/trainer/callbacks/early_stopping.h"
#include "engine/trainer/callbacks/model_checkpoint.h"
#include "engine/trainer/checkpoint.h"
#include "tests/accelerators/expect_error.h"
#include "trainer_test_util.h"

namespace fs = std::filesystem;

namespace tandem::trainer {
namespace {

using testing::flat_weights;
using testing::quiet_options;
using testing::SyntheticDataModule;
using testing::TempDir;
using testing::TinyClassifier;

TrainerOptions checkpointing_options(const std::string& root, const std::string& dirpath) {
  TrainerOptions o = quiet_options(root);
  o.enable_checkpointing = true;
  ModelCheckpointOptions mo;
  mo.dirpath = dirpath;
  mo.filename = "{epoch}";
  mo.save_top_k = -1;
  mo.save_last = true;
  o.callbacks = {std::make_shared<ModelCheckpoint>(mo)};
  return o;
}

// The uninterrupted run: 4 epochs from seed 42.
std::vector<float> uninterrupted(const std::string& root) {
  manual_seed(42);
  TinyClassifier model;
  TrainerOptions o = checkpointing_options(root, root + "/full");
  o.max_epochs = 4;
  Trainer trainer(o);
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  return flat_weights(model);
}

void expect_bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  size_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i) differing += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  EXPECT_EQ(differing, 0u) << "of " << a.size() << " weights";
}

TEST(TrainerCheckpointing, ResumeAfterEpochIsBitIdentical) {
  TempDir dir;
  const std::vector<float> full = uninterrupted(dir.path);

  manual_seed(42);
  {
    TinyClassifier model;
    TrainerOptions o = checkpointing_options(dir.path, dir.path + "/part");
    o.max_epochs = 2;  // stopped after epoch 1
    Trainer trainer(o);
    SyntheticDataModule dm;
    trainer.fit(model, dm);
  }
  manual_seed(7);  // a different init and RNG position: the checkpoint must restore both
  TinyClassifier resumed;
  TrainerOptions o = checkpointing_options(dir.path, dir.path + "/resumed");
  o.max_epochs = 4;
  Trainer trainer(o);
  SyntheticDataModule dm;
  trainer.fit(resumed, dm, dir.path + "/part/last.safetensors");
  EXPECT_EQ(trainer.current_epoch(), 4);
  EXPECT_EQ(trainer.global_step(), 32);
  EXPECT_EQ(resumed.count["on_train_epoch_start"], 2);  // epochs 2 and 3 only
  expect_bit_identical(full, flat_weights(resumed));
  EXPECT_EQ(trainer.lr_scheduler()->last_epoch(), 4);

  // The uninterrupted run's own epoch-1 checkpoint resumes to the same weights too.
  manual_seed(99);
  TinyClassifier from_full;
  TrainerOptions o2 = checkpointing_options(dir.path, dir.path + "/resumed2");
  o2.max_epochs = 4;
  Trainer t2(o2);
  t2.fit(from_full, dm, dir.path + "/full/epoch=1.safetensors");
  expect_bit_identical(full, flat_weights(from_full));
}

TEST(TrainerCheckpointing, ResumeMidEpochIsBitIdentical) {
  TempDir dir;
  const std::vector<float> full = uninterrupted(dir.path);
  manual_seed(42);
  {
    TinyClassifier model;
    TrainerOptions o = checkpointing_options(dir.path, dir.path + "/part");
    o.max_steps = 12;  // epoch 1, after its 4th batch
    Trainer trainer(o);
    SyntheticDataModule dm;
    trainer.fit(model, dm);
  }
  const Checkpoint saved = load_checkpoint(dir.path + "/part/last.safetensors");
  EXPECT_EQ(saved.trainer_state["global_step"], 12);
  EXPECT_EQ(saved.trainer_state["loops"]["fit"]["batch_in_epoch"], 4);
  EXPECT_EQ(saved.trainer_state["loops"]["fit"]["epoch_finished"], false);

  manual_seed(7);
  TinyClassifier resumed;
  TrainerOptions o = checkpointing_options(dir.path, dir.path + "/resumed");
  o.max_epochs = 4;
  Trainer trainer(o);
  SyntheticDataModule dm;
  trainer.fit(resumed, dm, dir.path + "/part/last.safetensors");
  EXPECT_EQ(resumed.count["training_step"], 32 - 12);
  expect_bit_identical(full, flat_weights(resumed));
}

// Checkpoints saved by every_n_train_steps (inside on_train_batch_end) resume exactly: one at
// an epoch's last batch (step 8: the epoch-interval StepLR step and the epoch's validation had
// not run yet when it was saved) and one mid-epoch (step 12).
TEST(TrainerCheckpointing, ResumeFromStepCheckpointsIsBitIdentical) {
  TempDir dir;
  const std::vector<float> full = uninterrupted(dir.path);
  auto step_options = [&](const std::string& dirpath) {
    TrainerOptions o = quiet_options(dir.path);
    o.enable_checkpointing = true;
    ModelCheckpointOptions mo;
    mo.dirpath = dirpath;
    mo.save_top_k = -1;
    mo.every_n_train_steps = 4;
    o.callbacks = {std::make_shared<ModelCheckpoint>(mo)};
    o.max_epochs = 4;
    return o;
  };
  SyntheticDataModule dm;
  manual_seed(42);
  {
    TinyClassifier model;
    Trainer trainer(step_options(dir.path + "/steps"));
    trainer.fit(model, dm);
    expect_bit_identical(full, flat_weights(model));  // saving does not change training
  }
  for (const auto& [name, steps_done] : {std::pair<std::string, int>{"epoch=0-step=8", 8}, {"epoch=1-step=12", 12}}) {
    SCOPED_TRACE(name);
    manual_seed(7);
    TinyClassifier resumed;
    Trainer trainer(step_options(dir.path + "/resumed_" + name));
    trainer.fit(resumed, dm, dir.path + "/steps/" + name + ".safetensors");
    EXPECT_EQ(resumed.count["training_step"], 32 - steps_done);
    EXPECT_EQ(trainer.lr_scheduler()->last_epoch(), 4);
    expect_bit_identical(full, flat_weights(resumed));
  }
}

TEST(TrainerCheckpointing, TrainerStateHoldsWhatResumeNeeds) {
  TempDir dir;
  manual_seed(5);
  TinyClassifier model;
  TrainerOptions o = checkpointing_options(dir.path, dir.path + "/c");
  o.max_epochs = 1;
  o.callbacks.push_back(std::make_shared<EarlyStopping>("val_loss", 5));
  Trainer trainer(o);
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  const Checkpoint ckpt = load_checkpoint(dir.path + "/c/last.safetensors");
  const nlohmann::json& s = ckpt.trainer_state;
  EXPECT_EQ(s["epoch"], 0);
  EXPECT_EQ(s["global_step"], 8);
  EXPECT_EQ(s["loops"]["fit"]["epoch_finished"], true);
  EXPECT_EQ(s["world_size"], 1);
  EXPECT_EQ(s["precision"], "32-true");
  EXPECT_TRUE(s.contains("tandem_version"));
  EXPECT_EQ(s["generator"]["seed"], 5u);
  EXPECT_GT(s["generator"]["offset"].get<uint64_t>(), 0u);  // dropout drew from it
  EXPECT_EQ(s["hparams"]["lr"], 0.05);
  EXPECT_EQ(s["datamodule_hparams"]["batch_size"], 8);
  EXPECT_TRUE(s["callbacks"].contains("ModelCheckpoint{monitor=,mode=min,every_n_epochs=1}")) << s["callbacks"].dump();
  EXPECT_EQ(s["loops"]["fit"]["after_batch_pending"], false);
  EXPECT_TRUE(s["callbacks"].contains("EarlyStopping{monitor=val_loss,mode=min}")) << s["callbacks"].dump();
  ASSERT_TRUE(ckpt.optimizer.has_value());
  EXPECT_TRUE(ckpt.optimizer->state.contains("0.exp_avg"));
  EXPECT_EQ(ckpt.scheduler["last_epoch"], 1);
  EXPECT_TRUE(ckpt.model.contains("net.0.weight"));
}

TEST(TrainerCheckpointing, CkptPathLastFindsTheNewestVersion) {
  TempDir dir;
  manual_seed(1);
  {
    TinyClassifier model;
    TrainerOptions o = quiet_options(dir.path);
    o.enable_checkpointing = true;
    ModelCheckpointOptions mo;
    mo.save_last = true;
    o.callbacks = {std::make_shared<ModelCheckpoint>(mo)};  // default dirpath: version_0/checkpoints
    o.max_epochs = 1;
    Trainer trainer(o);
    SyntheticDataModule dm;
    trainer.fit(model, dm);
  }
  TinyClassifier model;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 2;
  Trainer trainer(o);
  SyntheticDataModule dm;
  trainer.fit(model, dm, "last");
  EXPECT_EQ(model.count["on_train_epoch_start"], 1);  // resumed at epoch 1
  EXPECT_EQ(trainer.global_step(), 16);
  EXPECT_EQ(trainer.log_dir(), dir.path + "/lightning_logs/version_1");
}

TEST(TrainerCheckpointing, CkptPathBestLoadsTheBestForTest) {
  TempDir dir;
  ModelCheckpointOptions mo;
  mo.dirpath = dir.path + "/c";
  mo.monitor = "scripted";
  mo.filename = "{epoch}";
  TrainerOptions o = quiet_options(dir.path);
  o.enable_checkpointing = true;
  o.max_epochs = 3;
  o.callbacks = {std::make_shared<ModelCheckpoint>(mo)};
  Trainer trainer(o);
  TinyClassifier model;
  model.scripted_val_loss = {3, 1, 2};
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(trainer.checkpoint_callback()->best_model_path(), dir.path + "/c/epoch=1.safetensors");
  const Checkpoint best = load_checkpoint(dir.path + "/c/epoch=1.safetensors");
  TinyClassifier fresh;
  trainer.test(fresh, dm, "best", false);
  const StateDict sd = fresh.state_dict();
  for (const auto& [name, t] : best.model) {
    EXPECT_EQ(t.to_vector<float>(), sd.at(name).to_vector<float>()) << name;
  }
}

TEST(TrainerCheckpointing, CkptPathBestInANewProcessUsesWhatTheCheckpointsRecorded) {
  // `tandem fit` then `tandem test --ckpt_path=best`: the second Trainer never ran fit, so the
  // best comes from the ModelCheckpoint state saved in the newest checkpoint.
  TempDir dir;
  ModelCheckpointOptions mo;
  mo.monitor = "scripted";
  mo.filename = "{epoch}";
  mo.save_top_k = 2;
  auto options_with = [&](const ModelCheckpointOptions& m) {
    TrainerOptions o = quiet_options(dir.path);
    o.enable_checkpointing = true;
    o.max_epochs = 4;
    o.callbacks = {std::make_shared<ModelCheckpoint>(m)};
    return o;
  };
  {
    Trainer trainer(options_with(mo));
    TinyClassifier model;
    model.scripted_val_loss = {3, 1, 2, 4};  // best: epoch 1; kept: epochs 1 and 2
    SyntheticDataModule dm;
    trainer.fit(model, dm);
  }
  const std::string best = dir.path + "/lightning_logs/version_0/checkpoints/epoch=1.safetensors";
  const Checkpoint expected = load_checkpoint(best);
  for (const ModelCheckpointOptions& m : {mo, ModelCheckpointOptions{}}) {  // same options, or the default one
    Trainer tester(options_with(m));
    TinyClassifier fresh;
    SyntheticDataModule dm;
    tester.test(fresh, dm, "best", false);
    const StateDict sd = fresh.state_dict();
    for (const auto& [name, t] : expected.model) EXPECT_EQ(t.to_vector<float>(), sd.at(name).to_vector<float>()) << name;
  }
}

TEST(TrainerCheckpointing, CkptPathErrorsSayWhereTheyLooked) {
  TempDir dir;
  Trainer trainer(quiet_options(dir.path));
  TinyClassifier model;
  SyntheticDataModule dm;
  expect_error<ConfigError>([&] { trainer.test(model, dm, "last", false); }, {"ckpt_path=\"last\"", "lightning_logs"});
  expect_error<ConfigError>([&] { trainer.test(model, dm, "best", false); }, {"ckpt_path=\"best\"", "ModelCheckpoint"});
  expect_error<ConfigError>([&] { trainer.test(model, dm, dir.path + "/nope.safetensors", false); },
                            {dir.path + "/nope.safetensors", "does not exist"});

  TrainerOptions o = quiet_options(dir.path);
  o.enable_checkpointing = true;
  Trainer with_checkpoint(o);
  expect_error<ConfigError>([&] { with_checkpoint.test(model, dm, "best", false); },
                            {"no best checkpoint is known", "fit()", "lightning_logs"});
}

TEST(TrainerCheckpointing, ResumingFromAWeightsOnlyFileIsAClearError) {
  TempDir dir;
  TinyClassifier model;
  Checkpoint weights_only;
  weights_only.model = model.state_dict();
  save_checkpoint(dir.path + "/w.safetensors", weights_only);
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 1;
  Trainer trainer(o);
  SyntheticDataModule dm;
  expect_error<DataError>([&] { trainer.fit(model, dm, dir.path + "/w.safetensors"); }, {"w.safetensors", "weights only"});
  // ... but validate/test/predict load it.
  EXPECT_NO_THROW(trainer.validate(model, dm, dir.path + "/w.safetensors", false));
}

}  // namespace
}  // namespace tandem::trainer
