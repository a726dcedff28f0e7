// trainer.callbacks in the configuration: the three spellings of an entry, resolution to the
// full option set (what --print_config shows), the callbacks it builds with those options,
// the errors for unknown classes, options and bad values, and a Trainer built from a parsed
// command line that stops early because of a configured EarlyStopping.
#include <gtest/gtest.h>

#include "engine/config/config_args.h"
#include "engine/trainer/callbacks/callback_config.h"
#include "engine/trainer/callbacks/early_stopping.h"
#include "engine/trainer/callbacks/learning_rate_monitor.h"
#include "engine/trainer/callbacks/model_checkpoint.h"
#include "engine/trainer/callbacks/model_summary.h"
#include "engine/trainer/trainer_section.h"
#include "tests/accelerators/expect_error.h"
#include "trainer_test_util.h"

namespace tandem::trainer {
namespace {

YAML::Node config_with_callbacks(const std::string& yaml_list) {
  YAML::Node config;
  config["trainer"]["callbacks"] = YAML::Load(yaml_list);
  return config;
}

YAML::Node resolved(const std::string& yaml_list) {
  YAML::Node config = config_with_callbacks(yaml_list);
  resolve_callbacks_config(config);
  return config["trainer"]["callbacks"];
}

TEST(CallbackConfig, ThreeSpellingsResolveToTheSameEntry) {
  const YAML::Node a = resolved("[{name: EarlyStopping, monitor: val_acc, mode: max}]");
  const YAML::Node b = resolved(
      "[{class_path: lightning.pytorch.callbacks.EarlyStopping, init_args: {monitor: val_acc, mode: max}}]");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(config_to_yaml(a), config_to_yaml(b));
  // Every option of the class, given or defaulted, name first.
  const YAML::Node e = a[0];
  EXPECT_EQ(e["name"].Scalar(), "EarlyStopping");
  EXPECT_EQ(e["monitor"].Scalar(), "val_acc");
  EXPECT_EQ(e["mode"].Scalar(), "max");
  EXPECT_EQ(e["patience"].as<int>(), 3);
  EXPECT_EQ(e["min_delta"].as<double>(), 0.0);
  EXPECT_TRUE(e["stopping_threshold"].IsNull());
  EXPECT_EQ(e.begin()->first.Scalar(), "name");

  const YAML::Node bare = resolved("[LearningRateMonitor, learningratemonitor]");
  ASSERT_EQ(bare.size(), 2u);
  EXPECT_EQ(bare[1]["name"].Scalar(), "LearningRateMonitor");  // canonical spelling
  EXPECT_TRUE(bare[0]["logging_interval"].IsNull());
  // Resolving again changes nothing.
  YAML::Node again = config_with_callbacks(config_to_yaml(bare));
  resolve_callbacks_config(again);
  EXPECT_EQ(config_to_yaml(again["trainer"]["callbacks"]), config_to_yaml(bare));
}

TEST(CallbackConfig, BuildsEachClassWithItsOptions) {
  const auto callbacks = callbacks_from_config(YAML::Load(
      "[{name: ModelCheckpoint, monitor: val_acc, mode: max, save_top_k: 2, save_last: true, every_n_epochs: 3, "
      "filename: '{epoch}-{val_acc:.3f}'},"
      " {name: EarlyStopping, monitor: val_loss, patience: 5, min_delta: 0.01, stopping_threshold: 0.1},"
      " {name: LearningRateMonitor, logging_interval: step}, {name: ModelSummary, max_depth: 2}]"));
  ASSERT_EQ(callbacks.size(), 4u);
  auto* mc = dynamic_cast<ModelCheckpoint*>(callbacks[0].get());
  ASSERT_NE(mc, nullptr);
  EXPECT_EQ(mc->options().monitor, "val_acc");
  EXPECT_EQ(mc->options().mode, "max");
  EXPECT_EQ(mc->options().save_top_k, 2);
  EXPECT_TRUE(mc->options().save_last);
  EXPECT_EQ(mc->options().every_n_epochs.value_or(-1), 3);
  EXPECT_EQ(mc->options().filename, "{epoch}-{val_acc:.3f}");
  EXPECT_TRUE(mc->options().dirpath.empty());
  EXPECT_FALSE(mc->options().save_on_train_epoch_end.has_value());
  auto* es = dynamic_cast<EarlyStopping*>(callbacks[1].get());
  ASSERT_NE(es, nullptr);
  EXPECT_EQ(es->options().monitor, "val_loss");
  EXPECT_EQ(es->options().patience, 5);
  EXPECT_DOUBLE_EQ(es->options().min_delta, 0.01);
  EXPECT_DOUBLE_EQ(*es->options().stopping_threshold, 0.1);
  EXPECT_FALSE(es->options().divergence_threshold.has_value());
  auto* lr = dynamic_cast<LearningRateMonitor*>(callbacks[2].get());
  ASSERT_NE(lr, nullptr);
  EXPECT_EQ(lr->logging_interval(), std::optional<std::string>("step"));
  auto* summary = dynamic_cast<ModelSummary*>(callbacks[3].get());
  ASSERT_NE(summary, nullptr);
  EXPECT_EQ(summary->max_depth(), 2);
  EXPECT_TRUE(callbacks_from_config(YAML::Node(YAML::NodeType::Null)).empty());
}

TEST(CallbackConfig, ErrorsNameTheEntryAndWhatIsAllowed) {
  auto fails = [](const std::string& list, std::initializer_list<std::string> fragments) {
    expect_error<ConfigError>([&] { callbacks_from_config(YAML::Load(list)); }, fragments);
  };
  fails("[Checkpointer]", {"trainer.callbacks[0]=Checkpointer", "ModelCheckpoint, EarlyStopping, LearningRateMonitor"});
  fails("[LearningRateMonitor, {name: EarlyStopping, monitor: val_loss, patiense: 2}]",
        {"trainer.callbacks[1].patiense=2", "did you mean --trainer.callbacks[1].patience?", "EarlyStopping takes"});
  fails("[{name: EarlyStopping, monitor: val_loss, patience: many}]",
        {"trainer.callbacks[0].patience=many", "an integer"});
  fails("[{name: EarlyStopping, monitor: val_loss, patience: -1}]", {"patience=-1", "[0, inf]"});
  fails("[{name: ModelCheckpoint, mode: lowest}]", {"mode=lowest", "one of min, max"});
  fails("[{name: ModelCheckpoint, save_top_k: 2}]", {"save_top_k=2", "needs a monitor"});
  fails("[EarlyStopping]", {"EarlyStopping needs --trainer.callbacks[0].monitor"});
  fails("[{monitor: val_loss}]", {"names no callback class"});
  fails("[[1, 2]]", {"trainer.callbacks[0]", "{name: EarlyStopping"});
  fails("[{class_path: EarlyStopping, monitor: val_loss}]", {"init_args"});
  fails("[{name: LearningRateMonitor, logging_interval: batch}]", {"logging_interval=batch", "step, epoch"});
  expect_error<ConfigError>(
      [] {
        YAML::Node config = config_with_callbacks("EarlyStopping");
        resolve_callbacks_config(config);
      },
      {"--trainer.callbacks=EarlyStopping", "expected a list"});
}

TEST(CallbackConfig, ACommandLineEarlyStoppingStopsTheRun) {
  const ConfigSchema schema = make_trainer_schema();
  const ParsedArgs parsed = parse_args(
      schema, {"--trainer.callbacks=[{name: EarlyStopping, monitor: scripted, patience: 1}]", "--trainer.max_epochs=10",
               "--trainer.limit_train_batches=1", "--trainer.accelerator=cpu", "--trainer.enable_progress_bar=false",
               "--trainer.enable_model_summary=false", "--trainer.enable_checkpointing=false"});
  YAML::Node config = YAML::Clone(parsed.config);
  resolve_callbacks_config(config);
  EXPECT_NE(config_to_yaml(config).find("patience: 1"), std::string::npos);
  testing::TempDir dir;
  TrainerOptions o = trainer_options_from_config(config);
  o.default_root_dir = dir.path;
  ASSERT_EQ(o.callbacks.size(), 1u);
  Trainer trainer(o);
  testing::TinyClassifier model;
  model.scripted_val_loss = {3, 2, 2.5, 1, 1, 1, 1, 1, 1, 1};  // no improvement at epoch 2: stop
  testing::SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(model.count["on_train_epoch_start"], 3);
  EXPECT_TRUE(trainer.should_stop);
}

}  // namespace
}  // namespace tandem::trainer
