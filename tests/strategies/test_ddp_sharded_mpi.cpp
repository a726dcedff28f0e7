// ddp_sharded (ZeRO stage 1) through the Trainer under mpirun -np 1..4, on TinyClassifier's 131
// parameters (a prime: no world size divides it):
//   - the weights equal ddp's at the same world size within 1e-5 (Adam + StepLR with and without
//     accumulation; SGD with momentum, weight decay and two parameter groups, with gradient
//     clipping by the global norm and by value);
//   - the optimizer state per rank is the rank's chunk of the flat parameters (about 1/N of ddp's);
//   - checkpoints: a sharded one resumed under ddp, a ddp one resumed under ddp_sharded, and a
//     sharded one resumed at another world size (a sub-communicator) continue as the run that
//     wrote them would have (compared with ddp resuming the same file);
//   - the bytes sent per step equal ddp's: one reduce_scatter and one allgather of 131 float32;
//   - an optimizer that cannot be split is a ConfigError naming it.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>

#include "collectives/mpi/host_comm.h"
#include "engine/strategies/ddp_sharded_strategy.h"
#include "mpi_test_world.h"
#include "shared_dir.h"
#include "trainer_test_util.h"

namespace tandem::trainer {
namespace {

using collectives::mpitest::g_world;
using testing::SharedDir;
using testing::SyntheticDataModule;
using testing::TinyClassifier;
using testing::max_relative_difference;

constexpr int64_t kParams = 131;  // 4x16 + 16 + 16x3 + 3

// TinyClassifier with SGD (momentum, weight decay) over two groups: the first layer at lr 0.05,
// the second at 0.1 with weight decay 0.01.
class SgdClassifier : public TinyClassifier {
 public:
  SgdClassifier() : TinyClassifier(0.05, 0.0) {}
  OptimizerConfig configure_optimizers() override {
    const std::vector<Tensor> p = parameters();
    std::vector<optim::ParamGroup> groups{{{p[0], p[1]}, {}}, {{p[2], p[3]}, {{"lr", 0.1}, {"weight_decay", 0.01}}}};
    OptimizerConfig c;
    c.optimizer = std::make_shared<optim::SGD>(groups, optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
    return c;
  }
};

struct FitRun {
  std::string strategy;
  bool sgd = false;
  int64_t accumulate = 1;
  std::optional<double> clip;
  std::string clip_algorithm = "norm";
  int epochs = 2;
  std::string save_after_first_epoch;  // a checkpoint path, or empty
  std::string resume_from;
  MPI_Comm comm = MPI_COMM_WORLD;
};

// Saves a checkpoint at the end of the first epoch.
class SaveAfterFirstEpoch : public Callback {
 public:
  explicit SaveAfterFirstEpoch(std::string path) : path_(std::move(path)) {}
  std::string name() const override { return "SaveAfterFirstEpoch"; }
  void on_train_epoch_end(Trainer& trainer, LightningModule&) override {
    if (trainer.current_epoch() == 0) trainer.save_checkpoint(path_);
  }

