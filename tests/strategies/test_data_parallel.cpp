// dp on N CPU devices in one process (N replicas on N threads) against one device at the same
// batch: the weights after several optimizer steps agree within 1e-5 (relative), with batches
// that split unevenly (and a last batch smaller than the devices) and with gradient
// accumulation. training_step_end sees the whole batch; what the chunks log is merged into
// the whole batch's value.
#include <gtest/gtest.h>

#include <mutex>

#include "engine/strategies/data_parallel_strategy.h"
#include "trainer_test_util.h"

namespace tandem::trainer {
namespace {

using testing::SyntheticDataModule;
using testing::TempDir;
using testing::TinyClassifier;
using testing::max_relative_difference;

// Records the size of every chunk training_step sees (shared by the replicas).
struct ChunkLog {
  std::mutex mutex;
  std::vector<int64_t> sizes;
};

class RecordingClassifier : public TinyClassifier {
 public:
  explicit RecordingClassifier(std::shared_ptr<ChunkLog> chunks) : TinyClassifier(0.05, 0.0), chunks(std::move(chunks)) {}
  Tensor training_step(const data::Batch& b, int64_t i) override {
    {
      std::lock_guard<std::mutex> lock(chunks->mutex);
      chunks->sizes.push_back(b.size());
    }
    return TinyClassifier::training_step(b, i);
  }
  std::shared_ptr<LightningModule> make_replica() const override { return std::make_shared<RecordingClassifier>(chunks); }
  std::shared_ptr<ChunkLog> chunks;
};

// training_step returns the logits; training_step_end computes a loss that couples the whole
// batch (cross entropy plus the batch-softmax-weighted mean logit: softmax over dim 0).
class BatchSoftmaxClassifier : public TinyClassifier {
 public:
  BatchSoftmaxClassifier() : TinyClassifier(0.05, 0.0) {}
  Tensor training_step(const data::Batch& b, int64_t) override { return forward(b.input); }
  std::optional<Tensor> training_step_end(const Tensor& outputs, const data::Batch& batch) override {
    EXPECT_EQ(outputs.size(0), batch.size());
    seen_rows.push_back(outputs.size(0));
    Tensor loss = cross_entropy(outputs, batch.target) + mean(softmax(outputs, 0) * outputs);
    log("end_loss", loss);
    return loss;
  }
  std::shared_ptr<LightningModule> make_replica() const override { return std::make_shared<BatchSoftmaxClassifier>(); }
  std::vector<int64_t> seen_rows;
};

struct Fit {
  std::vector<float> weights;
  Trainer::Metrics metrics;
  Trainer::Metrics test_metrics;
};

template <typename Model>
Fit fit(Model& model, int devices, const std::string& strategy, int64_t n_train, int64_t batch, int64_t accumulate) {
  TempDir dir;
  SyntheticDataModule dm(n_train, 16, batch);
  TrainerOptions o = testing::quiet_options(dir.path);
  o.devices = devices;
  o.strategy = strategy;
  o.max_epochs = 2;
  o.accumulate_grad_batches = accumulate;
  o.num_sanity_val_steps = 0;
  Trainer trainer(o);
  trainer.fit(model, dm);
  Fit out{testing::flat_weights(model), trainer.callback_metrics(), {}};
  out.test_metrics = trainer.test(model, dm, "", /*verbose=*/false).front();
  return out;
}

struct Case {
  int devices;
  int64_t n_train, batch, accumulate;
};

void expect_dp_equals_one_device(const Case& c) {
  manual_seed(7);
  TinyClassifier single(0.05, 0.0);
  manual_seed(7);
  auto chunks = std::make_shared<ChunkLog>();
  RecordingClassifier dp(chunks);
  const Fit ref = fit(single, 1, "single_device", c.n_train, c.batch, c.accumulate);
  const Fit got = fit(dp, c.devices, "dp", c.n_train, c.batch, c.accumulate);
  EXPECT_LE(max_relative_difference(got.weights, ref.weights), 1e-5)
      << "devices=" << c.devices << " n=" << c.n_train << " batch=" << c.batch << " accumulate=" << c.accumulate;
  // Logged values are the whole batch's: the last step's loss, the epoch's validation and test loss.
  for (const char* key : {"train_loss", "val_loss"}) {
    EXPECT_NEAR(got.metrics.at(key), ref.metrics.at(key), 1e-5 * std::fabs(ref.metrics.at(key))) << key;
  }
  EXPECT_NEAR(got.test_metrics.at("test_loss"), ref.test_metrics.at("test_loss"), 1e-5 * ref.test_metrics.at("test_loss"));
  // The batch really was split: chunk sizes differ by at most one, first ones larger.
  int64_t split = c.batch / c.devices + (c.batch % c.devices ? 1 : 0);
  EXPECT_NE(std::find(chunks->sizes.begin(), chunks->sizes.end(), split), chunks->sizes.end());
  for (int64_t s : chunks->sizes) EXPECT_LE(s, split);
  // The training moved the weights away from the initial ones.
  manual_seed(7);
  TinyClassifier untouched(0.05, 0.0);
  EXPECT_GT(max_relative_difference(testing::flat_weights(untouched), ref.weights), 1e-3);
}

TEST(DataParallelEquivalence, TwoCpuDevicesEqualOneDeviceAtTheSameBatch) { expect_dp_equals_one_device({2, 48, 8, 1}); }

TEST(DataParallelEquivalence, UnevenSplitsAndAShortLastBatch) {
  expect_dp_equals_one_device({2, 37, 5, 1});  // 5 -> 3 + 2; last batch 2 -> 1 + 1
  expect_dp_equals_one_device({3, 38, 7, 1});  // 7 -> 3 + 2 + 2; last batch 3 -> 1 + 1 + 1
  expect_dp_equals_one_device({4, 37, 6, 1});  // last batch 1 runs on the root alone
}

TEST(DataParallelEquivalence, GradientAccumulation) { expect_dp_equals_one_device({3, 37, 5, 2}); }

// validation_step returns the logits; validation_step_end / test_step_end compute a metric that
// needs the whole batch at once (softmax over dim 0) and log it.
class WholeBatchMetricClassifier : public TinyClassifier {
 public:
  WholeBatchMetricClassifier() : TinyClassifier(0.05, 0.0) {}
  Tensor validation_step(const data::Batch& b, int64_t) override { return forward(b.input); }
  Tensor test_step(const data::Batch& b, int64_t) override { return forward(b.input); }
  void validation_step_end(const Tensor& outputs, const data::Batch& batch) override {
    EXPECT_EQ(outputs.size(0), batch.size());
    val_rows.push_back(outputs.size(0));
    log("val_batch_metric", mean(softmax(outputs, 0) * outputs));
  }
  void test_step_end(const Tensor& outputs, const data::Batch& batch) override {
    EXPECT_EQ(outputs.size(0), batch.size());
    log("test_batch_metric", mean(softmax(outputs, 0) * outputs));
  }
  std::shared_ptr<LightningModule> make_replica() const override { return std::make_shared<WholeBatchMetricClassifier>(); }
  std::vector<int64_t> val_rows;
};

TEST(DataParallelStepEnd, ValidationAndTestStepEndSeeTheWholeBatch) {
  manual_seed(13);
  WholeBatchMetricClassifier single;
  manual_seed(13);
  WholeBatchMetricClassifier dp;
  const Fit ref = fit(single, 1, "single_device", 40, 8, 1);
  const Fit got = fit(dp, 3, "dp", 40, 8, 1);  // 8 -> 3 + 3 + 2 per device
  ASSERT_FALSE(dp.val_rows.empty());
  EXPECT_EQ(dp.val_rows, single.val_rows);  // the same whole batches, not chunks
  EXPECT_NEAR(got.metrics.at("val_batch_metric"), ref.metrics.at("val_batch_metric"),
              1e-5 * (1 + std::fabs(ref.metrics.at("val_batch_metric"))));
  EXPECT_NEAR(got.test_metrics.at("test_batch_metric"), ref.test_metrics.at("test_batch_metric"),
              1e-5 * (1 + std::fabs(ref.test_metrics.at("test_batch_metric"))));
}

TEST(DataParallelStepEnd, SeesTheWholeBatchAndMatchesOneDevice) {
  manual_seed(11);
  BatchSoftmaxClassifier single;
  manual_seed(11);
  BatchSoftmaxClassifier dp;
  const Fit ref = fit(single, 1, "single_device", 40, 8, 1);
  const Fit got = fit(dp, 3, "dp", 40, 8, 1);
  EXPECT_LE(max_relative_difference(got.weights, ref.weights), 1e-5);
  EXPECT_NEAR(got.metrics.at("end_loss"), ref.metrics.at("end_loss"), 1e-5 * std::fabs(ref.metrics.at("end_loss")));
  ASSERT_FALSE(dp.seen_rows.empty());
  for (int64_t rows : dp.seen_rows) EXPECT_EQ(rows, 8);  // 40 / 8: every batch whole
  EXPECT_EQ(dp.seen_rows, single.seen_rows);
}

// Without training_step_end, a per-chunk output that is not a scalar loss cannot be combined.
TEST(DataParallelStepEnd, NonScalarOutputWithoutTheHookSaysWhatToDo) {
  struct Logits : TinyClassifier {
    Logits() : TinyClassifier(0.05, 0.0) {}
    Tensor training_step(const data::Batch& b, int64_t) override { return forward(b.input); }
    std::shared_ptr<LightningModule> make_replica() const override { return std::make_shared<Logits>(); }
  } model;
  try {
    fit(model, 2, "dp", 16, 8, 1);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("define training_step_end"), std::string::npos) << e.what();
  }
}

TEST(DataParallelSetup, ModelWithoutReplicasIsAConfigErrorNamingTheHook) {
  struct Plain : LightningModule {
    Plain() { register_module("net", std::make_shared<nn::Linear>(4, 3)); }
    std::string name() const override { return "Plain"; }
    Tensor training_step(const data::Batch&, int64_t) override { return Tensor(); }
    OptimizerConfig configure_optimizers() override { return {std::make_shared<optim::SGD>(parameters(), optim::SGDOptions{})}; }
  } model;
  TempDir dir;
  SyntheticDataModule dm(16, 16, 8);
  TrainerOptions o = testing::quiet_options(dir.path);
  o.devices = 2;
  o.strategy = "dp";
  Trainer trainer(o);
  try {
    trainer.fit(model, dm);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Plain does not implement LightningModule::make_replica()"), std::string::npos) << msg;
    EXPECT_NE(msg.find("2 devices"), std::string::npos) << msg;
  }
}

TEST(DataParallelSetup, OnePlanOneProcessAndReplicasOnThreads) {
  TempDir dir;
  TrainerOptions o = testing::quiet_options(dir.path);
  o.devices = 3;
  o.strategy = "dp";
  o.max_epochs = 2;  // the default, 1000, took most of the sanitized suite's 38 s here
  Trainer trainer(o);
  EXPECT_EQ(trainer.world_size(), 1);
  EXPECT_EQ(trainer.plan().world_size, 1);
  EXPECT_FALSE(trainer.plan().launch.has_value());
  EXPECT_EQ(trainer.strategy().devices_per_process(), 3);
  EXPECT_EQ(trainer.strategy().describe_batch(32, 1),
            "dp: 1 process x batch 32 = effective batch 32; each process splits its batch over 3 devices");
  TinyClassifier model(0.05, 0.0);
  SyntheticDataModule dm(16, 16, 8);
  trainer.fit(model, dm);
  const auto* dp = dynamic_cast<const DataParallelStrategy*>(&trainer.strategy());
  ASSERT_NE(dp, nullptr);
  ASSERT_EQ(dp->replicas().size(), 2u);
  // Replicas hold the root's weights after the last refresh (before the final step they were
  // refreshed; test() refreshes again).
  trainer.test(model, dm, "", false);
  EXPECT_EQ(testing::flat_weights(*dp->replicas()[1]), testing::flat_weights(model));
}

// predict under dp: the chunks' outputs concatenated on the root, the same rows as one device.
TEST(DataParallelPredict, ConcatenatesTheChunksOutputsInOrder) {
  auto predict = [](int devices, const std::string& strategy) {
    TempDir dir;
    SyntheticDataModule dm(16, 13, 5);  // test/predict batches of 5, 5, 3
    manual_seed(9);
    TinyClassifier model(0.05, 0.0);
    TrainerOptions o = testing::quiet_options(dir.path);
    o.devices = devices;
    o.strategy = strategy;
    Trainer trainer(o);
    std::vector<float> rows;
    for (const Tensor& out : trainer.predict(model, dm)) {
      EXPECT_EQ(out.dim(), 2);
      const auto v = out.to_vector<float>();
      rows.insert(rows.end(), v.begin(), v.end());
    }
    return rows;
  };
  const std::vector<float> one = predict(1, "single_device"), dp = predict(3, "dp");
  ASSERT_EQ(one.size(), size_t(13 * 3));
  EXPECT_LE(max_relative_difference(dp, one), 1e-6);
}

// Dropout on the device threads: each replica draws from its own part of the Philox stream, so
// two runs from one seed agree bit for bit (no race on the shared offset), and the masks differ
// from one device's (as with PyTorch's DataParallel).
TEST(DataParallelRandom, DropoutOnDeviceThreadsIsReproducible) {
  auto run = [](int devices, const std::string& strategy) {
    manual_seed(5);
    TinyClassifier model(0.05, 0.25);
    return fit(model, devices, strategy, 40, 8, 1).weights;
  };
  const std::vector<float> first = run(2, "dp"), second = run(2, "dp");
  EXPECT_EQ(first, second);
  EXPECT_GT(max_relative_difference(first, run(1, "single_device")), 1e-4);
}

// BatchNorm statistics follow the root replica (PyTorch's DataParallel): after one dp step on 2
// devices the root's running_mean is what the root chunk (the first 3 of a batch of 5) alone
// gives, not what the whole batch gives.
TEST(DataParallelBuffers, BatchNormStatisticsFollowTheRootReplica) {
  struct Normed : LightningModule {
    Normed() {
      net = register_module("net", std::make_shared<nn::Sequential>(std::make_shared<nn::BatchNorm1d>(4),
                                                                    std::make_shared<nn::Linear>(4, 3)));
    }
    std::string name() const override { return "Normed"; }
    Tensor forward(const Tensor& x) override { return net->forward(x); }
    Tensor training_step(const data::Batch& b, int64_t) override { return cross_entropy(forward(b.input), b.target); }
    OptimizerConfig configure_optimizers() override {
      return {std::make_shared<optim::SGD>(parameters(), optim::SGDOptions{.lr = 0.0})};
    }
    std::shared_ptr<LightningModule> make_replica() const override { return std::make_shared<Normed>(); }
    std::shared_ptr<nn::Sequential> net;
  };
  TempDir dir;
  SyntheticDataModule dm(5, 8, 5);  // one batch of 5: chunks 3 + 2
  dm.setup("fit");
  Normed model;
  TrainerOptions o = testing::quiet_options(dir.path);
  o.devices = 2;
  o.strategy = "dp";
  o.max_steps = 1;
  Trainer trainer(o);
  trainer.fit(model, dm);
  const data::Batch whole = dm.train->get_batch({0, 1, 2, 3, 4});
  auto running_mean_after = [](const Tensor& input) {
    nn::BatchNorm1d bn(4);
    bn.forward(input);
    return bn.running_mean.to_vector<float>();
  };
  // The loader shuffles: the root chunk is the first 3 examples of its order, whichever they are.
  const std::vector<float> got = dynamic_cast<nn::BatchNorm1d&>(*model.net->named_children()[0].second).running_mean.to_vector<float>();
  const std::vector<float> whole_batch = running_mean_after(whole.input);
  bool matches_a_root_chunk = false;
  for (int64_t a = 0; a < 5 && !matches_a_root_chunk; ++a)
    for (int64_t b = a + 1; b < 5 && !matches_a_root_chunk; ++b)
      for (int64_t c = b + 1; c < 5 && !matches_a_root_chunk; ++c) {
        const std::vector<float> three = running_mean_after(dm.train->get_batch({a, b, c}).input);
        double worst = 0;
        for (size_t k = 0; k < got.size(); ++k) worst = std::max(worst, std::fabs(double(got[k]) - three[k]));
        matches_a_root_chunk = worst < 1e-6;
      }
  EXPECT_TRUE(matches_a_root_chunk);
  double off = 0;
  for (size_t k = 0; k < got.size(); ++k) off = std::max(off, std::fabs(double(got[k]) - whole_batch[k]));
  EXPECT_GT(off, 1e-4) << "the whole batch's statistics: the replica's update was not dropped";
}

}  // namespace
}  // namespace tandem::trainer
