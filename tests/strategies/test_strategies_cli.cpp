// Every strategy this issue builds, through `tandem` as a user runs it, on a tiny dataset:
//   - dp splits each batch over 2 CPU devices in one process (no relaunch) and lands where one
//     device lands; ddp2 on one node is dp;
//   - horovod started by hand says what it needs; under mpirun it lands where ddp lands;
//   - ddp_spawn starts its second process itself and lands where ddp lands;
//   - ddp_sharded relaunches as ddp does, lands where ddp lands and sends what ddp sends;
//   - `tandem plan` and `tandem fit` agree on whether a configuration can train (same exit code
//     and error);
//   - a user's strategy registered by its own program (microbatch_cli) trains.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <regex>

#include "tests/support/run_command.h"
#include "tiny_idx_dataset.h"

namespace fs = std::filesystem;

namespace {

struct CliRun {
  int exit_code = -1;
  std::string output, err;
  bool has(const std::string& s) const { return output.find(s) != std::string::npos; }
};

CliRun run(const std::string& launcher, const std::string& program, const std::string& args, const fs::path& cwd) {
  const CommandResult r = run_command("cd '" + cwd.string() + "' && env OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 "
                                      "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
                                      "CUDA_VISIBLE_DEVICES= " + launcher + " " + program + " " + args);
  return {r.exit_code, r.out + r.err, r.err};
}

double table_value(const std::string& output, const std::string& name) {
  const std::regex row("\\|\\s*" + name + "\\s*\\|\\s*([-0-9.eE+]+)\\s*\\|");
  std::smatch m;
  if (!std::regex_search(output, m, row)) return std::nan("");
  return std::stod(m[1]);
}

class StrategiesCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::path(::testing::TempDir()) / ("tandem_strategies_cli_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "data");
    write_tiny_fashion_mnist((dir / "data").string(), 72, 60);
    common = "--data.root=" + (dir / "data").string() + " --data.val_size=12 --data.batch_size=6 " +
             "--trainer.accelerator=cpu --trainer.default_root_dir=" + (dir / "runs").string() +
             " --trainer.enable_progress_bar=false --model.hidden=[16] --seed_everything=3 --trainer.max_epochs=1" +
             " --trainer.enable_checkpointing=false";
  }
  void TearDown() override { fs::remove_all(dir); }
  CliRun fit(const std::string& flags, const std::string& launcher = "") {
    return run(launcher, TANDEM_CLI_PATH, "fit " + common + " " + flags, dir);
  }
  double val_loss(const CliRun& r) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const double v = table_value(r.output, "val_loss");
    EXPECT_FALSE(std::isnan(v)) << r.output;
    return v;
  }
  fs::path dir;
  std::string common;
};

TEST_F(StrategiesCli, DpSplitsTheBatchOverCpuDevicesInOneProcess) {
  const CliRun dp = fit("--trainer.strategy=dp --trainer.devices=2");
  EXPECT_FALSE(dp.has("relaunching")) << dp.output;
  EXPECT_TRUE(dp.has("dp: 1 process x batch 6 = effective batch 6; each process splits its batch over 2 devices")) << dp.output;
  const double one = val_loss(fit("--trainer.devices=1"));
  EXPECT_NEAR(val_loss(dp), one, 1e-5 * one);
  // ddp2 on one node is dp over the node's devices.
  const CliRun ddp2 = fit("--trainer.strategy=ddp2 --trainer.devices=2");
  EXPECT_TRUE(ddp2.has("ddp2: 1 process x batch 6 = effective batch 6; each process splits its batch over 2 devices"))
      << ddp2.output;
  EXPECT_NEAR(val_loss(ddp2), one, 1e-5 * one);
}

TEST_F(StrategiesCli, HorovodSaysWhatItNeedsAndUnderMpirunLandsWhereDdpLands) {
  const CliRun alone = fit("--trainer.strategy=horovod --trainer.devices=2");
  EXPECT_EQ(alone.exit_code, 2) << alone.output;
  EXPECT_TRUE(alone.has("started by mpirun or horovodrun")) << alone.output;
  EXPECT_TRUE(alone.has("mpirun -np 2")) << alone.output;
  EXPECT_FALSE(alone.has("relaunching")) << alone.output;
  const CliRun horovod = fit("--trainer.strategy=horovod --trainer.devices=2", std::string(TANDEM_MPIEXEC_PATH) + " -np 2");
  EXPECT_TRUE(horovod.has("horovod: 2 ranks over mpi")) << horovod.output;
  const CliRun ddp = fit("--trainer.strategy=ddp --trainer.devices=2");
  EXPECT_TRUE(ddp.has("relaunching as")) << ddp.output;
  EXPECT_NEAR(val_loss(horovod), val_loss(ddp), 1e-6);
}

