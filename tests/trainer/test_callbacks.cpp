// Callbacks: ModelCheckpoint (top-k, last, best, filenames), EarlyStopping, LearningRateMonitor,
// ModelSummary and the progress bar's output.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/trainer/callbacks/early_stopping.h"
#include "engine/trainer/callbacks/learning_rate_monitor.h"
#include "engine/trainer/callbacks/model_checkpoint.h"
#include "engine/trainer/callbacks/model_summary.h"
#include "engine/trainer/callbacks/progress_bar.h"
#include "engine/trainer/checkpoint.h"
#include "tests/accelerators/expect_error.h"
#include "trainer_test_util.h"

namespace fs = std::filesystem;

namespace tandem::trainer {
namespace {

using testing::quiet_options;
using testing::SyntheticDataModule;
using testing::TempDir;
using testing::TinyClassifier;

std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

TEST(ModelCheckpointTest, KeepsTheTopKByMonitorAndLast) {
  TempDir dir;
  const std::string ckpts = dir.path + "/ckpts";
  ModelCheckpointOptions mo;
  mo.dirpath = ckpts;
  mo.monitor = "scripted";
  mo.mode = "min";
  mo.save_top_k = 2;
  mo.save_last = true;
  mo.filename = "{epoch}-{scripted:.1f}";
  auto mc = std::make_shared<ModelCheckpoint>(mo);
  TrainerOptions o = quiet_options(dir.path);
  o.enable_checkpointing = true;
  o.max_epochs = 5;
  o.limit_train_batches = 2;
  o.callbacks = {mc};
  Trainer trainer(o);
  TinyClassifier model;
  model.scripted_val_loss = {5, 3, 4, 1, 2};
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(files_in(ckpts), (std::set<std::string>{"epoch=3-scripted=1.0.safetensors",
                                                     "epoch=4-scripted=2.0.safetensors", "last.safetensors"}));
  EXPECT_EQ(mc->best_model_path(), ckpts + "/epoch=3-scripted=1.0.safetensors");
  EXPECT_DOUBLE_EQ(*mc->best_model_score(), 1.0);
  EXPECT_EQ(mc->last_model_path(), ckpts + "/last.safetensors");
  EXPECT_EQ(trainer.checkpoint_callback(), mc.get());
}

TEST(ModelCheckpointTest, MaxModeKeepsTheLargest) {
  TempDir dir;
  ModelCheckpointOptions mo;
  mo.dirpath = dir.path + "/c";
  mo.monitor = "scripted";
  mo.mode = "max";
  mo.filename = "{epoch}";
  auto mc = std::make_shared<ModelCheckpoint>(mo);
  TrainerOptions o = quiet_options(dir.path);
  o.enable_checkpointing = true;
  o.max_epochs = 3;
  o.limit_train_batches = 1;
  o.callbacks = {mc};
  Trainer trainer(o);
  TinyClassifier model;
  model.scripted_val_loss = {1, 7, 3};
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(files_in(dir.path + "/c"), (std::set<std::string>{"epoch=1.safetensors"}));
}

TEST(ModelCheckpointTest, DefaultKeepsTheLatestUnderLogDir) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.enable_checkpointing = true;  // adds ModelCheckpoint()
  o.max_epochs = 2;
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  const std::string ckpts = trainer.log_dir() + "/checkpoints";
  EXPECT_EQ(files_in(ckpts), (std::set<std::string>{"epoch=1-step=16.safetensors"}));
  ASSERT_NE(trainer.checkpoint_callback(), nullptr);
  EXPECT_EQ(trainer.checkpoint_callback()->best_model_path(), ckpts + "/epoch=1-step=16.safetensors");
}

TEST(ModelCheckpointTest, FilenameTemplates) {
  ModelCheckpointOptions mo;
  mo.filename = "epoch={epoch}-step={step}";
  EXPECT_EQ(ModelCheckpoint(mo).format_checkpoint_name(3, 120, {}), "epoch=3-step=120");
  mo.filename = "{epoch}-{val_loss:.3f}";
  EXPECT_EQ(ModelCheckpoint(mo).format_checkpoint_name(3, 120, {{"val_loss", 0.12345}}), "epoch=3-val_loss=0.123");
  mo.filename = "best-{epoch:03d}";
  EXPECT_EQ(ModelCheckpoint(mo).format_checkpoint_name(7, 0, {}), "best-epoch=007");
  mo.filename = "{epoch}-{train/loss:.2f}";
  EXPECT_EQ(ModelCheckpoint(mo).format_checkpoint_name(1, 0, {{"train/loss", 0.5}}), "epoch=1-train_loss=0.50");
  mo.filename = "{epoch}_{step}";
  mo.auto_insert_metric_name = false;
  EXPECT_EQ(ModelCheckpoint(mo).format_checkpoint_name(2, 9, {}), "2_9");
  EXPECT_EQ(ModelCheckpoint().format_checkpoint_name(0, 8, {}), "epoch=0-step=8");
}

// Lightning's every_n_train_steps: after every n-th optimizer step, and then no epoch-end saves
// (every_n_epochs left unset resolves to 0); with accumulation only at step boundaries.
TEST(ModelCheckpointTest, EveryNTrainStepsSavesAfterThoseSteps) {
  TempDir dir;
  ModelCheckpointOptions mo;
  mo.dirpath = dir.path + "/c";
  mo.save_top_k = -1;
  mo.every_n_train_steps = 3;
  TrainerOptions o = quiet_options(dir.path);
  o.enable_checkpointing = true;
  o.max_epochs = 2;  // 8 batches (steps) per epoch
  o.callbacks = {std::make_shared<ModelCheckpoint>(mo)};
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(files_in(dir.path + "/c"),
            (std::set<std::string>{"epoch=0-step=3.safetensors", "epoch=0-step=6.safetensors", "epoch=1-step=9.safetensors",
                                   "epoch=1-step=12.safetensors", "epoch=1-step=15.safetensors"}));
  EXPECT_EQ(load_checkpoint(dir.path + "/c/epoch=1-step=9.safetensors").trainer_state["loops"]["fit"]["batch_in_epoch"], 1);

  TempDir acc_dir;
  mo.dirpath = acc_dir.path + "/c";
  mo.every_n_train_steps = 1;
  TrainerOptions acc = quiet_options(acc_dir.path);
  acc.enable_checkpointing = true;
  acc.max_epochs = 1;
  acc.accumulate_grad_batches = 3;  // steps after batches 3, 6 and 8 (the epoch's last)
  acc.callbacks = {std::make_shared<ModelCheckpoint>(mo)};
  Trainer acc_trainer(acc);
  TinyClassifier acc_model;
  acc_trainer.fit(acc_model, dm);
  EXPECT_EQ(files_in(acc_dir.path + "/c"), (std::set<std::string>{"epoch=0-step=1.safetensors", "epoch=0-step=2.safetensors",
                                                                  "epoch=0-step=3.safetensors"}));
  const nlohmann::json fit = load_checkpoint(acc_dir.path + "/c/epoch=0-step=2.safetensors").trainer_state["loops"]["fit"];
  EXPECT_EQ(fit["batch_in_epoch"], 6);
  EXPECT_EQ(fit["after_batch_pending"], true);
  EXPECT_EQ(fit["epoch_finished"], false);
}

// train_time_interval: a save after the first step that ends that long after the previous one.
// An interval shorter than any step saves after every step; one longer than the run never.
TEST(ModelCheckpointTest, TrainTimeIntervalSavesWhenTheIntervalHasPassed) {
  for (const double interval : {1e-9, 1e6}) {
    TempDir dir;
    ModelCheckpointOptions mo;
    mo.dirpath = dir.path + "/c";
    mo.save_top_k = -1;
    mo.train_time_interval = interval;
    TrainerOptions o = quiet_options(dir.path);
    o.enable_checkpointing = true;
    o.max_epochs = 1;
    o.limit_train_batches = 3;
    o.callbacks = {std::make_shared<ModelCheckpoint>(mo)};
    Trainer trainer(o);
    TinyClassifier model;
    SyntheticDataModule dm;
    trainer.fit(model, dm);
    const std::set<std::string> expected =
        interval < 1 ? std::set<std::string>{"epoch=0-step=1.safetensors", "epoch=0-step=2.safetensors",
                                             "epoch=0-step=3.safetensors"}
                     : std::set<std::string>{};
    const std::set<std::string> saved = std::filesystem::exists(dir.path + "/c") ? files_in(dir.path + "/c") : std::set<std::string>{};
    EXPECT_EQ(saved, expected) << "train_time_interval=" << interval;
  }
}

TEST(ModelCheckpointTest, SaveTriggersAreMutuallyExclusiveAndChecked) {
  ModelCheckpointOptions both;
  both.every_n_train_steps = 5;
  both.every_n_epochs = 1;
  expect_error<ConfigError>([&] { ModelCheckpoint check(both); }, {"mutually exclusive"});
  ModelCheckpointOptions steps_and_time;
  steps_and_time.every_n_train_steps = 5;
  steps_and_time.train_time_interval = 60;
  expect_error<ConfigError>([&] { ModelCheckpoint check(steps_and_time); }, {"set only one of them"});
  ModelCheckpointOptions negative;
  negative.every_n_train_steps = -1;
  expect_error<ConfigError>([&] { ModelCheckpoint check(negative); }, {"every_n_train_steps=-1) is not valid"});
  ModelCheckpointOptions zero_time;
  zero_time.train_time_interval = 0.0;
  expect_error<ConfigError>([&] { ModelCheckpoint check(zero_time); }, {"expected a number of seconds > 0"});
  ModelCheckpointOptions steps_only;
  steps_only.every_n_train_steps = 4;
  EXPECT_EQ(ModelCheckpoint(steps_only).state_key(), "ModelCheckpoint{monitor=,mode=min,every_n_epochs=0,every_n_train_steps=4}");
}

TEST(ModelCheckpointTest, EveryNEpochsSavesOnlyThoseEpochs) {
  TempDir dir;
  ModelCheckpointOptions mo;
  mo.dirpath = dir.path + "/c";
  mo.filename = "epoch={epoch}-step={step}";
  mo.save_top_k = -1;
  mo.every_n_epochs = 2;
  TrainerOptions o = quiet_options(dir.path);
  o.enable_checkpointing = true;
  o.max_epochs = 5;
  o.limit_train_batches = 3;
  o.callbacks = {std::make_shared<ModelCheckpoint>(mo)};
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  // Epochs 1 and 3 (the 2nd and 4th), 3 steps each.
  EXPECT_EQ(files_in(dir.path + "/c"),
            (std::set<std::string>{"epoch=1-step=6.safetensors", "epoch=3-step=12.safetensors"}));
}

TEST(ModelCheckpointTest, SaveTopKMinusOneKeepsEveryEpochWithoutMonitor) {
  TempDir dir;
  ModelCheckpointOptions mo;
  mo.dirpath = dir.path + "/c";
  mo.save_top_k = -1;
  TrainerOptions o = quiet_options(dir.path);
  o.enable_checkpointing = true;
  o.max_epochs = 3;
  o.limit_train_batches = 1;
  o.callbacks = {std::make_shared<ModelCheckpoint>(mo)};
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(files_in(dir.path + "/c"), (std::set<std::string>{"epoch=0-step=1.safetensors", "epoch=1-step=2.safetensors",
                                                              "epoch=2-step=3.safetensors"}));
}

TEST(ModelCheckpointTest, MissingMonitorIsAClearError) {
  TempDir dir;
  ModelCheckpointOptions mo;
  mo.dirpath = dir.path + "/c";
  mo.monitor = "val_acc";
  TrainerOptions o = quiet_options(dir.path);
  o.enable_checkpointing = true;
  o.max_epochs = 1;
  o.limit_train_batches = 1;
  o.callbacks = {std::make_shared<ModelCheckpoint>(mo)};
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  expect_error<ConfigError>([&] { trainer.fit(model, dm); }, {"val_acc", "val_loss", "train_loss"});
}

TEST(ModelCheckpointTest, InvalidOptions) {
  ModelCheckpointOptions mo;
  mo.save_top_k = 3;
  expect_error<ConfigError>([&] { ModelCheckpoint{mo}; }, {"save_top_k=3", "monitor"});
  mo = {};
  mo.mode = "lowest";
  expect_error<ConfigError>([&] { ModelCheckpoint{mo}; }, {"lowest", "'min' or 'max'"});
}

TEST(EarlyStoppingTest, StopsAfterPatienceChecksWithoutImprovement) {
  TempDir dir;
  auto es = std::make_shared<EarlyStopping>("scripted", 2);
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 10;
  o.limit_train_batches = 1;
  o.callbacks = {es};
  Trainer trainer(o);
  TinyClassifier model;
  // best 5 -> 4 (epoch 1); 4.5 and 4.2 do not improve: stop after epoch 3.
  model.scripted_val_loss = {5, 4, 4.5, 4.2, 1, 1, 1, 1, 1, 1};
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(model.count["on_train_epoch_start"], 4);
  EXPECT_EQ(es->stopped_epoch(), 3);
  EXPECT_EQ(es->wait_count(), 2);
  EXPECT_DOUBLE_EQ(es->best_score(), 4.0);
  EXPECT_TRUE(trainer.should_stop);
}

TEST(EarlyStoppingTest, MinDeltaAndMaxMode) {
  TempDir dir;
  EarlyStoppingOptions eo;
  eo.monitor = "scripted";
  eo.mode = "max";
  eo.patience = 1;
  eo.min_delta = 0.5;
  auto es = std::make_shared<EarlyStopping>(eo);
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 10;
  o.limit_train_batches = 1;
  o.callbacks = {es};
  Trainer trainer(o);
  TinyClassifier model;
  model.scripted_val_loss = {1, 2, 2.3, 5, 5};  // 2.3 is not 0.5 better than 2: stop at epoch 2
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(es->stopped_epoch(), 2);
  EXPECT_EQ(model.count["on_train_epoch_start"], 3);
}

TEST(EarlyStoppingTest, MissingMonitorListsTheLoggedMetrics) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 2;
  o.limit_train_batches = 1;
  o.callbacks = {std::make_shared<EarlyStopping>("val_accuracy")};
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  expect_error<ConfigError>([&] { trainer.fit(model, dm); }, {"val_accuracy", "val_loss"});
}