 private:
  std::string path_;
};

struct Outcome {
  std::vector<float> weights;
  int64_t state_bytes = 0;
  StepTraffic traffic;
};

Outcome fit(const FitRun& run, const std::string& root) {
  SyntheticDataModule dm(37, 16, 4);
  manual_seed(42);
  std::unique_ptr<TinyClassifier> model = run.sgd ? std::make_unique<SgdClassifier>() : std::make_unique<TinyClassifier>(0.05, 0.0);
  TrainerOptions o = testing::quiet_options(root);
  o.strategy = run.strategy;
  int size = 0;
  MPI_Comm_size(run.comm, &size);
  o.devices = size;
  if (run.comm != MPI_COMM_WORLD) o.communicator = collectives::host_comm(run.comm);
  o.max_epochs = run.epochs;
  o.accumulate_grad_batches = run.accumulate;
  o.gradient_clip_val = run.clip;
  o.gradient_clip_algorithm = run.clip_algorithm;
  o.num_sanity_val_steps = 0;
  if (!run.save_after_first_epoch.empty()) o.callbacks.push_back(std::make_shared<SaveAfterFirstEpoch>(run.save_after_first_epoch));
  Trainer trainer(o);
  trainer.fit(*model, dm, run.resume_from);
  Outcome out;
  out.weights = testing::flat_weights(*model);
  out.state_bytes = trainer.strategy().optimizer_state_bytes(*trainer.optimizer());
  out.traffic = trainer.strategy().step_traffic().value_or(StepTraffic{});
  return out;
}

void expect_trained(const std::vector<float>& weights) {
  manual_seed(42);
  TinyClassifier untouched(0.05, 0.0);
  EXPECT_GT(max_relative_difference(testing::flat_weights(untouched), weights), 1e-3);
}

TEST(DDPShardedEquivalence, AdamEqualsDdp) {
  SharedDir dir(*g_world, "adam");
  for (int64_t accumulate : {1, 2}) {
    FitRun run{"ddp"};
    run.accumulate = accumulate;
    const Outcome ddp = fit(run, dir.path);
    run.strategy = "ddp_sharded";
    const Outcome sharded = fit(run, dir.path);
    EXPECT_LE(max_relative_difference(sharded.weights, ddp.weights), 1e-5) << "accumulate=" << accumulate;
    expect_trained(sharded.weights);
  }
}

TEST(DDPShardedEquivalence, SgdMomentumGroupsAndClippingEqualDdp) {
  SharedDir dir(*g_world, "sgd");
  // 0.05 clips most steps' global norm (a per-rank norm would clip differently); value clipping
  // at 0.01 clamps many elements.
  for (const auto& [clip, algorithm] : std::vector<std::pair<std::optional<double>, std::string>>{
           {std::nullopt, "norm"}, {0.05, "norm"}, {0.01, "value"}}) {
    FitRun run{"ddp", true};
    run.clip = clip;
    run.clip_algorithm = algorithm;
    const Outcome ddp = fit(run, dir.path);
    run.strategy = "ddp_sharded";
    const Outcome sharded = fit(run, dir.path);
    EXPECT_LE(max_relative_difference(sharded.weights, ddp.weights), 1e-5) << "clip " << algorithm;
    expect_trained(sharded.weights);
  }
}

// The elements of the flat parameters this rank owns, and the parameters its chunk crosses.
std::pair<int64_t, int64_t> chunk_of_tiny_classifier(int world, int rank) {
  const int64_t begin = collectives::chunk_offset(kParams, world, rank), count = collectives::chunk_count(kParams, world, rank);
  int64_t crossed = 0, offset = 0;
  for (int64_t n : {64, 16, 48, 3}) {
    if (std::max(offset, begin) < std::min(offset + n, begin + count)) crossed += 1;
    offset += n;
  }
  return {count, crossed};
}

TEST(DDPShardedMemory, OptimizerStateIsTheRanksChunk) {
  SharedDir dir(*g_world, "memory");
  const int W = g_world->size(), R = g_world->rank();
  const Outcome ddp = fit(FitRun{"ddp"}, dir.path);
  const Outcome sharded = fit(FitRun{"ddp_sharded"}, dir.path);
  // Adam: exp_avg and exp_avg_sq (float32) per element, a float32 step per parameter (piece).
  EXPECT_EQ(ddp.state_bytes, 2 * 4 * kParams + 4 * 4);
  const auto [count, crossed] = chunk_of_tiny_classifier(W, R);
  EXPECT_EQ(sharded.state_bytes, 2 * 4 * count + 4 * crossed);
  // About 1/W: the elementwise part is ceil(131 / W) elements at most.
  EXPECT_LE(double(sharded.state_bytes), double(ddp.state_bytes) / W + 2 * 4 + 4 * 4);
}

TEST(DDPShardedTraffic, SendsWhatDdpSends) {
  SharedDir dir(*g_world, "traffic");
  const int W = g_world->size(), R = g_world->rank();
  const Outcome ddp = fit(FitRun{"ddp"}, dir.path);
  const Outcome sharded = fit(FitRun{"ddp_sharded"}, dir.path);
  // 37 examples at batch 4 over W ranks: ceil(ceil(37 / W) / 4) steps per epoch, 2 epochs.
  const int64_t steps = 2 * (((37 + W - 1) / W + 3) / 4);
  EXPECT_EQ(ddp.traffic.steps, steps);
  EXPECT_EQ(sharded.traffic.steps, steps);
  // Per step, on top of the finite-loss check (allreduce of one int32) and train_loss's
  // on-step sync (none: TinyClassifier logs without sync_dist): ddp allreduces 131 float32
  // (one bucket); ddp_sharded reduce-scatters and allgathers them.
  const int64_t others = kParams - collectives::chunk_count(kParams, W, R);
  const int64_t check = 2 * (1 - collectives::chunk_count(1, W, R)) * 4;
  using collectives::CommOp;
  EXPECT_EQ(ddp.traffic.sent.bytes_of(CommOp::Allreduce), steps * (2 * others * 4 + check));
  EXPECT_EQ(sharded.traffic.sent.bytes_of(CommOp::ReduceScatter), steps * others * 4);
  EXPECT_EQ(sharded.traffic.sent.bytes_of(CommOp::Allgather), steps * others * 4);
  EXPECT_EQ(sharded.traffic.sent.bytes_of(CommOp::Allreduce), steps * check);
  EXPECT_EQ(sharded.traffic.sent.total_bytes(), ddp.traffic.sent.total_bytes());
}

TEST(DDPShardedCheckpoint, ResumesUnderDdpAndDdpResumesUnderSharded) {
  SharedDir dir(*g_world, "resume");
  const std::string sharded_ckpt = dir.path + "/sharded.safetensors", ddp_ckpt = dir.path + "/ddp.safetensors";
  FitRun run{"ddp_sharded"};
  run.save_after_first_epoch = sharded_ckpt;
  const Outcome sharded_through = fit(run, dir.path);
  run = FitRun{"ddp"};
  run.save_after_first_epoch = ddp_ckpt;
  const Outcome ddp_through = fit(run, dir.path);

  run = FitRun{"ddp"};
  run.resume_from = sharded_ckpt;
  EXPECT_LE(max_relative_difference(fit(run, dir.path).weights, sharded_through.weights), 1e-5);
  run = FitRun{"ddp_sharded"};
  run.resume_from = ddp_ckpt;
  EXPECT_LE(max_relative_difference(fit(run, dir.path).weights, ddp_through.weights), 1e-5);
  // A run that lost the optimizer state would not match: Adam restarted from zero moments
  // takes steps of about lr per element.
  run = FitRun{"ddp_sharded"};
  run.epochs = 1;
  const Outcome first_epoch = fit(run, dir.path);
  EXPECT_GT(max_relative_difference(first_epoch.weights, sharded_through.weights), 1e-3);
}

TEST(DDPShardedCheckpoint, ResumesAtAnotherWorldSize) {
  const int W = g_world->size(), R = g_world->rank();
  SharedDir dir(*g_world, "world");
  const std::string ckpt = dir.path + "/sharded.safetensors";
  FitRun run{"ddp_sharded"};
  run.save_after_first_epoch = ckpt;
  fit(run, dir.path);
  // The first max(W - 1, 1) ranks continue alone; ddp there, from the same file, is the reference.
  const int smaller = std::max(W - 1, 1);
  MPI_Comm sub;
  MPI_Comm_split(MPI_COMM_WORLD, R < smaller ? 0 : MPI_UNDEFINED, R, &sub);
  if (sub != MPI_COMM_NULL) {
    auto sub_comm = collectives::make_communicator(collectives::CommBackend::Mpi, collectives::host_comm(sub));
    {
      SharedDir sub_dir(*sub_comm, "sub");
      FitRun resumed{"ddp_sharded"};
      resumed.comm = sub;
      resumed.resume_from = ckpt;
      const Outcome sharded = fit(resumed, sub_dir.path);
      resumed.strategy = "ddp";
      const Outcome ddp = fit(resumed, sub_dir.path);
      EXPECT_LE(max_relative_difference(sharded.weights, ddp.weights), 1e-5) << "resumed at " << smaller << " of " << W;
      expect_trained(sharded.weights);
    }
    sub_comm.reset();
    MPI_Comm_free(&sub);
  }
  g_world->barrier();
}

// An optimizer whose class gives no shard optimizer (the default of Optimizer).
class WholeTensorSGD : public optim::SGD {
 public:
  using optim::SGD::SGD;
  std::string name() const override { return "WholeTensorSGD"; }
  std::unique_ptr<Optimizer> make_shard_optimizer(std::vector<optim::ParamGroup>) const override { return nullptr; }
};

class WholeTensorClassifier : public TinyClassifier {
 public:
  WholeTensorClassifier() : TinyClassifier(0.05, 0.0) {}
  OptimizerConfig configure_optimizers() override {
    OptimizerConfig c;
    c.optimizer = std::make_shared<WholeTensorSGD>(parameters(), optim::SGDOptions{.lr = 0.05});
    return c;
  }
};

TEST(DDPShardedErrors, AnOptimizerThatCannotBeSplitIsAConfigError) {
  SharedDir dir(*g_world, "errors");
  SyntheticDataModule dm(37, 16, 4);
  WholeTensorClassifier model;
  TrainerOptions o = testing::quiet_options(dir.path);
  o.strategy = "ddp_sharded";
  o.devices = g_world->size();
  Trainer trainer(o);
  try {
    trainer.fit(model, dm);
    ADD_FAILURE() << "fit did not refuse WholeTensorSGD";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("WholeTensorSGD cannot be split"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("use SGD, Adam or AdamW"), std::string::npos) << e.what();
  }
  EXPECT_EQ(model.count["training_step"], 0);  // refused before any training
}

}  // namespace
}  // namespace tandem::trainer
