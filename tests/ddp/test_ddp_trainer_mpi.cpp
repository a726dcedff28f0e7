// DDP through the Trainer, under mpirun -np 1..4, against a plain single-process loop at the
// same global batch (the "proven equivalence" of docs/DDP.md): the DistributedSampler's padded
// order cut into windows of batch x world examples, the mean loss of each window backwarded
// (divided by accumulate_grad_batches), Adam + StepLR stepping at the same boundaries. After k
// epochs both must hold the same weights within float32 tolerance, and after every step the
// replicas must be bit-identical across ranks. Also: sync_dist epoch means weighted by batch
// size, reduce_fx across ranks, all_gather, and the NaN-on-one-rank stop.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>

#include "engine/data/distributed_sampler.h"
#include "engine/strategies/ddp_strategy.h"
#include "engine/trainer/logger_connector.h"
#include "mpi_test_world.h"
#include "trainer_test_util.h"

namespace tandem::trainer {
namespace {

using collectives::ReduceOp;
using collectives::mpitest::g_world;
using testing::SyntheticDataModule;
using testing::TinyClassifier;

// Compares every rank's weights with rank 0's, bit for bit (min == max over ranks).
class ReplicasIdentical : public Callback {
 public:
  std::string name() const override { return "ReplicasIdentical"; }
  void on_train_batch_end(Trainer& t, LightningModule& m, const Tensor&, const data::Batch&, int64_t) override {
    const std::vector<float> w = testing::flat_weights(m);
    Tensor lo = Tensor::from_vector(w, {int64_t(w.size())}), hi = lo.clone();
    g_world->allreduce(lo, ReduceOp::Min);
    g_world->allreduce(hi, ReduceOp::Max);
    checks += 1;
    if (lo.to_vector<float>() != hi.to_vector<float>()) mismatches += 1;
  }
  int checks = 0, mismatches = 0;
};

// One directory shared by the ranks, as a job's default_root_dir is: rank 0 makes and removes
// it, the others wait at barriers.
class SharedTempDir {
 public:
  SharedTempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    // Unique per job (rank 0's pid): ctest runs the np1..np4 jobs side by side.
    Tensor pid = Tensor::scalar(double(getpid()), DType::Int64);
    g_world->broadcast(pid, 0);
    path = (std::filesystem::temp_directory_path() /
            ("tandem_ddp_" + std::string(info->name()) + "_" + std::to_string(int64_t(pid.item()))))
               .string();
    if (g_world->rank() == 0) {
      std::filesystem::remove_all(path);
      std::filesystem::create_directories(path);
    }
    g_world->barrier();
  }
  ~SharedTempDir() {
    g_world->barrier();
    if (g_world->rank() == 0) std::filesystem::remove_all(path);
  }
  std::string path;
};

// This process on the CPU, in a job of the test world's size.
StrategyEnvironment cpu_environment() {
  StrategyEnvironment env;
  env.devices = {AcceleratorDevice{"cpu", 0}};
  env.tensor_devices = {Device::cpu()};
  env.world_size = g_world->size();
  return env;
}

TrainerOptions ddp_options(const std::string& root) {
  TrainerOptions o = testing::quiet_options(root);
  o.devices = g_world->size();
  o.strategy = "ddp";
  o.num_sanity_val_steps = 0;
  return o;
}

// The single-process reference: Lightning's loop at global batch `batch` x W over the padded
// order, with the Trainer's accumulation rule (loss / accumulate; step every `accumulate`
// batches and after the last batch of an epoch) and TinyClassifier's optimizer setup.
std::vector<float> reference_weights(SyntheticDataModule& dm, int64_t batch, int epochs, int64_t accumulate) {
  manual_seed(42);
  TinyClassifier model(0.05, 0.0);
  OptimizerConfig config = model.configure_optimizers();
  const int w = g_world->size();
  data::DistributedSamplerOptions so;
  so.num_replicas = w;
  so.shuffle = true;
  so.seed = 1234;  // SyntheticDataModule's loader seed
  const data::DistributedSampler sampler(dm.train->size(), so);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    const std::vector<int64_t> order = sampler.padded_order(epoch);
    const int64_t window = batch * w;
    const int64_t batches = (int64_t(order.size()) + window - 1) / window;
    int64_t accumulated = 0;
    for (int64_t k = 0; k < batches; ++k) {
      const auto first = order.begin() + k * window;
      const auto last = order.begin() + std::min<int64_t>((k + 1) * window, int64_t(order.size()));
      const data::Batch b = dm.train->get_batch(std::vector<int64_t>(first, last));
      Tensor loss = cross_entropy(model.forward(b.input), b.target);
      if (accumulate > 1) loss = loss / double(accumulate);
      loss.backward();
      accumulated += 1;
      if (accumulated >= accumulate || k + 1 == batches) {
        config.optimizer->step();
        config.optimizer->zero_grad();
        accumulated = 0;
      }
    }
    config.scheduler->step();
  }
  return testing::flat_weights(model);
}

