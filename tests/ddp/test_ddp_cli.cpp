// `tandem` under DDP as a user runs it, on a tiny generated dataset:
//   - `tandem fit --trainer.accelerator=cpu --trainer.devices=2` relaunches itself through
//     mpirun, trains, and leaves ONE version directory (rank 0's) with metrics and a checkpoint;
//   - that checkpoint resumes at world size 3 and evaluates at world size 1, 2 and 3 with the
//     same test metrics (a test set that divides by every world size: no padding duplicates);
//   - `tandem predict` at 3 ranks writes the same predictions file as one process; `tandem test`
//     at 3 ranks on a test set that does not divide warns that padding counts examples twice;
//   - fail-fast: rank 0 alone failing (default_root_dir is a file) ends the job in seconds with
//     its error once, under mpirun, the relaunch, ddp_spawn and the restart agent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "tests/support/cli_run.h"
#include "tiny_idx_dataset.h"

#ifndef TANDEM_CLI_PATH
#error "TANDEM_CLI_PATH must name the built tandem binary"
#endif
#ifndef TANDEM_MPIEXEC_PATH
#error "TANDEM_MPIEXEC_PATH must name mpirun"
#endif

namespace fs = std::filesystem;

namespace {

// stdout and stderr together (ranks interleave them), exit code. `launcher` is "" (tandem
// relaunches itself when it must) or "mpirun -np N".
CliRun run(const std::string& launcher, const std::string& args, const fs::path& cwd) {
  return run_cli(cwd.string(), "", launcher + " " + TANDEM_CLI_PATH + " " + args);
}

std::string mpirun(int np) { return std::string(TANDEM_MPIEXEC_PATH) + " -np " + std::to_string(np); }

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class DDPCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::path(::testing::TempDir()) / ("tandem_ddp_cli_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "data");
    write_tiny_fashion_mnist((dir / "data").string(), 72, 60);
    common = "--data.root=" + (dir / "data").string() + " --data.val_size=12 --data.batch_size=6 " +
             "--trainer.accelerator=cpu --trainer.default_root_dir=" + (dir / "runs").string() +
             " --trainer.enable_progress_bar=false --model.hidden=[16] --seed_everything=3";
  }
  void TearDown() override { fs::remove_all(dir); }
  fs::path dir;
  std::string common;
};

TEST_F(DDPCli, FitRelaunchesThroughMpirunAndOnlyRankZeroWrites) {
  const CliRun fit = run("", "fit " + common + " --trainer.devices=2 --trainer.max_epochs=1", dir);
  ASSERT_EQ(fit.exit_code, 0) << fit.output;
  EXPECT_TRUE(fit.has("relaunching as:")) << fit.output;
  EXPECT_TRUE(fit.has("-np 2")) << fit.output;
  EXPECT_TRUE(fit.has("ddp: 2 ranks over mpi")) << fit.output;
  EXPECT_TRUE(fit.has("2 processes x batch 6 = effective batch 12; each rank trains on 30 of the 60 examples")) << fit.output;
  // Printed once (rank 0), not once per rank.
  const std::string logs_line = "logs and checkpoints:";
  EXPECT_EQ(fit.output.find(logs_line), fit.output.rfind(logs_line)) << fit.output;
  EXPECT_TRUE(fs::exists(dir / "runs/lightning_logs/version_0/metrics.csv"));
  EXPECT_TRUE(fs::exists(dir / "runs/lightning_logs/version_0/config.yaml"));
  EXPECT_FALSE(fs::exists(dir / "runs/lightning_logs/version_1")) << "another rank claimed a version directory";
  // 60 training examples, 2 ranks, batch 6: 5 optimizer steps in the epoch.
  EXPECT_TRUE(fs::exists(dir / "runs/lightning_logs/version_0/checkpoints/epoch=0-step=5.safetensors")) << fit.output;
}

TEST_F(DDPCli, ARelaunchedChildWithoutLauncherVariablesStopsInsteadOfLooping) {
  // What a child of the relaunch sees if mpirun is not Open MPI's (no OMPI_* variables): an
  // error with the command to run, never a second relaunch.
  const CliRun child = run("env TANDEM_LAUNCHED_BY_TANDEM=1", "fit " + common + " --trainer.devices=2", dir);
  EXPECT_EQ(child.exit_code, 2) << child.output;
  EXPECT_TRUE(child.has("no launcher variables")) << child.output;
  EXPECT_TRUE(child.has("mpirun -np 2")) << child.output;
  EXPECT_FALSE(child.has("relaunching as")) << child.output;
}

TEST_F(DDPCli, CheckpointsResumeAndEvaluateAtOtherWorldSizes) {
  const CliRun fit = run(mpirun(2), "fit " + common + " --trainer.devices=2 --trainer.max_epochs=1", dir);
  ASSERT_EQ(fit.exit_code, 0) << fit.output;
  const fs::path ckpt = dir / "runs/lightning_logs/version_0/checkpoints/epoch=0-step=5.safetensors";
  ASSERT_TRUE(fs::exists(ckpt)) << fit.output;

  const CliRun resumed = run(mpirun(3), "fit " + common + " --trainer.devices=3 --trainer.max_epochs=2 --ckpt_path=" + ckpt.string(), dir);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(resumed.has("resuming a checkpoint written at world size 2 on world size 3")) << resumed.output;
  // 60 examples over 3 ranks at batch 6: 4 more steps after the 5 of epoch 0.
  EXPECT_TRUE(fs::exists(dir / "runs/lightning_logs/version_1/checkpoints/epoch=1-step=9.safetensors")) << resumed.output;

  double acc[3], loss[3];
  for (int w = 1; w <= 3; ++w) {
    const CliRun test = run(w == 1 ? "" : mpirun(w), "test " + common + " --trainer.devices=" + std::to_string(w) +
                                                      " --ckpt_path=" + ckpt.string(), dir);
    ASSERT_EQ(test.exit_code, 0) << test.output;
    EXPECT_FALSE(test.has("evaluated twice")) << test.output;  // nothing padded, nothing to warn about
    acc[w - 1] = table_value(test.output, "test_acc");
    loss[w - 1] = table_value(test.output, "test_loss");
    ASSERT_FALSE(std::isnan(acc[w - 1])) << test.output;
  }
  // 60 test examples divide by 1, 2 and 3: the synced means are over the same examples.
  EXPECT_DOUBLE_EQ(acc[1], acc[0]);
  EXPECT_DOUBLE_EQ(acc[2], acc[0]);
  EXPECT_NEAR(loss[1], loss[0], 1e-5);
  EXPECT_NEAR(loss[2], loss[0], 1e-5);
}

