// The LightningModule's hooks in the order the Trainer calls them (fit_loop.cpp and
// evaluation_loop.cpp document it; it is Lightning's order, except that zero_grad follows the
// optimizer step), interleaved with a callback's hooks; and the log() options that change
// where a value goes: logger=false, prog_bar, rank_zero_only and sync_dist on one process.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "trainer_test_util.h"

namespace tandem::trainer {
namespace {

using testing::quiet_options;
using testing::SyntheticDataModule;
using testing::TempDir;

using Log = std::vector<std::string>;

// Records every module hook into a shared log.
class HookRecorder : public testing::TinyClassifier {
 public:
  explicit HookRecorder(Log* log) : log_(log) {}
  void add(const std::string& s) { log_->push_back(s); }

  Tensor training_step(const data::Batch& b, int64_t i) override {
    add("training_step");
    return TinyClassifier::training_step(b, i);
  }
  Tensor validation_step(const data::Batch& b, int64_t i) override {
    add("validation_step");
    return TinyClassifier::validation_step(b, i);
  }
  Tensor test_step(const data::Batch& b, int64_t i) override {
    add("test_step");
    return TinyClassifier::test_step(b, i);
  }
  Tensor predict_step(const data::Batch& b, int64_t i) override {
    add("predict_step");
    return TinyClassifier::predict_step(b, i);
  }
  OptimizerConfig configure_optimizers() override {
    add("configure_optimizers");
    return TinyClassifier::configure_optimizers();
  }
  void setup(const std::string& stage) override { add("setup:" + stage); }
  void teardown(const std::string& stage) override { add("teardown:" + stage); }
  void on_fit_start() override { add("on_fit_start"); }
  void on_fit_end() override { add("on_fit_end"); }
  void on_train_start() override { add("on_train_start"); }
  void on_train_end() override { add("on_train_end"); }
  void on_train_epoch_start() override { add("on_train_epoch_start"); }
  void on_train_epoch_end() override { add("on_train_epoch_end"); }
  void on_train_batch_start(const data::Batch&, int64_t i) override { add("on_train_batch_start:" + std::to_string(i)); }
  void on_train_batch_end(const Tensor&, const data::Batch&, int64_t i) override {
    add("on_train_batch_end:" + std::to_string(i));
  }
  void on_before_backward(const Tensor&) override { add("on_before_backward"); }
  void on_after_backward() override { add("on_after_backward"); }
  void on_before_optimizer_step(optim::Optimizer&) override { add("on_before_optimizer_step"); }
  void on_before_zero_grad(optim::Optimizer&) override { add("on_before_zero_grad"); }
  void on_validation_start() override { add("on_validation_start"); }
  void on_validation_end() override { add("on_validation_end"); }
  void on_validation_epoch_start() override { add("on_validation_epoch_start"); }
  void on_validation_epoch_end() override { add("on_validation_epoch_end"); }
  void on_validation_batch_start(const data::Batch&, int64_t i) override {
    add("on_validation_batch_start:" + std::to_string(i));
  }
  void on_validation_batch_end(const data::Batch&, int64_t i) override {
    add("on_validation_batch_end:" + std::to_string(i));
  }
  void on_test_start() override { add("on_test_start"); }
  void on_test_end() override { add("on_test_end"); }
  void on_test_epoch_start() override { add("on_test_epoch_start"); }
  void on_test_epoch_end() override { add("on_test_epoch_end"); }
  void on_test_batch_start(const data::Batch&, int64_t i) override { add("on_test_batch_start:" + std::to_string(i)); }
  void on_test_batch_end(const data::Batch&, int64_t i) override { add("on_test_batch_end:" + std::to_string(i)); }
  void on_predict_start() override { add("on_predict_start"); }
  void on_predict_end() override { add("on_predict_end"); }

