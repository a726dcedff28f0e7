// The Trainer on a host program's communicator (TrainerOptions::communicator) and on per-rank
// host arrays, under mpirun -np 1..4: the communicator's shape, typed errors for bad handles,
// a Trainer whose world is a sub-communicator of MPI_COMM_WORLD, and the per-rank batch check.
// apps/examples/host_comm (host_comm_split_world_np4) checks the trained weights.
#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>
#include <stdlib.h>

#include "collectives/mpi/host_comm.h"
#include "engine/data/host_array_data_module.h"
#include "mpi_test_world.h"
#include "tensor/generator.h"
#include "tests/accelerators/expect_error.h"
#include "trainer_test_util.h"

namespace tandem::trainer {
namespace {

using collectives::mpitest::g_world;

int world_rank() { return g_world->rank(); }
int world_size() { return g_world->size(); }

// This rank's own log directory (ranks other than a job's rank 0 create nothing in it).
struct RankTempDir {
  RankTempDir() {
    path = (std::filesystem::temp_directory_path() / "tandem_host_comm_XXXXXX").string();
    if (!mkdtemp(path.data())) ADD_FAILURE() << "mkdtemp " << path;
  }
  ~RankTempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

// Ranks paired by world rank / 2 (the last one alone when the world is odd).
MPI_Comm split_in_pairs() {
  MPI_Comm pair;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() / 2, world_rank(), &pair);
  return pair;
}

TEST(HostComm, DescribesTheCommunicatorItWasGiven) {
  MPI_Comm pair = split_in_pairs();
  const collectives::HostCommShape s = collectives::describe_host_comm(collectives::host_comm(pair));
  const int expected_size = std::min(2, world_size() - world_rank() / 2 * 2);
  EXPECT_EQ(s.size, expected_size);
  EXPECT_EQ(s.rank, world_rank() % 2);
  EXPECT_EQ(s.local_rank, world_rank() % 2);  // one machine: one node
  EXPECT_EQ(s.local_size, expected_size);
  EXPECT_EQ(s.node_rank, 0);
  const ClusterEnvironment c = host_comm_cluster(collectives::host_comm(pair));
  EXPECT_EQ(c.name, "host_comm");
  EXPECT_TRUE(c.launched());
  EXPECT_EQ(c.world_size, expected_size);
  MPI_Comm_free(&pair);
}

TEST(HostComm, BadHandlesAreConfigErrors) {
  const collectives::HostComm null_comm = collectives::host_comm(MPI_COMM_NULL);
  expect_error<ConfigError>([&] { collectives::describe_host_comm(null_comm); },
                            {"handle " + std::to_string(null_comm.fortran_handle), "is not a communicator of this process"});
  expect_error<ConfigError>([&] { collectives::make_communicator(collectives::CommBackend::Mpi, null_comm); },
                            {"is not a communicator of this process"});
  for (int64_t unknown : {int64_t(1) << 20, int64_t(-3), int64_t(1) << 40}) {
    expect_error<ConfigError>([&] { collectives::describe_host_comm(collectives::HostComm{unknown}); },
                              {"handle " + std::to_string(unknown), "is not a communicator of this process"});
  }
  if (world_size() > 1) {
    expect_error<ConfigError>(
        [&] { collectives::make_communicator(collectives::CommBackend::Local, collectives::host_comm(MPI_COMM_WORLD)); },
        {"world of one process", "host communicator has " + std::to_string(world_size())});
  }
}

// Rank r's arrays: n examples of 4 features, labels 0..2.
struct RankArrays {
  explicit RankArrays(int64_t n) {
    auto ds = testing::synthetic_dataset(n, 4, 100 * world_rank());
    x = ds->inputs().to_vector<float>();
    y = ds->targets().to_vector<int64_t>();
  }
  data::HostArrays arrays() const { return {x.data(), {int64_t(y.size()), 4}, DType::Float32, y.data()}; }
  std::vector<float> x;
  std::vector<int64_t> y;
};

TrainerOptions host_options(const std::string& root, MPI_Comm comm) {
  TrainerOptions o = testing::quiet_options(root);
  o.devices = "auto";
  o.max_epochs = 1;
  o.num_sanity_val_steps = 0;
  o.communicator = collectives::host_comm(comm);
  return o;
}

TEST(HostCommTrainer, TrainsOnTheGivenCommunicatorAndLeavesItUsable) {
  MPI_Comm pair = split_in_pairs();
  int pair_rank = 0, pair_size = 1;
  MPI_Comm_rank(pair, &pair_rank);
  MPI_Comm_size(pair, &pair_size);
  RankTempDir dir;
  RankArrays data(12);
  data::HostArrayOptions ho;
  ho.batch_size = 4;
  ho.prefetch = 0;
  data::HostArrayDataModule dm(data.arrays(), ho);
  {
    TrainerOptions o = host_options(dir.path, pair);
    o.strategy = pair_size > 1 ? "ddp" : "auto";
    Trainer trainer(o);
    EXPECT_EQ(trainer.world_size(), pair_size);
    EXPECT_EQ(trainer.global_rank(), pair_rank);
    EXPECT_EQ(trainer.plan().cluster.name, "host_comm");
    EXPECT_FALSE(trainer.plan().launch.has_value());
    testing::TinyClassifier model(0.05, 0.0);
    trainer.fit(model, dm);
    EXPECT_EQ(trainer.global_step(), 3);  // 12 examples in batches of 4: no resharding to 12 / pair_size
  }
  int finalized = 1;
  MPI_Finalized(&finalized);
  EXPECT_FALSE(finalized);
  int sum = 0, one = 1;
  EXPECT_EQ(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, pair), MPI_SUCCESS);
  EXPECT_EQ(sum, pair_size);
  MPI_Comm_free(&pair);
}

// Identical weights on every rank of `comm` (elementwise min == max).
bool identical_over(MPI_Comm comm, const std::vector<float>& w) {
  std::vector<float> lo(w.size()), hi(w.size());
  MPI_Allreduce(w.data(), lo.data(), int(w.size()), MPI_FLOAT, MPI_MIN, comm);
  MPI_Allreduce(w.data(), hi.data(), int(w.size()), MPI_FLOAT, MPI_MAX, comm);
  return lo == w && hi == w;
}

// horovod (planned by the Trainer) and ddp2 (a plan that tells each rank of the pair it is a
// node of its own, as the strategies tests do) train over the pair, not the world: ranks and
// size are the pair's, and the pair ends identical although each rank started from other weights.
TEST(HostCommTrainer, HorovodAndDdp2CommunicateOverTheHostCommunicator) {
  MPI_Comm pair = split_in_pairs();
  int pair_rank = 0, pair_size = 1;
  MPI_Comm_rank(pair, &pair_rank);
  MPI_Comm_size(pair, &pair_size);
  if (pair_size < 2) {
    MPI_Comm_free(&pair);
    GTEST_SKIP() << "this rank has no partner";
  }
  RankTempDir dir;
  RankArrays data(12);
  data::HostArrayOptions ho;
  ho.batch_size = 4;
  ho.prefetch = 0;
  data::HostArrayDataModule dm(data.arrays(), ho);
  for (const std::string strategy : {"horovod", "ddp2"}) {
    TrainerOptions o = host_options(dir.path, pair);
    o.strategy = strategy;
    std::unique_ptr<Trainer> trainer;
    if (strategy == "ddp2") {
      o.devices = 2;
      o.num_nodes = pair_size;
      HardwareOptions hardware = hardware_options(o);
      hardware.cluster = ClusterEnvironment{"host_comm", pair_size, pair_rank, 0, pair_rank};
      trainer = std::make_unique<Trainer>(o, plan_execution(hardware));
    } else {
      trainer = std::make_unique<Trainer>(o);
    }
    EXPECT_EQ(trainer->world_size(), pair_size) << strategy;
    EXPECT_EQ(trainer->global_rank(), pair_rank) << strategy;
    manual_seed(500 + uint64_t(world_rank()));  // a different start on every rank
    testing::TinyClassifier model(0.05, 0.0);
    trainer->fit(model, dm);
    EXPECT_TRUE(identical_over(pair, testing::flat_weights(model))) << strategy;
  }
  MPI_Comm_free(&pair);
}

TEST(HostCommTrainer, DevicesThatDoNotMatchTheCommunicatorAreAConfigError) {
  RankTempDir dir;
  TrainerOptions o = host_options(dir.path, MPI_COMM_WORLD);
  o.devices = world_size() + 1;
  expect_error<ConfigError>([&] { Trainer trainer(o); },
                            {"host_comm", "started " + std::to_string(world_size()) + " processes",
                             "= " + std::to_string(world_size() + 1)});
}

TEST(HostCommTrainer, PerRankDataWithDifferentBatchCountsIsAConfigError) {
  if (world_size() == 1) GTEST_SKIP() << "needs two ranks";
  RankTempDir dir;
  RankArrays data(world_rank() == 0 ? 10 : 6);  // 3 batches of 4 on rank 0, 2 elsewhere
  data::HostArrayOptions ho;
  ho.batch_size = 4;
  ho.prefetch = 0;
  data::HostArrayDataModule dm(data.arrays(), ho);
  TrainerOptions o = host_options(dir.path, MPI_COMM_WORLD);
  o.strategy = "ddp";
  Trainer trainer(o);
  testing::TinyClassifier model(0.05, 0.0);
  expect_error<ConfigError>([&] { trainer.fit(model, dm); },
                            {"per_rank_data", "rank " + std::to_string(world_rank()) + " has " +
                                                  std::to_string(world_rank() == 0 ? 3 : 2) + " training batch(es)",
                             "between 2 and 3"});
}

}  // namespace
}  // namespace tandem::trainer