struct Case {
  int64_t n_train, batch;
  int epochs;
  int64_t accumulate;
};

void expect_equivalent(const Case& c) {
  SharedTempDir dir;
  SyntheticDataModule dm(c.n_train, 16, c.batch);
  manual_seed(1000 + g_world->rank());  // different per rank: DDP must broadcast rank 0's weights...
  TinyClassifier ddp_model(0.05, 0.0);
  // ...so seed rank 0 like the reference.
  if (g_world->rank() == 0) {
    manual_seed(42);
    TinyClassifier seeded(0.05, 0.0);
    ddp_model.load_state_dict(seeded.state_dict());
  }
  auto replicas = std::make_shared<ReplicasIdentical>();
  TrainerOptions o = ddp_options(dir.path);
  o.max_epochs = c.epochs;
  o.accumulate_grad_batches = c.accumulate;
  o.callbacks = {replicas};
  Trainer trainer(o);
  ASSERT_EQ(trainer.world_size(), g_world->size());
  trainer.fit(ddp_model, dm);

  const std::vector<float> ddp = testing::flat_weights(ddp_model);
  const std::vector<float> ref = reference_weights(dm, c.batch, c.epochs, c.accumulate);
  ASSERT_EQ(ddp.size(), ref.size());
  double worst = 0;
  for (size_t i = 0; i < ddp.size(); ++i) {
    worst = std::max(worst, std::fabs(double(ddp[i]) - ref[i]) / std::max(1.0, std::fabs(double(ref[i]))));
  }
  EXPECT_LT(worst, 2e-5) << "n=" << c.n_train << " batch=" << c.batch << " accumulate=" << c.accumulate;
  EXPECT_GT(replicas->checks, 0);
  EXPECT_EQ(replicas->mismatches, 0) << "replicas diverged after " << replicas->mismatches << " of " << replicas->checks << " steps";
  // The reference moved the weights: the comparison is not between two untrained models.
  manual_seed(42);
  TinyClassifier untouched(0.05, 0.0);
  EXPECT_NE(testing::flat_weights(untouched), ref);
}

TEST(DDPEquivalence, EvenDatasetMatchesOneProcessAtTheGlobalBatch) { expect_equivalent({48, 4, 2, 1}); }

TEST(DDPEquivalence, UnevenDatasetPadsLikeDistributedSampler) { expect_equivalent({37, 4, 2, 1}); }

TEST(DDPEquivalence, GradientAccumulationSyncsOnlyAtTheStep) { expect_equivalent({37, 3, 2, 2}); }

TEST(DDPTrainer, BucketsLaunchDuringBackwardAndTheSummarySaysSo) {
  SharedTempDir dir;
  SyntheticDataModule dm(32, 16, 4);
  TinyClassifier model(0.05, 0.0);
  TrainerOptions o = ddp_options(dir.path);
  o.max_epochs = 1;
  Trainer trainer(o);
  trainer.fit(model, dm);
  auto* ddp = dynamic_cast<DDPStrategy*>(&trainer.strategy());
  ASSERT_NE(ddp, nullptr);
  ASSERT_NE(ddp->reducer(), nullptr);
  const int64_t per_rank = (32 + g_world->size() - 1) / g_world->size();  // DistributedSampler pads to ceil
  EXPECT_EQ(ddp->reducer()->stats().reductions, (per_rank + 3) / 4);  // one synchronized step per batch of 4
  EXPECT_EQ(ddp->reducer()->stats().buckets_launched_in_backward, ddp->reducer()->stats().bucket_launches);
  EXPECT_NE(ddp->summary().find("exposed communication"), std::string::npos) << ddp->summary();
}