TEST(LearningRateMonitorTest, LogsTheRatePerEpoch) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 3;
  o.limit_train_batches = 2;
  o.callbacks = {std::make_shared<LearningRateMonitor>()};  // follows StepLR's epoch interval
  Trainer trainer(o);
  TinyClassifier model(0.04);
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  std::ifstream f(trainer.log_dir() + "/metrics.csv");
  std::string header;
  std::getline(f, header);
  EXPECT_NE(header.find("lr-Adam"), std::string::npos) << header;
  std::vector<double> rates;
  const size_t column = size_t(std::count(header.begin(), header.begin() + long(header.find("lr-Adam")), ','));
  for (std::string line; std::getline(f, line);) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    if (cells.size() > column && !cells[column].empty()) rates.push_back(std::stod(cells[column]));
  }
  EXPECT_EQ(rates, (std::vector<double>{0.04, 0.04, 0.02}));  // StepLR(step_size=2, gamma=0.5)
}

TEST(LearningRateMonitorTest, StepIntervalLogsAtEveryLoggingStep) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_steps = 5;
  o.log_every_n_steps = 1;
  o.limit_val_batches = 0;
  o.callbacks = {std::make_shared<LearningRateMonitor>("step")};
  Trainer trainer(o);
  TinyClassifier model(0.04);
  model.scheduler_interval = "step";  // StepLR(step_size=2, gamma=0.5) per optimizer step
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  std::ifstream f(trainer.log_dir() + "/metrics.csv");
  std::string header;
  std::getline(f, header);
  const size_t column = size_t(std::count(header.begin(), header.begin() + long(header.find("lr-Adam")), ','));
  std::vector<double> rates;
  for (std::string line; std::getline(f, line);) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    if (cells.size() > column && !cells[column].empty()) rates.push_back(std::stod(cells[column]));
  }
  // The rate each step trained with: steps 0,1 at 0.04, 2,3 at 0.02, 4 at 0.01.
  EXPECT_EQ(rates, (std::vector<double>{0.04, 0.04, 0.02, 0.02, 0.01}));
  expect_error<ConfigError>([] { LearningRateMonitor("batch"); }, {"logging_interval='batch'", "'step', 'epoch'"});
}

