// Restarts and elastic size through `tandem fit`, with faults injected by faulty_tandem (the
// stock command line plus a callback that kills a rank or hangs it inside backward):
//   - a rank killed mid-epoch: the agent restarts the job from the newest step checkpoint and
//     it ends with exactly the weights of an uninterrupted run at the same size;
//   - the same at one process fewer: keeping the global batch (accumulation doubles) the
//     weights match the uninterrupted run within float rounding; keeping the per-rank batch the
//     validation loss is within tolerance;
//   - restarts used up: a clear error and exit 1; a rank stuck inside backward: the step
//     watchdog names it within step_timeout (in one process, where no collective could), and a
//     restart finishes the job;
//   - restart options that cannot work are configuration errors (exit 2), and an error in the
//     job that a restart would meet again is not restarted.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <regex>

#include "engine/trainer/checkpoint.h"
#include "tests/support/cli_run.h"
#include "tiny_idx_dataset.h"

#ifndef FAULTY_TANDEM_PATH
#error "FAULTY_TANDEM_PATH must name the faulty_tandem test program"
#endif
#ifndef TANDEM_MPIEXEC_PATH
#error "TANDEM_MPIEXEC_PATH must name mpirun"
#endif

namespace fs = std::filesystem;

namespace {

CliRun run(const std::string& fault, const std::string& args, const fs::path& cwd, const std::string& launcher = "") {
  return run_cli(cwd.string(), "TANDEM_TEST_FAULT=" + fault, launcher + " " + FAULTY_TANDEM_PATH + " " + args);
}

// The last.safetensors of the newest version under root.
tandem::StateDict final_weights(const fs::path& root) {
  int newest = -1;
  for (const auto& e : fs::directory_iterator(root / "lightning_logs")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("version_", 0) == 0 && fs::exists(e.path() / "checkpoints/last.safetensors")) {
      newest = std::max(newest, std::stoi(name.substr(8)));
    }
  }
  EXPECT_GE(newest, 0) << "no last.safetensors under " << root;
  if (newest < 0) return {};
  return tandem::trainer::load_checkpoint((root / "lightning_logs" / ("version_" + std::to_string(newest)) /
                                           "checkpoints/last.safetensors").string()).model;
}

// The largest |a - b| over every weight; infinity when the keys or shapes differ.
double max_difference(const tandem::StateDict& a, const tandem::StateDict& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double worst = 0;
  for (const auto& [key, ta] : a) {
    if (!b.contains(key) || b.at(key).numel() != ta.numel()) return INFINITY;
    const std::vector<double> x = ta.to(tandem::DType::Float64).template to_vector<double>();
    const std::vector<double> y = b.at(key).to(tandem::DType::Float64).template to_vector<double>();
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  }
  return worst;
}

class ElasticCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::path(::testing::TempDir()) / ("tandem_elastic_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "data");
    write_tiny_fashion_mnist((dir / "data").string(), 72, 12);
    // 60 training examples: at 2 processes x batch 6, 5 steps per epoch; a checkpoint every 2.
    common = "fit --data.root=" + (dir / "data").string() + " --data.val_size=12 --data.batch_size=6 " +
             "--trainer.accelerator=cpu --trainer.enable_progress_bar=false --trainer.enable_model_summary=false " +
             "--model.hidden=[16] --seed_everything=3 --trainer.max_epochs=2 --trainer.num_sanity_val_steps=0 " +
             "--trainer.callbacks='[{name: ModelCheckpoint, every_n_train_steps: 2, save_last: true}]'";
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string root(const std::string& name) const { return " --trainer.default_root_dir=" + (dir / name).string(); }
  // The uninterrupted run at 2 processes.
  CliRun reference() {
    const CliRun r = run("", common + root("reference") + " --trainer.devices=2", dir);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r;
  }
  fs::path dir;
  std::string common;
};

