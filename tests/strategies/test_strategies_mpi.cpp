// horovod and ddp2 through the Trainer under mpirun -np 1..4:
//   - horovod at N ranks equals ddp at N ranks (same data order, same buckets, MPI transport);
//   - ddp2 at N "nodes" (ranks, each made its own node) x 2 CPU devices at batch B equals one
//     device at batch N x B over the DistributedSampler's padded order, with uneven splits and
//     with gradient accumulation.
// Weights after several optimizer steps agree within 1e-5 (relative).
// And a ConfigError found by rank 0 alone (a hyper-parameter conflict, found where rank 0 writes
// hparams.yaml) stops every rank within seconds, not at the collective timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "engine/data/distributed_sampler.h"
#include "engine/strategies/data_parallel_strategy.h"
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

// mpirun puts every rank on this one host; ddp2 runs one process per node, so each rank is
// made a node of its own for the test (Open MPI's node = rank / local size).
struct OneRankPerNode {
  OneRankPerNode() {
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1", 1);
  }
  ~OneRankPerNode() {
    const std::string rank = std::to_string(g_world->local_rank()), size = std::to_string(g_world->size());
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", rank.c_str(), 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", size.c_str(), 1);
  }
};

struct Case {
  int64_t n_train, batch;
  int epochs;
  int64_t accumulate;
};

std::vector<float> fit_weights(const Case& c, const std::string& strategy, int devices, int num_nodes) {
  SharedDir dir(*g_world, "strategies");
  SyntheticDataModule dm(c.n_train, 16, c.batch);
  manual_seed(42);
  TinyClassifier model(0.05, 0.0);
  TrainerOptions o = testing::quiet_options(dir.path);
  o.strategy = strategy;
  o.devices = devices;
  o.num_nodes = num_nodes;
  o.max_epochs = c.epochs;
  o.accumulate_grad_batches = c.accumulate;
  o.num_sanity_val_steps = 0;
  Trainer trainer(o);
  EXPECT_EQ(trainer.world_size(), g_world->size());
  trainer.fit(model, dm);
  return testing::flat_weights(model);
}

// One process at batch `batch` x W over the padded DistributedSampler order (Lightning's loop,
// the Trainer's accumulation rule, TinyClassifier's Adam + StepLR).
std::vector<float> one_device_weights(const Case& c) {
  SyntheticDataModule dm(c.n_train, 16, c.batch);
  dm.setup("fit");
  manual_seed(42);
  TinyClassifier model(0.05, 0.0);
  OptimizerConfig config = model.configure_optimizers();
  const int w = g_world->size();
  data::DistributedSamplerOptions so;
  so.num_replicas = w;
  so.shuffle = true;
  so.seed = 1234;  // SyntheticDataModule's loader seed
  const data::DistributedSampler sampler(dm.train->size(), so);
  for (int epoch = 0; epoch < c.epochs; ++epoch) {
    const std::vector<int64_t> order = sampler.padded_order(epoch);
    const int64_t window = c.batch * w;
    const int64_t batches = (int64_t(order.size()) + window - 1) / window;
    int64_t accumulated = 0;
    for (int64_t k = 0; k < batches; ++k) {
      const auto first = order.begin() + k * window;
      const auto last = order.begin() + std::min<int64_t>((k + 1) * window, int64_t(order.size()));
      const data::Batch b = dm.train->get_batch(std::vector<int64_t>(first, last));
      Tensor loss = cross_entropy(model.forward(b.input), b.target);
      if (c.accumulate > 1) loss = loss / double(c.accumulate);
      loss.backward();
      if (++accumulated >= c.accumulate || k + 1 == batches) {
        config.optimizer->step();
        config.optimizer->zero_grad();
        accumulated = 0;
      }
    }
    config.scheduler->step();
  }
  return testing::flat_weights(model);
}

TEST(HorovodEquivalence, EqualsDdpAtTheSameWorldSize) {
  for (const Case& c : {Case{37, 4, 2, 1}, Case{37, 3, 2, 2}}) {
    const std::vector<float> ddp = fit_weights(c, "ddp", g_world->size(), 1);
    const std::vector<float> horovod = fit_weights(c, "horovod", g_world->size(), 1);
    EXPECT_LE(max_relative_difference(horovod, ddp), 1e-5) << "n=" << c.n_train << " accumulate=" << c.accumulate;
    manual_seed(42);
    TinyClassifier untouched(0.05, 0.0);
    EXPECT_GT(max_relative_difference(testing::flat_weights(untouched), ddp), 1e-3);
  }
}