TEST(LearningRateMonitorTest, NamesGroups) {
  auto a = Tensor::zeros({2}).requires_grad_();
  auto b = Tensor::zeros({2}).requires_grad_();
  optim::SGD sgd(std::vector<optim::ParamGroup>{{{a}, {{"lr", 0.1}}}, {{b}, {{"lr", 0.2}}}});
  const auto rates = LearningRateMonitor::learning_rates(sgd);
  EXPECT_DOUBLE_EQ(rates.at("lr-SGD/pg1"), 0.1);
  EXPECT_DOUBLE_EQ(rates.at("lr-SGD/pg2"), 0.2);
}

TEST(ModelSummaryTest, TableListsChildrenAndTotals) {
  TinyClassifier model;
  const std::string table = ModelSummary::summarize(model);
  EXPECT_NE(table.find("net"), std::string::npos) << table;
  EXPECT_NE(table.find("Sequential"), std::string::npos) << table;
  EXPECT_NE(table.find("131        Trainable params"), std::string::npos) << table;  // 4*16+16 + 16*3+3
  EXPECT_NE(table.find("Total params"), std::string::npos) << table;
  const std::string deep = ModelSummary::summarize(model, 2);
  EXPECT_NE(deep.find("net.0"), std::string::npos) << deep;
  EXPECT_NE(deep.find("Linear"), std::string::npos) << deep;
  EXPECT_EQ(ModelSummary::human_count(999), "999");
  EXPECT_EQ(ModelSummary::human_count(12345), "12.3 K");
  EXPECT_EQ(ModelSummary::human_count(101770), "101 K");
  EXPECT_EQ(ModelSummary::human_count(1863690), "1.9 M");
}

