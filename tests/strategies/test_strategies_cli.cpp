// Every strategy this issue builds, through `tandem` as a user runs it, on a tiny dataset:
//   - dp splits each batch over 2 CPU devices in one process (no relaunch) and lands where one
//     device lands; ddp2 on one node is dp;
//   - horovod started by hand says what it needs; under mpirun it lands where ddp lands;
//   - ddp_spawn starts its second process itself and lands where ddp lands;
//   - ddp_sharded relaunches as ddp does, lands where ddp lands and sends what ddp sends;
//   - `tandem plan` and `tandem fit` agree on whether a configuration can train (same exit code
//     and error);
//   - a user's strategy registered by its own program (microbatch_cli) trains;
//   - bagua: gradient_allreduce lands where ddp lands, bytegrad near it, decentralized and the
//     YAML mapping form train; invalid algorithms and options are exit 2 saying what is allowed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "tests/support/cli_run.h"
#include "tiny_idx_dataset.h"

namespace fs = std::filesystem;

namespace {

CliRun run(const std::string& launcher, const std::string& program, const std::string& args, const fs::path& cwd) {
  return run_cli(cwd.string(), "CUDA_VISIBLE_DEVICES=", launcher + " " + program + " " + args);
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
                                  "--trainer.strategy=bagua --trainer.strategy.algorithm=nope",
                                  "--trainer.strategy=dp --trainer.precision=64-true"}) {
    const CliRun plan = run("", TANDEM_CLI_PATH, "plan " + common + " " + flags, dir);
    const CliRun trained = fit(flags + " --trainer.fast_dev_run=true");
    EXPECT_EQ(plan.exit_code, trained.exit_code) << flags << "\nplan: " << plan.output << "\nfit: " << trained.output;
    // The same error, after the subcommand's name.
    if (plan.exit_code == 2) EXPECT_EQ(plan.err.substr(plan.err.find("error:")), trained.err.substr(trained.err.find("error:")));
  }
}

TEST_F(StrategiesCli, BaguaRefusesWhatCannotRunWithExitTwoSayingWhatIsAllowed) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases{
      {"--trainer.strategy=bagua --trainer.strategy.algorithm=nope --trainer.devices=2",
       {"unknown algorithm 'nope'", "async, bytegrad, decentralized, gradient_allreduce, low_precision_decentralized, qadam"}},
      {"--trainer.strategy=bagua --trainer.strategy.algorithm=bytegrad --trainer.devices=1",
       {"algorithm=bytegrad", "1 process", "--trainer.devices=N"}},
      {"--trainer.strategy=bagua --trainer.strategy.algorithm=low_precision_decentralized --trainer.devices=1",
       {"low_precision_decentralized", "1 process"}},
      {"--trainer.strategy=ddp --trainer.strategy.algorithm=bytegrad --trainer.devices=2",
       {"strategy 'ddp' has no option 'algorithm'", "takes no options"}},
      {"--trainer.strategy=bagua --trainer.strategy.algorithm=decentralized --trainer.strategy.hierarchical=true",
       {"algorithm=decentralized does not take hierarchical", "communication_interval, peer_selection_mode"}},
      {"--trainer.strategy=bagua --trainer.strategy.algorithm=decentralized --trainer.strategy.communication_interval=0",
       {"communication_interval=0", "integer >= 1"}},
      {"--trainer.strategy=bagua --trainer.strategy.algorithm=async --trainer.strategy.sync_interval_ms=0 --trainer.devices=2",
       {"sync_interval_ms=0 is not valid", "integer >= 1"}},
      {"--trainer.strategy=bagua --trainer.strategy.hierarchical=true --trainer.strategy.ranks_per_node=3 --trainer.devices=2",
       {"ranks_per_node=3", "divisor"}},
  };
  for (const auto& [flags, words] : cases) {
    const CliRun r = fit(flags);
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.output;
    EXPECT_FALSE(r.has("relaunching")) << flags << "\n" << r.output;
    for (const auto& w : words) EXPECT_TRUE(r.has(w)) << flags << ": missing '" << w << "' in\n" << r.output;
  }
  // QAdam and the qadam algorithm need each other; plan and fit refuse a mismatch before any
  // process is launched or any data read.
  const std::vector<std::pair<std::string, std::string>> qadam_cases{
      {"--optimizer=QAdam --trainer.devices=1",
       "--optimizer=QAdam runs only under --trainer.strategy=bagua --trainer.strategy.algorithm=qadam"},
      {"--optimizer=QAdam --trainer.strategy=ddp --trainer.devices=2", "not --trainer.strategy=ddp; add those flags"},
      {"--optimizer=QAdam --trainer.strategy=bagua --trainer.devices=2", "not --trainer.strategy=bagua; add those flags"},
      {"--optimizer=QAdam --trainer.strategy=bagua --trainer.strategy.algorithm=bytegrad --trainer.devices=2",
       "not --trainer.strategy=bagua --trainer.strategy.algorithm=bytegrad"},
      {"--trainer.strategy=bagua --trainer.strategy.algorithm=qadam --trainer.devices=2",
       "algorithm=qadam communicates QAdam's compressed momentum, but the optimizer is Adam; use --optimizer=QAdam"},
      {"--trainer.strategy=bagua --trainer.strategy.algorithm=qadam --optimizer=SGD --trainer.devices=2",
       "but the optimizer is SGD"},
  };
  for (const auto& [flags, words] : qadam_cases) {
    for (const std::string command : {"plan", "fit"}) {
      const CliRun r = run("", TANDEM_CLI_PATH, command + " " + common + " " + flags, dir);
      EXPECT_EQ(r.exit_code, 2) << command << " " << flags << "\n" << r.output;
      EXPECT_TRUE(r.has(words)) << command << " " << flags << ": missing '" << words << "' in\n" << r.output;
      EXPECT_FALSE(r.has("relaunching")) << command << " " << flags << "\n" << r.output;
    }
  }
  const CliRun planned = run("", TANDEM_CLI_PATH, "plan " + common + " --trainer.strategy=bagua "
                             "--trainer.strategy.algorithm=qadam --optimizer=QAdam --trainer.devices=2", dir);
  EXPECT_EQ(planned.exit_code, 0) << planned.output;
  EXPECT_TRUE(planned.has("\"strategy\":\"bagua\"")) << planned.output;
}