TEST_F(StrategiesCli, DdpSpawnStartsTheOtherRankItselfAndLandsWhereDdpLands) {
  const CliRun spawn = fit("--trainer.strategy=ddp_spawn --trainer.devices=2");
  EXPECT_TRUE(spawn.has("spawning 1 process(es)")) << spawn.output;
  EXPECT_FALSE(spawn.has("relaunching")) << spawn.output;
  EXPECT_TRUE(spawn.has("ddp_spawn: 2 ranks over mpi")) << spawn.output;
  EXPECT_NEAR(val_loss(spawn), val_loss(fit("--trainer.strategy=ddp --trainer.devices=2")), 1e-6);
}

TEST_F(StrategiesCli, DdpShardedRelaunchesLikeDdpLandsWhereDdpLandsAndSaysWhatItSent) {
  const CliRun sharded = fit("--trainer.strategy=ddp_sharded --trainer.devices=2");
  EXPECT_TRUE(sharded.has("relaunching as")) << sharded.output;
  EXPECT_TRUE(sharded.has("ddp_sharded: 2 processes x batch 6 = effective batch 12")) << sharded.output;
  // MLP 784-16-10: 12730 float32; at 2 ranks a reduce_scatter and an allgather send 2 x 6365 x 4
  // bytes per step; the finite-loss check (one int32 allreduce) is rank 0's chunk, so rank 0 sends
  // nothing for it.
  EXPECT_TRUE(sharded.has("this rank holds the optimizer state of 6365 of 12730 elements")) << sharded.output;
  EXPECT_TRUE(sharded.has("sent 50920 bytes per step (this rank")) << sharded.output;
  const CliRun ddp = fit("--trainer.strategy=ddp --trainer.devices=2");
  EXPECT_TRUE(ddp.has("sent 50920 bytes per step (this rank")) << ddp.output;
  EXPECT_NEAR(val_loss(sharded), val_loss(ddp), 1e-5);
}

// Two "nodes" on this one machine: each rank is told it is alone on its node (Open MPI's local
// rank and size), as on two machines with one process each.
TEST_F(StrategiesCli, Ddp2AtTwoNodesTimesTwoDevicesLandsWhereDdpAtTwoRanksLands) {
  const std::string as_nodes = std::string(TANDEM_MPIEXEC_PATH) +
                               " -np 2 env OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_COMM_WORLD_LOCAL_SIZE=1";
  const CliRun ddp2 = fit("--trainer.strategy=ddp2 --trainer.devices=2 --trainer.num_nodes=2", as_nodes);
  EXPECT_TRUE(ddp2.has("ddp2: 2 processes x batch 6 = effective batch 12; each process splits its batch over 2 devices"))
      << ddp2.output;
  const double ddp = val_loss(fit("--trainer.strategy=ddp --trainer.devices=2"));
  EXPECT_NEAR(val_loss(ddp2), ddp, 1e-5 * ddp);
}

TEST_F(StrategiesCli, PlanAndFitAgreeOnWhatCanTrain) {
  for (const std::string flags : {"--trainer.strategy=dp --trainer.devices=3", "--trainer.strategy=ddp2 --trainer.devices=2",
                                  "--trainer.strategy=dp --trainer.num_nodes=2", "--trainer.strategy=ddp_spawn --trainer.num_nodes=2",
                                  "--trainer.strategy=bagua", "--trainer.strategy=dp --trainer.precision=64-true"}) {
    const CliRun plan = run("", TANDEM_CLI_PATH, "plan " + common + " " + flags, dir);
    const CliRun trained = fit(flags + " --trainer.fast_dev_run=true");
    EXPECT_EQ(plan.exit_code, trained.exit_code) << flags << "\nplan: " << plan.output << "\nfit: " << trained.output;
    // The same error, after the subcommand's name.
    if (plan.exit_code == 2) EXPECT_EQ(plan.err.substr(plan.err.find("error:")), trained.err.substr(trained.err.find("error:")));
  }
}

TEST_F(StrategiesCli, AUsersStrategyTrainsThroughItsOwnProgram) {
  const CliRun micro = run("", MICROBATCH_CLI_PATH, "fit " + common + " --trainer.strategy=microbatch", dir);
  EXPECT_NEAR(val_loss(micro), val_loss(fit("--trainer.devices=1")), 1e-5);
}

}  // namespace