TEST_F(ElasticCli, AKilledRankRestartsFromTheNewestCheckpointAndEndsWithTheSameWeights) {
  reference();
  // Rank 1 dies as step 5 starts (epoch 0 has steps 0-4, so step 5 is epoch 1's first; the
  // newest checkpoint is step 4, written mid-epoch at its last batch).
  const CliRun r = run("kill:1:5", common + root("killed") + " --trainer.devices=2 --trainer.max_restarts=2", dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(r.has("injected fault: killed at step 5")) << r.output;
  EXPECT_TRUE(r.has("killed by signal 9")) << r.output;
  std::smatch from;
  ASSERT_TRUE(std::regex_search(r.output, from, std::regex("restart 1 of 2 from (\\S+) at 2 process\\(es\\)"))) << r.output;
  // The newest complete checkpoint: step 4 (epoch=0-step=4 or last.safetensors, which hold the same state).
  EXPECT_EQ(fs::path(from[1].str()).parent_path(), dir / "killed/lightning_logs/version_0/checkpoints");
  EXPECT_EQ(tandem::trainer::load_checkpoint(from[1].str()).trainer_state["global_step"], 4);
  EXPECT_EQ(r.count("restarting the job"), 1) << r.output;
  EXPECT_EQ(max_difference(final_weights(dir / "reference"), final_weights(dir / "killed")), 0.0);
}

TEST_F(ElasticCli, AtOneProcessFewerTheGlobalBatchIsKeptByAccumulation) {
  reference();
  const CliRun r = run("kill:1:3", common + root("shrunk") + " --trainer.devices=2 --trainer.max_restarts=1 "
                       "--trainer.min_processes=1 --trainer.elastic_batch=global", dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(r.has("at 1 process(es), global batch kept: batch 6 x 1 process(es) x accumulate 2 = global batch 12"))
      << r.output;
  EXPECT_TRUE(r.has("resuming a checkpoint written at world size 2 on world size 1")) << r.output;
  // The same examples per optimizer step, summed in another order: equal up to float rounding.
  EXPECT_LT(max_difference(final_weights(dir / "reference"), final_weights(dir / "shrunk")), 1e-5);
}

TEST_F(ElasticCli, AtOneProcessFewerThePerRankBatchIsKeptAndTheLossStaysClose) {
  const CliRun full = reference();
  const CliRun r = run("kill:1:3", common + root("per_rank") + " --trainer.devices=2 --trainer.max_restarts=1 "
                       "--trainer.min_processes=1", dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(r.has("at 1 process(es), per-rank batch kept: batch 6 x 1 process(es) x accumulate 1 = global batch 6"))
      << r.output;
  const double reference_loss = table_value(full.output, "val_loss"), loss = table_value(r.output, "val_loss");
  ASSERT_FALSE(std::isnan(reference_loss)) << full.output;
  ASSERT_FALSE(std::isnan(loss)) << r.output;
  // Smaller steps after the restart, more of them: another trajectory, but a model no worse than
  // the uninterrupted one by more than 10%, and far from chance (ln 10 = 2.30).
  EXPECT_LT(loss, 1.1 * reference_loss);
  EXPECT_LT(loss, 2.0);
  // No restart below min_processes: one process fewer than 1 is an error.
  const CliRun none_left = run("kill:0:3:every", common + root("none_left") + " --trainer.devices=2 "
                               "--trainer.max_restarts=3 --trainer.min_processes=1", dir);
  EXPECT_EQ(none_left.exit_code, 1) << none_left.output;
  EXPECT_TRUE(none_left.has("0 process(es) remain after this failure, fewer than min_processes=1")) << none_left.output;
}

TEST_F(ElasticCli, RestartsUsedUpEndTheRunWithAClearError) {
  const CliRun r = run("kill:1:3:every", common + root("used_up") + " --trainer.devices=2 --trainer.max_restarts=1", dir);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.count("restarting the job"), 1) << r.output;
  EXPECT_TRUE(r.has("the job failed 2 time(s) and max_restarts=1 restarts are used up; last failure: a process of the "
                    "job was killed by signal 9")) << r.output;
}

TEST_F(ElasticCli, AHangInsideBackwardIsCaughtByTheStepWatchdog) {
  // One process: no collective is waiting, only the watchdog can notice.
  const CliRun one = run("hang_backward:0:3", common + root("hang1") + " --trainer.devices=1 --trainer.step_timeout=2", dir);
  EXPECT_EQ(one.exit_code, 1) << one.output;
  EXPECT_TRUE(one.has("injected fault: hanging inside backward at step 3")) << one.output;
  EXPECT_TRUE(one.has("rank 0 of 1 made no progress for 2.")) << one.output;
  EXPECT_TRUE(one.has("stuck in backward at epoch 0, batch 3 (global step 3)")) << one.output;
  EXPECT_LT(one.seconds, 15.0) << one.output;  // 2 s of watchdog plus start-up and 3 steps

  // Two processes, under the agent: rank 1's watchdog fires long before the 60 s collective
  // timeout, and the restart finishes the run.
  const CliRun two = run("hang_backward:1:3", common + root("hang2") + " --trainer.devices=2 --trainer.step_timeout=2 "
                         "--trainer.collective_timeout=60 --trainer.max_restarts=1", dir);
  EXPECT_EQ(two.exit_code, 0) << two.output;
  EXPECT_TRUE(two.has("StepTimeout on rank 1: rank 1 of 2 made no progress for 2.")) << two.output;
  EXPECT_TRUE(two.has("stuck in backward at epoch 0, batch 3")) << two.output;
  EXPECT_TRUE(two.has("restart 1 of 1 from")) << two.output;
  EXPECT_LT(two.seconds, 45.0) << two.output;
}

TEST_F(ElasticCli, RestartOptionsThatCannotWorkAreConfigurationErrors) {
  const std::string mpirun2 = std::string(TANDEM_MPIEXEC_PATH) + " -np 2";
  const CliRun under_mpirun = run("", common + root("e") + " --trainer.devices=2 --trainer.max_restarts=1", dir, mpirun2);
  EXPECT_EQ(under_mpirun.exit_code, 2) << under_mpirun.output;
  EXPECT_TRUE(under_mpirun.has("is carried out by the `tandem fit` process that launches the job")) << under_mpirun.output;
  const CliRun no_restarts = run("", common + root("e") + " --trainer.devices=2 --trainer.min_processes=1", dir);
  EXPECT_EQ(no_restarts.exit_code, 2) << no_restarts.output;
  EXPECT_TRUE(no_restarts.has("set --trainer.max_restarts=K as well")) << no_restarts.output;
  const CliRun too_many = run("", common + root("e") + " --trainer.devices=2 --trainer.max_restarts=1 --trainer.min_processes=3", dir);
  EXPECT_EQ(too_many.exit_code, 2) << too_many.output;
  EXPECT_TRUE(too_many.has("expected 1 to 2")) << too_many.output;
  const CliRun no_divisor = run("", common + root("e") + " --trainer.devices=4 --trainer.max_restarts=1 "
                                "--trainer.min_processes=3 --trainer.elastic_batch=global", dir);
  EXPECT_EQ(no_divisor.exit_code, 2) << no_divisor.output;
  EXPECT_TRUE(no_divisor.has("no smaller size from min_processes=3 divides that")) << no_divisor.output;
  // An error in the job that a restart would meet again is not restarted: the job's exit code.
  const CliRun missing = run("", common + root("missing") + " --trainer.devices=2 --trainer.max_restarts=2 "
                             "--ckpt_path=" + (dir / "no_such.safetensors").string(), dir);
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_TRUE(missing.has("failed with ConfigError on rank 0, which a restart would not fix")) << missing.output;
  EXPECT_EQ(missing.count("restarting the job"), 0) << missing.output;
  const CliRun bad_batch = run("", common + root("e") + " --trainer.elastic_batch=both", dir);
  EXPECT_EQ(bad_batch.exit_code, 2) << bad_batch.output;
  EXPECT_FALSE(fs::exists(dir / "e")) << "a configuration error must stop before anything is written";
}

}  // namespace
