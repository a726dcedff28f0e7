// Resuming as a user does (issue #23): a checkpoint changed anywhere is refused, every stage
// says which file it restored, "last"/"best" stay within the run the user points at, a changed
// constant learning rate is applied with a note, and a mid-epoch checkpoint resumed at another
// batch size skips the examples already seen or is refused.
#include "cli_test_util.h"

namespace {

std::vector<uint8_t> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::vector<fs::path> checkpoints_in(const fs::path& version) {
  std::vector<fs::path> found;
  if (!fs::is_directory(version / "checkpoints")) return found;
  for (const auto& e : fs::directory_iterator(version / "checkpoints")) found.push_back(e.path());
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<std::string> versions_in(const TinyRun& run) {
  std::vector<std::string> names;
  const fs::path logs = run.dir / "runs" / "lightning_logs";
  if (!fs::is_directory(logs)) return names;
  for (const auto& e : fs::directory_iterator(logs)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

// The case: beta1 edited in the checkpoint's param_groups, and a flipped weight byte.
TEST(CliResume, ACheckpointChangedAnywhereIsARuntimeErrorNamingTheFile) {
  TinyRun run("changed");
  auto fit = run_tandem("fit " + run.common + " --trainer.max_epochs=1", run.dir);
  ASSERT_EQ(fit.exit_code, 0) << fit.out << fit.err;
  const std::vector<fs::path> saved = checkpoints_in(run.version(0));
  ASSERT_EQ(saved.size(), 1u);
  const std::vector<uint8_t> good = read_bytes(saved[0]);
  const std::string text(good.begin(), good.end());
  const size_t beta1 = text.find("[0.9,0.999]");
  ASSERT_NE(beta1, std::string::npos);

  const fs::path edited = run.dir / "edited.safetensors";
  std::vector<uint8_t> bytes = good;
  bytes[beta1 + 3] = '8';  // betas [0.8, 0.999]: valid JSON, a different optimizer
  write_bytes(edited, bytes);
  auto resumed = run_tandem("fit " + run.common + " --trainer.max_epochs=2 --ckpt_path=" + edited.string(), run.dir);
  EXPECT_EQ(resumed.exit_code, 1) << resumed.out << resumed.err;
  EXPECT_TRUE(resumed.err_has(edited.string())) << resumed.err;
  EXPECT_TRUE(resumed.err_has("checksum mismatch")) << resumed.err;
  EXPECT_FALSE(resumed.out_has("Restoring states")) << resumed.out;

  bytes = good;
  bytes[bytes.size() - 5] ^= 0x10;  // a byte of the last tensor
  write_bytes(edited, bytes);
  auto validated = run_tandem("validate " + run.common + " --ckpt_path=" + edited.string(), run.dir);
  EXPECT_EQ(validated.exit_code, 1) << validated.out << validated.err;
  EXPECT_TRUE(validated.err_has(edited.string()) && validated.err_has("checksum mismatch")) << validated.err;
  // Neither failed command left an empty version directory behind (version_1 holds fit's config.yaml).
  EXPECT_EQ(versions_in(run), (std::vector<std::string>{"version_0", "version_1"}));
  EXPECT_TRUE(fs::exists(run.version(1) / "config.yaml"));
}

// Lightning's "Restoring states from the checkpoint path at ..." for fit, and which weights
// validate/test/predict loaded; "last" and "best" within the run a --config file points at.
TEST(CliResume, EveryStageSaysWhichFileItRestoredWithinTheRunPointedAt) {
  TinyRun run("restored");
  for (int i = 0; i < 2; ++i) {  // two runs with checkpoints: version_0 and version_1
    auto fit = run_tandem("fit " + run.common + " --trainer.max_epochs=1", run.dir);
    ASSERT_EQ(fit.exit_code, 0) << fit.out << fit.err;
  }
  const fs::path first = checkpoints_in(run.version(0)).at(0), second = checkpoints_in(run.version(1)).at(0);

  auto resumed = run_tandem("fit " + run.common + " --trainer.max_epochs=2 --ckpt_path=last", run.dir);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_TRUE(resumed.out_has("Restoring states from the checkpoint path at " + second.string())) << resumed.out;
  EXPECT_TRUE(resumed.out_has("2 runs under")) << resumed.out;
  EXPECT_TRUE(resumed.out_has("using the newest, version_1 (not version_0)")) << resumed.out;

  const std::string config0 = " --config " + (run.version(0) / "config.yaml").string();
  for (const std::string stage : {"validate", "test", "predict"}) {
    for (const std::string which : {"last", "best"}) {
      auto r = run_tandem(stage + config0 + " " + run.common + " --ckpt_path=" + which, run.dir);
      ASSERT_EQ(r.exit_code, 0) << stage << " " << which << r.out << r.err;
      EXPECT_TRUE(r.out_has("Loaded model weights from the checkpoint at " + first.string())) << stage << " " << which
                                                                                             << r.out;
      EXPECT_FALSE(r.out_has("runs under")) << r.out;
    }
  }
  auto fit0 = run_tandem("fit" + config0 + " " + run.common + " --trainer.max_epochs=2 --ckpt_path=last", run.dir);
  ASSERT_EQ(fit0.exit_code, 0) << fit0.out << fit0.err;
  EXPECT_TRUE(fit0.out_has("Restoring states from the checkpoint path at " + first.string())) << fit0.out;
}

// docs/CLI.md: with --lr_scheduler=null the configured constant rate is used, also when it
// differs from the checkpoint's; LearningRateMonitor shows the rate the resumed epoch ran at.
TEST(CliResume, AChangedConstantLearningRateIsAppliedWithANote) {
  TinyRun run("constant_lr");
  const std::string flags =
      run.common + " --lr_scheduler=null --trainer.callbacks=[LearningRateMonitor] --trainer.log_every_n_steps=1";
  auto fit = run_tandem("fit " + flags + " --trainer.max_epochs=1 --optimizer.lr=0.001", run.dir);
  ASSERT_EQ(fit.exit_code, 0) << fit.out << fit.err;
  auto resumed = run_tandem("fit " + flags + " --trainer.max_epochs=2 --optimizer.lr=0.01 --ckpt_path=last", run.dir);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_TRUE(resumed.out_has("note: the checkpoint trained at the constant lr 0.001; this run configures lr 0.01"))
      << resumed.out;
  // step,epoch,lr-Adam,...: every rate logged in the resumed epoch (6 steps) is 0.01.
  const std::string metrics = read_file(run.version(1) / "metrics.csv");
  ASSERT_EQ(metrics.rfind("step,epoch,lr-Adam,", 0), 0u) << metrics;
  std::istringstream rows(metrics);
  std::vector<std::string> rates;
  for (std::string row; std::getline(rows, row);) {
    const size_t first = row.find(','), second = row.find(',', first + 1), third = row.find(',', second + 1);
    const std::string rate = row.substr(second + 1, third - second - 1);
    if (!rate.empty() && rate != "lr-Adam") rates.push_back(rate);
  }
  EXPECT_EQ(rates, std::vector<std::string>(6, "0.01")) << metrics;
  // Unchanged, no note.
  auto same = run_tandem("fit " + flags + " --trainer.max_epochs=3 --optimizer.lr=0.01 --ckpt_path=last", run.dir);
  ASSERT_EQ(same.exit_code, 0) << same.out << same.err;
  EXPECT_FALSE(same.out_has("constant lr")) << same.out;
}

// 48 training examples in batches of 8: the checkpoint after step 2 has seen 16 examples of
// epoch 0. At batch 4 the epoch continues after 4 batches (12 steps in all: 2 + 8 = 10 at its
// end, where replaying the batches would end at 14); at batch 6, 16 examples are not whole
// batches: refused.
TEST(CliResume, AMidEpochCheckpointAtAnotherBatchSizeSkipsTheExamplesSeen) {
  TinyRun run("batch_size");
  auto fit = run_tandem("fit " + run.common +
                            " --trainer.max_epochs=1 --trainer.max_steps=2"
                            " '--trainer.callbacks=[{name: ModelCheckpoint, every_n_train_steps: 2}]'",
                        run.dir);
  ASSERT_EQ(fit.exit_code, 0) << fit.out << fit.err;
  const std::vector<fs::path> saved = checkpoints_in(run.version(0));
  ASSERT_EQ(saved.size(), 1u);
  ASSERT_EQ(saved[0].filename(), "epoch=0-step=2.safetensors");
  const std::string resume = "fit " + run.common + " --trainer.max_epochs=1 --ckpt_path=" + saved[0].string();

  // data.batch_size comes after run.common's 8, and the later flag wins.
  auto odd = run_tandem(resume + " --data.batch_size=6", run.dir);
  EXPECT_EQ(odd.exit_code, 2) << odd.out << odd.err;
  EXPECT_TRUE(odd.err_has("saved after 2 batches of 8 per rank at world size 1, i.e. 16 examples")) << odd.err;
  EXPECT_TRUE(odd.err_has("resume with --data.batch_size=8")) << odd.err;

  auto smaller = run_tandem(resume + " --data.batch_size=4", run.dir);
  ASSERT_EQ(smaller.exit_code, 0) << smaller.out << smaller.err;
  EXPECT_TRUE(smaller.out_has("written with batch size 8 at batch size 4; mid-epoch position 2 per-rank batches (16 "
                              "examples) becomes 4"))
      << smaller.out;
  std::vector<std::string> names;
  for (const fs::path& p : checkpoints_in(run.version(2))) names.push_back(p.filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"epoch=0-step=10.safetensors"});
}
