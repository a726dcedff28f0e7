// Logging: on_step/on_epoch defaults and forks, epoch aggregation (mean weighted by batch size,
// sum, max, min), metrics.csv rows and header, hparams.yaml, and a new version_N per Trainer.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "engine/trainer/csv_logger.h"
#include "tests/accelerators/expect_error.h"
#include "trainer_test_util.h"

namespace tandem::trainer {
namespace {

using testing::quiet_options;
using testing::SyntheticDataModule;
using testing::TempDir;
using testing::TinyClassifier;

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  return lines;
}

// Logs batch_idx + 1 with every reduction, per epoch only.
class AggregatingModel : public TinyClassifier {
 public:
  Tensor training_step(const data::Batch& b, int64_t i) override {
    const double v = double(i + 1);
    log("mean_v", v, {.on_step = false, .on_epoch = true});
    log("sum_v", v, {.on_step = false, .on_epoch = true, .reduce_fx = ReduceFx::Sum});
    log("max_v", v, {.on_step = false, .on_epoch = true, .reduce_fx = ReduceFx::Max});
    log("min_v", v, {.on_step = false, .on_epoch = true, .reduce_fx = ReduceFx::Min});
    log("both", v, {.on_step = true, .on_epoch = true});
    return TinyClassifier::training_step(b, i);
  }
};

TEST(TrainerLogging, EpochValuesAggregateWithReduceFx) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 1;
  Trainer trainer(o);
  AggregatingModel model;
  SyntheticDataModule dm(20, 8, 8);  // training batches of 8, 8, 4
  trainer.fit(model, dm);
  const auto& m = trainer.callback_metrics();
  EXPECT_DOUBLE_EQ(m.at("mean_v"), (1.0 * 8 + 2.0 * 8 + 3.0 * 4) / 20.0);  // weighted by batch size
  EXPECT_DOUBLE_EQ(m.at("sum_v"), 6.0);
  EXPECT_DOUBLE_EQ(m.at("max_v"), 3.0);
  EXPECT_DOUBLE_EQ(m.at("min_v"), 1.0);
  // Forked: name_step (the last step), name_epoch, and name = the latest of the two.
  EXPECT_DOUBLE_EQ(m.at("both_step"), 3.0);
  EXPECT_DOUBLE_EQ(m.at("both_epoch"), 1.8);
  EXPECT_DOUBLE_EQ(m.at("both"), 1.8);
  // training_step defaults to on_step: the last value; validation_step to on_epoch.
  EXPECT_TRUE(m.count("train_loss"));
  EXPECT_FALSE(m.count("train_loss_epoch"));
  EXPECT_TRUE(m.count("val_loss"));
  EXPECT_TRUE(trainer.progress_bar_metrics().count("train_loss"));
  EXPECT_FALSE(trainer.progress_bar_metrics().count("mean_v"));
}

TEST(TrainerLogging, ValidationEpochMeanIsWeightedByBatchSize) {
  class ValModel : public TinyClassifier {
   public:
    Tensor validation_step(const data::Batch& b, int64_t i) override {
      log("v", double(i + 1));
      return Tensor();
    }
  };
  TempDir dir;
  Trainer trainer(quiet_options(dir.path));
  ValModel model;
  SyntheticDataModule dm(16, 12, 8);  // validation batches of 8 and 4
  const auto results = trainer.validate(model, dm, "", false);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_DOUBLE_EQ(results[0].at("v"), (1.0 * 8 + 2.0 * 4) / 12.0);
}

TEST(TrainerLogging, NonScalarTensorIsRejected) {
  class BadModel : public TinyClassifier {
   public:
    Tensor training_step(const data::Batch& b, int64_t i) override {
      log("logits", forward(b.input));
      return TinyClassifier::training_step(b, i);
    }
  };
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_steps = 1;
  Trainer trainer(o);
  BadModel model;
  SyntheticDataModule dm;
  expect_error<ValueError>([&] { trainer.fit(model, dm); }, {"logits", "[8, 3]", "one-element"});
}

// CUDA graph steps record what training_step logs (tensors unread) and apply it after the step.
TEST(TrainerLogging, DeferredLogsKeepTensorsUnreadUntilApplied) {
  LoggerConnector logs;
  logs.begin_epoch(RunningStage::Train);
  logs.set_context(RunningStage::Train, LogHook::TrainingStep);
  logs.begin_deferring();
  EXPECT_TRUE(logs.deferring());
  Tensor loss = Tensor::scalar(1.5);
  logs.defer({"loss", loss, 0.0, {}});
  logs.defer({"lr", Tensor(), 0.25, {}});
  const auto recorded = logs.end_deferring();
  EXPECT_FALSE(logs.deferring());
  ASSERT_EQ(recorded.size(), 2u);
  EXPECT_TRUE(logs.callback_metrics().empty());
  loss.fill_(2.5);  // a replay rewrites the tensor: its value at apply time is logged
  logs.log_deferred(recorded);
  logs.end_step(RunningStage::Train);
  EXPECT_EQ(logs.callback_metrics().at("loss"), 2.5);
  EXPECT_EQ(logs.callback_metrics().at("lr"), 0.25);
}