TEST_F(StrategiesCli, BaguaAlgorithmsTrainThroughTheCli) {
  const double ddp = val_loss(fit("--trainer.strategy=ddp --trainer.devices=2"));
  const CliRun allreduce = fit("--trainer.strategy=bagua --trainer.devices=2");
  EXPECT_TRUE(allreduce.has("relaunching as")) << allreduce.output;
  EXPECT_TRUE(allreduce.has("bagua: 2 ranks over mpi")) << allreduce.output;
  EXPECT_TRUE(allreduce.has("gradient_allreduce: float gradients averaged in buckets")) << allreduce.output;
  EXPECT_NEAR(val_loss(allreduce), ddp, 1e-6);
  const CliRun hierarchical = fit("--trainer.strategy=bagua --trainer.strategy.hierarchical=true "
                                  "--trainer.strategy.ranks_per_node=1 --trainer.devices=2");
  EXPECT_NEAR(val_loss(hierarchical), ddp, 1e-5 * ddp);
  const CliRun bytegrad = fit("--trainer.strategy=bagua --trainer.strategy.algorithm=bytegrad --trainer.devices=2");
  EXPECT_TRUE(bytegrad.has("bytegrad: gradients sent as 8-bit codes")) << bytegrad.output;
  EXPECT_NEAR(val_loss(bytegrad), ddp, 0.05 * ddp);
  // The YAML mapping form, with a flag naming one more option.
  const fs::path yaml = dir / "bagua.yaml";
  std::ofstream(yaml) << "trainer:\n  strategy: {name: bagua, algorithm: decentralized}\n";
  const CliRun decentralized = fit("--config " + yaml.string() + " --trainer.strategy.peer_selection_mode=shift_one "
                                   "--trainer.devices=2");
  EXPECT_TRUE(decentralized.has("decentralized: float weights averaged with one peer (shift_one)")) << decentralized.output;
  EXPECT_TRUE(std::isfinite(val_loss(decentralized)));
  const CliRun qadam = fit("--trainer.strategy=bagua --trainer.strategy.algorithm=qadam --optimizer=QAdam "
                           "--optimizer.warmup_steps=2 --trainer.devices=2");
  EXPECT_TRUE(qadam.has("qadam: gradients averaged during QAdam's warm-up")) << qadam.output;
  EXPECT_TRUE(std::isfinite(val_loss(qadam)));
  const CliRun async = fit("--trainer.strategy=bagua --trainer.strategy.algorithm=async "
                           "--trainer.strategy.sync_interval_ms=1 --trainer.strategy.warmup_steps=1 --trainer.devices=2");
  EXPECT_TRUE(async.has("async: weights averaged without blocking training")) << async.output;
  EXPECT_TRUE(async.has("by rounds on a background thread")) << async.output;  // Tandem's MPI: THREAD_MULTIPLE
  EXPECT_TRUE(std::isfinite(val_loss(async)));
}

TEST_F(StrategiesCli, AUsersStrategyTrainsThroughItsOwnProgram) {
  const CliRun micro = run("", MICROBATCH_CLI_PATH, "fit " + common + " --trainer.strategy=microbatch", dir);
  EXPECT_NEAR(val_loss(micro), val_loss(fit("--trainer.devices=1")), 1e-5);
}

}  // namespace