TEST(DDP2Equivalence, NodesTimesTwoDevicesEqualOneDeviceAtTheJobsBatch) {
  OneRankPerNode nodes;
  // Batch 5 splits 3 + 2 over a node's devices; 37 examples leave short last batches.
  for (const Case& c : {Case{48, 4, 2, 1}, Case{37, 5, 2, 1}, Case{37, 5, 2, 2}}) {
    const std::vector<float> ddp2 = fit_weights(c, "ddp2", 2, g_world->size());
    const std::vector<float> ref = one_device_weights(c);
    EXPECT_LE(max_relative_difference(ddp2, ref), 1e-5)
        << "nodes=" << g_world->size() << " n=" << c.n_train << " batch=" << c.batch << " accumulate=" << c.accumulate;
    manual_seed(42);
    TinyClassifier untouched(0.05, 0.0);
    EXPECT_GT(max_relative_difference(testing::flat_weights(untouched), ref), 1e-3);
  }
}

TEST(DDP2Trainer, OneProcessPerNodeSplittingItsBatchOverItsDevices) {
  OneRankPerNode nodes;
  SharedDir dir(*g_world, "strategies");
  TrainerOptions o = testing::quiet_options(dir.path);
  o.strategy = "ddp2";
  o.devices = 2;
  o.num_nodes = g_world->size();
  Trainer trainer(o);
  EXPECT_EQ(trainer.world_size(), g_world->size());
  EXPECT_EQ(trainer.strategy().node_rank(), g_world->rank());
  EXPECT_EQ(trainer.strategy().devices_per_process(), 2);
  const int w = g_world->size();
  EXPECT_EQ(trainer.strategy().describe_batch(8, 1),
            "ddp2: " + std::to_string(w) + (w == 1 ? " process" : " processes") + " x batch 8 = effective batch " +
                std::to_string(8 * w) + "; each process splits its batch over 2 devices");
}

TEST(DDP2Traffic, EachStepAllreducesEveryParametersGradientAcrossNodes) {
  OneRankPerNode nodes;
  SharedDir dir(*g_world, "strategies");
  const int W = g_world->size(), R = g_world->rank();
  SyntheticDataModule dm(37, 16, 4);
  manual_seed(42);
  TinyClassifier model(0.05, 0.0);
  TrainerOptions o = testing::quiet_options(dir.path);
  o.strategy = "ddp2";
  o.devices = 2;
  o.num_nodes = W;
  o.max_epochs = 2;
  o.num_sanity_val_steps = 0;
  Trainer trainer(o);
  trainer.fit(model, dm);
  const StepTraffic traffic = trainer.strategy().step_traffic().value_or(StepTraffic{});
  // 37 examples at batch 4 per process over W nodes: ceil(ceil(37 / W) / 4) steps an epoch.
  const int64_t steps = 2 * (((37 + W - 1) / W + 3) / 4);
  EXPECT_EQ(traffic.steps, steps);
  // A ring allreduce of n elements sends the n - chunk(n) elements other ranks own, twice
  // (reduce-scatter, then allgather). Per step: one allreduce of each parameter's gradient
  // (TinyClassifier: 16x4, 16, 3x16, 3 float32) and the finite-loss check (one int32); the
  // devices inside a node share memory and send nothing.
  auto ring = [&](int64_t n) { return 2 * (n - collectives::chunk_count(n, W, R)) * 4; };
  const int64_t per_step = ring(64) + ring(16) + ring(48) + ring(3) + ring(1);
  EXPECT_EQ(traffic.sent.bytes_of(collectives::CommOp::Allreduce), steps * per_step);
  EXPECT_EQ(traffic.sent.calls_of(collectives::CommOp::Allreduce), W > 1 ? steps * 5 : 0);  // one node: nothing to send
  EXPECT_NE(trainer.strategy().summary().find("sent"), std::string::npos) << trainer.strategy().summary();
}

}  // namespace
}  // namespace tandem::trainer

namespace tandem::trainer {
namespace {

// A datamodule whose hparams name the model's `lr` with another value.
class ConflictingDataModule : public SyntheticDataModule {
 public:
  ConflictingDataModule() : SyntheticDataModule(32, 16, 4) {}
  nlohmann::json hparams() const override { return {{"lr", 123.0}}; }
};

// Rank 0 alone writes hparams.yaml; the conflict it finds there is known to every rank (the
// same model and datamodule), so every rank must stop with the ConfigError at once instead of
// the others waiting in their first collective for the 60 s timeout set here.
TEST(FailFast, AHyperParameterConflictStopsEveryRankWithinSeconds) {
  SharedDir dir(*g_world, "strategies");
  manual_seed(42);
  TinyClassifier model(0.05, 0.0);
  model.hparams = {{"lr", 0.05}};
  ConflictingDataModule dm;
  TrainerOptions o = testing::quiet_options(dir.path);
  o.devices = g_world->size();
  o.strategy = "ddp";
  o.collective_timeout = 60.0;
  o.num_sanity_val_steps = 0;
  Trainer trainer(o);
  const auto start = std::chrono::steady_clock::now();
  try {
    trainer.fit(model, dm);
    ADD_FAILURE() << "fit trained with conflicting hyper-parameters";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("hyper-parameter 'lr'"), std::string::npos) << e.what();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0) << "rank " << g_world->rank() << " waited for the failure";
}

}  // namespace
}  // namespace tandem::trainer