 private:
  Log* log_;
};

// A few callback hooks, to pin where callbacks run relative to the module.
class CallbackRecorder : public Callback {
 public:
  explicit CallbackRecorder(Log* log) : log_(log) {}
  std::string name() const override { return "CallbackRecorder"; }
  void on_train_batch_start(Trainer&, LightningModule&, const data::Batch&, int64_t i) override {
    log_->push_back("cb:on_train_batch_start:" + std::to_string(i));
  }
  void on_train_epoch_end(Trainer&, LightningModule&) override { log_->push_back("cb:on_train_epoch_end"); }
  void on_validation_end(Trainer&, LightningModule&) override { log_->push_back("cb:on_validation_end"); }

 private:
  Log* log_;
};

Log validation_run() {
  return {"on_validation_start",         "on_validation_epoch_start", "on_validation_batch_start:0",
          "validation_step",             "on_validation_batch_end:0", "on_validation_epoch_end",
          "cb:on_validation_end",        "on_validation_end"};
}

Log train_batch(int i) {
  const std::string n = std::to_string(i);
  return {"cb:on_train_batch_start:" + n, "on_train_batch_start:" + n, "training_step", "on_before_backward",
          "on_after_backward", "on_before_optimizer_step", "on_before_zero_grad", "on_train_batch_end:" + n};
}

TEST(TrainerHooks, FitCallsEveryHookInOrder) {
  TempDir dir;
  Log log;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 1;
  o.limit_train_batches = 2;
  o.limit_val_batches = 1;
  o.num_sanity_val_steps = 1;
  o.callbacks = {std::make_shared<CallbackRecorder>(&log)};
  Trainer trainer(o);
  HookRecorder model(&log);
  SyntheticDataModule dm;
  trainer.fit(model, dm);

  Log expected = {"setup:fit", "configure_optimizers", "on_fit_start"};
  for (const auto& s : validation_run()) expected.push_back(s);  // the sanity check
  expected.push_back("on_train_start");
  expected.push_back("on_train_epoch_start");
  for (int i = 0; i < 2; ++i) {
    for (const auto& s : train_batch(i)) expected.push_back(s);
  }
  for (const auto& s : validation_run()) expected.push_back(s);  // after the epoch's last batch
  for (const char* s : {"on_train_epoch_end", "cb:on_train_epoch_end", "on_train_end", "on_fit_end", "teardown:fit"}) {
    expected.push_back(s);
  }
  EXPECT_EQ(log, expected);
}

TEST(TrainerHooks, AccumulationCallsOptimizerHooksOnlyAtTheStep) {
  TempDir dir;
  Log log;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 1;
  o.limit_train_batches = 2;
  o.limit_val_batches = 0;
  o.accumulate_grad_batches = 2;
  Trainer trainer(o);
  HookRecorder model(&log);
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  const Log expected = {"setup:fit",          "configure_optimizers", "on_fit_start",       "on_train_start",
                        "on_train_epoch_start", "on_train_batch_start:0", "training_step", "on_before_backward",
                        "on_after_backward",  "on_train_batch_end:0", "on_train_batch_start:1", "training_step",
                        "on_before_backward", "on_after_backward",    "on_before_optimizer_step",
                        "on_before_zero_grad", "on_train_batch_end:1", "on_train_epoch_end", "on_train_end",
                        "on_fit_end",         "teardown:fit"};
  EXPECT_EQ(log, expected);
}

TEST(TrainerHooks, TestAndPredictHooks) {
  TempDir dir;
  Log log;
  TrainerOptions o = quiet_options(dir.path);
  o.limit_test_batches = 1;
  o.limit_predict_batches = 2;
  Trainer trainer(o);
  HookRecorder model(&log);
  SyntheticDataModule dm;
  trainer.test(model, dm, "", false);
  EXPECT_EQ(log, (Log{"setup:test", "on_test_start", "on_test_epoch_start", "on_test_batch_start:0", "test_step",
                      "on_test_batch_end:0", "on_test_epoch_end", "on_test_end", "teardown:test"}));
  log.clear();
  const auto out = trainer.predict(model, dm);  // predict_dataloader() defaults to the test loader
  EXPECT_EQ(out.size(), 2u);
  EXPECT_EQ(log, (Log{"setup:predict", "on_predict_start", "predict_step", "predict_step", "on_predict_end",
                      "teardown:predict"}));
}

TEST(TrainerHooks, StateTheModuleSeesDuringFit) {
  class Probe : public testing::TinyClassifier {
   public:
    Tensor training_step(const data::Batch& b, int64_t i) override {
      seen.emplace_back(current_epoch(), global_step());
      EXPECT_EQ(device(), Device::cpu());
      EXPECT_TRUE(is_global_zero());
      return TinyClassifier::training_step(b, i);
    }
    std::vector<std::pair<int64_t, int64_t>> seen;
  };
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 2;
  o.limit_train_batches = 2;
  o.limit_val_batches = 0;
  Trainer trainer(o);
  Probe model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(model.seen, (std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {0, 1}, {1, 2}, {1, 3}}));
  EXPECT_EQ(model.trainer(), &trainer);
}

std::vector<std::string> csv_header(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  std::vector<std::string> cells;
  std::stringstream ss(line);
  for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
  return cells;
}

TEST(TrainerLogOptions, LoggerFalseStaysOutOfMetricsCsvAndProgBarSelectsTheBar) {
  class Model : public testing::TinyClassifier {
   public:
    Tensor training_step(const data::Batch& b, int64_t i) override {
      log("hidden_from_csv", 1.5, {.logger = false});
      log("shown", 2.0, {.prog_bar = true});
      log("zero_only", 3.0, {.rank_zero_only = true});
      log("synced", 4.0, {.sync_dist = true});  // one process: the value itself
      log_dict(std::map<std::string, double>{{"d1", 5.0}, {"d2", 6.0}}, {.on_step = false, .on_epoch = true});
      return TinyClassifier::training_step(b, i);
    }
  };
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 1;
  o.log_every_n_steps = 1;
  o.limit_val_batches = 0;
  Trainer trainer(o);
  Model model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  const auto& m = trainer.callback_metrics();
  EXPECT_DOUBLE_EQ(m.at("hidden_from_csv"), 1.5);
  EXPECT_DOUBLE_EQ(m.at("zero_only"), 3.0);
  EXPECT_DOUBLE_EQ(m.at("synced"), 4.0);
  EXPECT_DOUBLE_EQ(m.at("d1"), 5.0);
  EXPECT_DOUBLE_EQ(m.at("d2"), 6.0);
  EXPECT_TRUE(trainer.progress_bar_metrics().count("shown"));
  EXPECT_FALSE(trainer.progress_bar_metrics().count("synced"));
  EXPECT_FALSE(trainer.logged_metrics().count("hidden_from_csv"));
  const auto header = csv_header(trainer.log_dir() + "/metrics.csv");
  EXPECT_EQ(std::count(header.begin(), header.end(), "hidden_from_csv"), 0);
  for (const char* column : {"step", "epoch", "shown", "zero_only", "synced", "d1", "d2", "train_loss"}) {
    EXPECT_EQ(std::count(header.begin(), header.end(), column), 1) << column;
  }
}

TEST(TrainerLogOptions, OnStepInValidationAndOnEpochOffIsLoggedNowhere) {
  class Model : public testing::TinyClassifier {
   public:
    Tensor validation_step(const data::Batch& b, int64_t i) override {
      log("val_step_only", double(i), {.on_step = true, .on_epoch = false});
      log("nowhere", 1.0, {.on_step = false, .on_epoch = false});
      return TinyClassifier::validation_step(b, i);
    }
  };
  TempDir dir;
  Trainer trainer(quiet_options(dir.path));
  Model model;
  SyntheticDataModule dm;  // 4 validation batches
  const auto results = trainer.validate(model, dm, "", false);
  EXPECT_DOUBLE_EQ(trainer.callback_metrics().at("val_step_only"), 3.0);  // the last step's value
  EXPECT_FALSE(results[0].count("val_step_only"));                         // not an epoch value
  EXPECT_FALSE(trainer.callback_metrics().count("nowhere"));
}

}  // namespace
}  // namespace tandem::trainer