TEST(TrainerLogging, LightningModuleLogIsRecordedWhileTheConnectorDefers) {
  // Turns deferring on around each training_step and checks what LightningModule::log recorded.
  class Recorder : public Callback {
   public:
    std::string name() const override { return "Recorder"; }
    void on_train_batch_start(Trainer& t, LightningModule&, const data::Batch&, int64_t) override {
      t.logger_connector().begin_deferring();
    }
    void on_train_batch_end(Trainer& t, LightningModule&, const Tensor& loss, const data::Batch&, int64_t) override {
      const auto recorded = t.logger_connector().end_deferring();
      ASSERT_EQ(recorded.size(), 1u);
      EXPECT_EQ(recorded[0].name, "train_loss");
      ASSERT_TRUE(recorded[0].tensor.defined());
      EXPECT_EQ(recorded[0].tensor.item(), loss.item());
      EXPECT_TRUE(recorded[0].options.prog_bar);
      t.logger_connector().log_deferred(recorded);
      last_loss = loss.item();
      ++batches;
    }
    double last_loss = 0;
    int batches = 0;
  };
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_steps = 3;
  auto recorder = std::make_shared<Recorder>();
  o.callbacks = {recorder};
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  EXPECT_EQ(recorder->batches, 3);
  EXPECT_EQ(trainer.callback_metrics().at("train_loss"), recorder->last_loss);
}

TEST(TrainerLogging, MetricsCsvHasLightningsLayout) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_epochs = 1;
  o.log_every_n_steps = 3;
  Trainer trainer(o);
  TinyClassifier model;
  SyntheticDataModule dm;  // 8 steps
  trainer.fit(model, dm);
  const std::string csv = dir.path + "/lightning_logs/version_0/metrics.csv";
  ASSERT_EQ(trainer.log_dir(), dir.path + "/lightning_logs/version_0");
  const auto lines = read_lines(csv);
  ASSERT_EQ(lines.size(), 4u) << csv;
  EXPECT_EQ(lines[0], "step,epoch,train_loss,val_loss");
  // Step rows every 3 optimizer steps (steps 2 and 5, counted from 0), then the epoch's
  // validation at the epoch's last step.
  EXPECT_EQ(lines[1].rfind("2,0,", 0), 0u) << lines[1];
  EXPECT_EQ(lines[1].back(), ',');  // no val_loss on a step row
  EXPECT_EQ(lines[2].rfind("5,0,", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3].rfind("7,0,,", 0), 0u) << lines[3];
  std::ostringstream val;
  val.precision(17);
  EXPECT_NE(lines[3].substr(5).size(), 0u);
  EXPECT_NEAR(std::stod(lines[3].substr(5)), trainer.callback_metrics().at("val_loss"), 1e-12);
}

TEST(TrainerLogging, NewMetricAddsAColumnAndRewritesTheHeader) {
  TempDir dir;
  CSVLogger logger(dir.path);
  logger.log_metrics({{"a", 1.0}, {"epoch", 0}}, 0);
  logger.log_metrics({{"b", 0.5}, {"epoch", 1}}, 4);
  const auto lines = read_lines(logger.metrics_path());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "step,epoch,a,b");
  EXPECT_EQ(lines[1], "0,0,1,");
  EXPECT_EQ(lines[2], "4,1,,0.5");
}

TEST(TrainerLogging, HparamsYamlHoldsModelAndDataSettings) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_steps = 1;
  Trainer trainer(o);
  TinyClassifier model(0.05);
  SyntheticDataModule dm;
  trainer.fit(model, dm);
  const auto lines = read_lines(trainer.log_dir() + "/hparams.yaml");
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  EXPECT_NE(all.find("lr: 0.05"), std::string::npos) << all;
  EXPECT_NE(all.find("hidden: 16"), std::string::npos) << all;
  EXPECT_NE(all.find("batch_size: 8"), std::string::npos) << all;
  EXPECT_NE(all.find("n_train: 64"), std::string::npos) << all;
}

TEST(TrainerLogging, EachTrainerGetsTheNextVersion) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.max_steps = 1;
  SyntheticDataModule dm;
  for (int run = 0; run < 3; ++run) {
    Trainer trainer(o);
    TinyClassifier model;
    trainer.fit(model, dm);
    EXPECT_EQ(trainer.log_dir(), dir.path + "/lightning_logs/version_" + std::to_string(run));
    // validate and test on the same Trainer keep its version
    trainer.validate(model, dm, "", false);
    EXPECT_EQ(*trainer.logger_version(), run);
  }
}

TEST(TrainerLogging, TestReturnsTheTestMetrics) {
  TempDir dir;
  Trainer trainer(quiet_options(dir.path));
  TinyClassifier model;
  SyntheticDataModule dm;
  const auto results = trainer.test(model, dm, "", false);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].size(), 1u);
  EXPECT_TRUE(results[0].count("test_loss"));
  EXPECT_EQ(model.count["test_step"], 4);
}

}  // namespace
}  // namespace tandem::trainer