TEST(ProgressBarTest, RenderShowsPercentCountRateEtaAndPostfix) {
  const std::string line = ProgressBar::render("Epoch 0/3", 4, 8, 2.0, "v_num=1, loss=0.5");
  EXPECT_NE(line.find("Epoch 0/3: "), std::string::npos) << line;
  EXPECT_NE(line.find(" 50%"), std::string::npos) << line;
  EXPECT_NE(line.find("4/8"), std::string::npos) << line;
  EXPECT_NE(line.find("[00:02<00:02"), std::string::npos) << line;
  EXPECT_NE(line.find("2.00it/s"), std::string::npos) << line;
  EXPECT_NE(line.find("v_num=1, loss=0.5]"), std::string::npos) << line;
}

TEST(ProgressBarTest, PlainOutputPrintsPeriodicLines) {
  TempDir dir;
  const std::string path = dir.path + "/bar.txt";
  std::FILE* out = std::fopen(path.c_str(), "w");
  ASSERT_NE(out, nullptr);
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 2;
  o.callbacks = {std::make_shared<ProgressBar>(out, false, 50)};
  {
    Trainer trainer(o);
    TinyClassifier model;
    SyntheticDataModule dm;
    trainer.fit(model, dm);
  }
  std::fclose(out);
  std::ifstream f(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  // Per epoch: at 50% and at 100% (the epoch's end), no '\r'.
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[0].find("Epoch 0/2:  50%"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("8/8"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("v_num=0"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("loss="), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("val_loss="), std::string::npos) << lines[1];
  EXPECT_NE(lines[3].find("Epoch 1/2: 100%"), std::string::npos) << lines[3];
  for (const auto& l : lines) EXPECT_EQ(l.find('\r'), std::string::npos);
}

}  // namespace
}  // namespace tandem::trainer

namespace tandem::trainer {
namespace {

TEST(ProgressBarTest, TerminalOutputRedrawsInPlace) {
  TempDir dir;
  const std::string path = dir.path + "/tty.txt";
  std::FILE* out = std::fopen(path.c_str(), "w");
  ASSERT_NE(out, nullptr);
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 2;
  o.num_sanity_val_steps = 1;
  o.callbacks = {std::make_shared<ProgressBar>(out, true)};
  {
    Trainer trainer(o);
    TinyClassifier model;
    SyntheticDataModule dm;
    trainer.fit(model, dm);
  }
  std::fclose(out);
  std::ifstream f(path);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // Every update starts with '\r' and clears the rest of the line; each epoch ends its line.
  const auto redraws = std::count(text.begin(), text.end(), '\r');
  EXPECT_GE(redraws, 2 * 8);  // at least one redraw per training batch
  EXPECT_NE(text.find("\r\033[K"), std::string::npos);  // the sanity bar leaves no line
  EXPECT_NE(text.find("Sanity Checking"), std::string::npos);
  EXPECT_NE(text.find("Validation"), std::string::npos);
  EXPECT_NE(text.find("Epoch 0/2: 100%"), std::string::npos);
  EXPECT_NE(text.find("Epoch 1/2: 100%"), std::string::npos);
  EXPECT_NE(text.find("it/s"), std::string::npos);
  EXPECT_NE(text.find("v_num=0"), std::string::npos);
  EXPECT_NE(text.find("loss="), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);  // one finished line per epoch
}

}  // namespace
}  // namespace tandem::trainer