TEST_F(DDPCli, PredictAtThreeRanksWritesTheSameFileAsOneProcess) {
  const CliRun fit = run("", "fit " + common + " --trainer.devices=1 --trainer.max_epochs=1", dir);
  ASSERT_EQ(fit.exit_code, 0) << fit.output;
  const std::string ckpt = (dir / "runs/lightning_logs/version_0/checkpoints/epoch=0-step=10.safetensors").string();
  ASSERT_TRUE(fs::exists(ckpt)) << fit.output;
  // A test set of 58 does not divide by 3: the shards are 20, 19, 19 and none may repeat.
  fs::create_directories(dir / "data58");
  write_tiny_fashion_mnist((dir / "data58").string(), 72, 58);
  const std::string data58 = " --data.root=" + (dir / "data58").string();
  const CliRun one = run("", "predict " + common + data58 + " --trainer.devices=1 --ckpt_path=" + ckpt +
                              " --predictions=" + (dir / "one.csv").string(), dir);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const CliRun three = run(mpirun(3), "predict " + common + data58 + " --trainer.devices=3 --ckpt_path=" + ckpt +
                                       " --predictions=" + (dir / "three.csv").string(), dir);
  ASSERT_EQ(three.exit_code, 0) << three.output;
  const std::string a = read_file(dir / "one.csv"), b = read_file(dir / "three.csv");
  EXPECT_EQ(std::count(a.begin(), a.end(), '\n'), 59);  // header + 58
  EXPECT_EQ(a, b);

  // test, unlike predict, pads the shards to the same length (the collective reductions need
  // it), so 2 of the 58 examples count twice; as Lightning does, it says so.
  const CliRun test = run(mpirun(3), "test " + common + data58 + " --trainer.devices=3 --ckpt_path=" + ckpt, dir);
  ASSERT_EQ(test.exit_code, 0) << test.output;
  EXPECT_TRUE(test.has("Tandem: warning: test on 3 processes pads the 58 examples to 60 so that every process gets "
                       "the same number of batches: 2 of them are evaluated twice")) << test.output;
  EXPECT_TRUE(test.has("--trainer.devices=1 --trainer.num_nodes=1")) << test.output;
}

}  // namespace

// Fail-fast through every way `tandem fit` starts its ranks: default_root_dir is a regular file,
// so rank 0 alone fails setting up the logs while the others wait in a collective with a 600 s
// timeout. The job must end within seconds, exit 1, with rank 0's error printed once; under
// the restart agent (max_restarts) the failure is a disk error that a restart would not fix.
struct FailFastLaunch {
  const char* name;
  bool under_mpirun;  // started by mpirun -np 3; otherwise tandem starts its ranks itself
  const char* flags;
};

class DDPCliFailFast : public DDPCli, public ::testing::WithParamInterface<FailFastLaunch> {};

TEST_P(DDPCliFailFast, ARankThatFailsAloneEndsTheJobAtOnceWithItsErrorOnce) {
  const FailFastLaunch& launch = GetParam();
  const fs::path root_file = dir / "root_is_a_file";
  std::ofstream(root_file) << "not a directory\n";
  const std::string args = "fit " + common + " --trainer.default_root_dir=" + root_file.string() +
                           " --trainer.collective_timeout=600 --trainer.max_epochs=1 " + launch.flags;
  const CliRun fit = run(launch.under_mpirun ? mpirun(3) : "", args, dir);
  EXPECT_EQ(fit.exit_code, 1) << fit.output;
  EXPECT_LT(fit.seconds, 40.0) << fit.output;  // collective_timeout is 600 s; plain builds take 2 to 7 s
  EXPECT_EQ(fit.count("cannot create the log directory"), 1) << fit.output;
  EXPECT_TRUE(fit.has(root_file.string() + "/lightning_logs/version_0: Not a directory")) << fit.output;
  if (std::string(launch.name) == "restart_agent") {
    EXPECT_TRUE(fit.has("failed with DataError on rank 0, which a restart would not fix; not restarting")) << fit.output;
    EXPECT_FALSE(fit.has("restarting the job")) << fit.output;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Launches, DDPCliFailFast,
    ::testing::Values(FailFastLaunch{"mpirun", true, "--trainer.devices=3"},
                      FailFastLaunch{"relaunch", false, "--trainer.devices=2"},
                      FailFastLaunch{"ddp_spawn", false, "--trainer.devices=3 --trainer.strategy=ddp_spawn"},
                      FailFastLaunch{"restart_agent", false, "--trainer.devices=2 --trainer.max_restarts=2"}),
    [](const ::testing::TestParamInfo<FailFastLaunch>& info) { return std::string(info.param.name); });