TEST(DDPTrainer, NanLossOnOneRankStopsEveryRank) {
  SharedTempDir dir;
  SyntheticDataModule dm(64, 16, 4);  // >= 4 steps per epoch at 4 ranks
  TinyClassifier model(0.05, 0.0);
  if (g_world->rank() == g_world->size() - 1) model.nan_at_step = 2;
  TrainerOptions o = ddp_options(dir.path);
  o.max_epochs = 1;
  Trainer trainer(o);
  try {
    trainer.fit(model, dm);
    FAIL() << "expected NonFiniteLossError";
  } catch (const NonFiniteLossError& e) {
    const std::string msg = e.what();
    if (g_world->size() > 1 && g_world->rank() != g_world->size() - 1) {
      EXPECT_NE(msg.find("another rank's loss was nan or inf"), std::string::npos) << msg;
    } else {
      EXPECT_NE(msg.find("loss=nan"), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(trainer.global_step(), 2);
}

TEST(DDPLogging, SyncDistEpochMeanIsWeightedByBatchSizeAcrossRanks) {
  DDPStrategy strategy;
  strategy.setup_environment(cpu_environment(), g_world);
  LoggerConnector logger(&strategy);
  const int r = g_world->rank(), w = g_world->size();
  // Rank r logs values r + 1 and 10 * (r + 1) with batch sizes r + 1 and 2.
  logger.begin_epoch(RunningStage::Validate);
  logger.set_context(RunningStage::Validate, LogHook::EvaluationStep);
  const double v1 = r + 1, v2 = 10.0 * (r + 1);
  for (auto [value, batch] : {std::pair{v1, int64_t(r + 1)}, std::pair{v2, int64_t(2)}}) {
    logger.set_batch_size(batch);
    logger.log("mean", value, {.sync_dist = true});
    logger.log("sum", value, {.reduce_fx = ReduceFx::Sum, .sync_dist = true});
    logger.log("max", value, {.reduce_fx = ReduceFx::Max, .sync_dist = true});
    logger.log("min", value, {.reduce_fx = ReduceFx::Min, .sync_dist = true});
    logger.log("local", value, {});
    logger.end_step(RunningStage::Validate);
  }
  logger.end_epoch(RunningStage::Validate);
  double weighted = 0, weight = 0, total = 0;
  for (int q = 0; q < w; ++q) {
    weighted += (q + 1.0) * (q + 1) + 10.0 * (q + 1) * 2;
    weight += (q + 1) + 2;
    total += (q + 1.0) + 10.0 * (q + 1);
  }
  const auto& m = logger.callback_metrics();
  EXPECT_NEAR(m.at("mean"), weighted / weight, 1e-12);
  EXPECT_NEAR(m.at("sum"), total, 1e-12);
  EXPECT_EQ(m.at("max"), 10.0 * w);
  EXPECT_EQ(m.at("min"), 1.0);
  EXPECT_NEAR(m.at("local"), (v1 * (r + 1) + v2 * 2) / (r + 3.0), 1e-12);  // not synced: this rank's own
  // A step value with sync_dist is reduced when logged.
  logger.begin_epoch(RunningStage::Train);
  logger.set_context(RunningStage::Train, LogHook::TrainingStep);
  logger.log("step_max", double(r), {.reduce_fx = ReduceFx::Max, .sync_dist = true});
  logger.end_step(RunningStage::Train);
  EXPECT_EQ(logger.callback_metrics().at("step_max"), double(w - 1));
  EXPECT_THROW(logger.log("both", 1.0, {.sync_dist = true, .rank_zero_only = true}), ValueError);
}

TEST(DDPStrategy, AllGatherStacksEveryRanksTensorInRankOrder) {
  DDPStrategy strategy;
  strategy.setup_environment(cpu_environment(), g_world);
  const int r = g_world->rank(), w = g_world->size();
  std::vector<float> mine;
  for (int i = 0; i < 6; ++i) mine.push_back(float(100 * r + i));
  const Tensor gathered = strategy.all_gather(Tensor::from_vector(mine, {2, 3}));
  EXPECT_EQ(gathered.shape(), (Shape{w, 2, 3}));
  const auto v = gathered.to_vector<float>();
  for (int q = 0; q < w; ++q) {
    for (int i = 0; i < 6; ++i) EXPECT_EQ(v[size_t(q * 6 + i)], float(100 * q + i));
  }
  EXPECT_EQ(strategy.broadcast_from_zero(r == 0 ? 17 : -5), 17);
  EXPECT_EQ(strategy.reduce_any(r == w - 1), true);
  EXPECT_EQ(strategy.reduce_any(false), false);
}

}  // namespace
}  // namespace tandem::trainer
