// The GPT resumed mid-epoch at another world size, through `tandem fit` (ddp relaunched through
// mpirun). "Exact" there means the same global batches in the same order: text windows are
// numbered over the whole epoch and DistributedSampler deals global batch k (examples
// k*W*B .. (k+1)*W*B - 1) over the W ranks, so a run saved at W ranks of B and resumed at W' ranks
// of B' with W' x B' = W x B trains the windows the uninterrupted run would have, in the same
// global batches, and ends with its model up to float32 summation order (1e-4 relative, floor
// 0.1, as test_gpt_ddp_mpi.cpp). At another global batch the resumed steps are other steps: the
// trainer says so (a note naming both world sizes and the position it resumes from) and refuses
// with exit 2 when the examples already seen are not a whole number of the new global batches
// and the batch size changed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/trainer/checkpoint.h"
#include "tests/support/cli_run.h"

namespace fs = std::filesystem;

namespace {

class GptResumeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::path(::testing::TempDir()) / ("tandem_gpt_resume_cli_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream text(dir / "text.txt", std::ios::binary);
    for (int i = 0; i < 4000; ++i) text << "In the beginning God created the heaven and the earth.\n"[i % 56];
  }
  void TearDown() override { fs::remove_all(dir); }
  // 4 global batches of 12 windows per epoch, a checkpoint every 2 steps.
  CliRun fit(const std::string& run, int devices, int batch, const std::string& extra = "") {
    const std::string flags =
        "fit --model=gpt --model.n_layer=1 --model.n_head=2 --model.n_embd=16 --model.block_size=8 --data=text "
        "--data.path=" + (dir / "text.txt").string() + " --data.samples_per_epoch=48 --data.val_samples=0 "
        "--data.batch_size=" + std::to_string(batch) + " --trainer.devices=" + std::to_string(devices) +
        " --trainer.strategy=ddp --trainer.accelerator=cpu --trainer.max_epochs=1 --trainer.enable_progress_bar=false "
        "--optimizer=AdamW --optimizer.lr=1e-2 --seed_everything=3 --trainer.default_root_dir=" + (dir / run).string() +
        " --trainer.callbacks='[{name: ModelCheckpoint, every_n_train_steps: 2, save_top_k: -1}]' " + extra;
    return run_cli(dir.string(), "CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1", std::string(TANDEM_CLI_PATH) + " " + flags);
  }
  fs::path checkpoint(const std::string& run, int step) {
    for (const auto& e : fs::recursive_directory_iterator(dir / run)) {
      if (e.path().extension() == ".safetensors" && e.path().filename().string().find("step=" + std::to_string(step)) != std::string::npos)
        return e.path();
    }
    return {};
  }
  // Max over the weights of |a - b| / max(0.1, |b|).
  double apart(const fs::path& a_path, const fs::path& b_path) {
    const auto a = tandem::trainer::load_checkpoint(a_path.string()).model;
    const auto b = tandem::trainer::load_checkpoint(b_path.string()).model;
    EXPECT_EQ(a.keys(), b.keys());
    double worst = 0;
    for (const auto& key : a.keys()) {
      const auto x = a.at(key).to_vector<float>(), y = b.at(key).to_vector<float>();
      for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(double(x[i]) - y[i]) / std::max(0.1, std::fabs(double(y[i]))));
    }
    return worst;
  }
  fs::path dir;
};

TEST_F(GptResumeCli, SavedAtTwoRanksResumesExactlyAtOneAndThreeAtTheSameGlobalBatch) {
  const CliRun whole = fit("whole", 2, 6);
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const CliRun first = fit("split", 2, 6, "--trainer.max_steps=2");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path mid = checkpoint("split", 2), end = checkpoint("whole", 4);
  ASSERT_FALSE(mid.empty());
  ASSERT_FALSE(end.empty());
  EXPECT_GT(apart(mid, end), 1e-2);  // the second half of the epoch moved the weights
  for (const auto& [devices, batch] : {std::pair{1, 12}, std::pair{3, 4}}) {
    const std::string run = "resumed_at_" + std::to_string(devices);
    const CliRun resumed = fit(run, devices, batch, "--ckpt_path=" + mid.string());
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_TRUE(resumed.has("note: resuming a checkpoint written at world size 2 on world size " + std::to_string(devices)))
        << resumed.output;
    // 2 batches of 6 at 2 ranks = 24 windows seen = 2 global batches of 12 at the new size.
    EXPECT_TRUE(resumed.has("mid-epoch position 2 per-rank batches (24 examples) becomes 2")) << resumed.output;
    const fs::path resumed_end = checkpoint(run, 4);
    ASSERT_FALSE(resumed_end.empty()) << resumed.output;
    EXPECT_LT(apart(resumed_end, end), 1e-4) << devices << " rank(s) of " << batch;
  }
}

TEST_F(GptResumeCli, AnotherGlobalBatchSaysSoOrIsRefused) {
  const CliRun first = fit("split", 2, 6, "--trainer.max_steps=2");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path mid = checkpoint("split", 2);
  ASSERT_FALSE(mid.empty());
  // 3 ranks of 6 = global batch 18: 24 windows seen is 1.33 batches; the per-rank batch is the
  // checkpoint's, so the position rounds down to 1 with a note naming the windows seen again.
  const CliRun rounded = fit("rounded", 3, 6, "--ckpt_path=" + mid.string());
  ASSERT_EQ(rounded.exit_code, 0) << rounded.output;
  EXPECT_TRUE(rounded.has("(24 examples) becomes 1, rounded down: the last few examples before it are seen again"))
      << rounded.output;
  // 3 ranks of 5: the batch size changed and 24 is not a multiple of 15: exit 2 saying why.
  const CliRun refused = fit("refused", 3, 5, "--ckpt_path=" + mid.string());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_TRUE(refused.has("not a whole number of batches of 5 at world size 3")) << refused.output;
}

}  // namespace
