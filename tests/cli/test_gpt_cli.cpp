// The GPT from the command line: `tandem fit --model=gpt --data=text` on a small text, then
// `tandem generate` from its checkpoint (the prompt and N sampled bytes, the same text for the
// same seed, temperature <= 0 greedy), an exact mid-epoch resume, and each bad input's exit 2.
#include <cmath>

#include "cli_test_util.h"
#include "engine/trainer/checkpoint.h"

namespace {

struct GptRun {
  explicit GptRun(const std::string& name) : dir(temp_dir(name)) {
    std::ofstream text(dir / "text.txt", std::ios::binary);
    for (int i = 0; i < 4000; ++i) text << "In the beginning God created the heaven and the earth.\n"[i % 56];
    text.close();
    model = "--model=gpt --model.n_layer=1 --model.n_head=2 --model.n_embd=16 --model.block_size=8";
    data = "--data=text --data.path=" + (dir / "text.txt").string() + " --data.batch_size=4 --data.samples_per_epoch=24 --data.val_samples=8";
    trainer = " --trainer.default_root_dir=" + (dir / "runs").string() +
              " --trainer.accelerator=cpu --trainer.enable_progress_bar=false --optimizer=AdamW --optimizer.lr=1e-2";
  }
  ~GptRun() { fs::remove_all(dir); }
  std::string fit(const std::string& extra = "") const { return "fit " + model + " " + data + trainer + " " + extra; }
  fs::path dir;
  std::string model, data, trainer;
};

}  // namespace

TEST(GptCli, FitsOnTextThenGeneratesFromTheCheckpoint) {
  GptRun run("gpt_fit");
  const auto fit = run_tandem(run.fit("--trainer.max_epochs=2"));
  ASSERT_EQ(fit.exit_code, 0) << fit.out << fit.err;
  EXPECT_TRUE(fit.out_has("val_loss")) << fit.out;
  const fs::path ckpt = find_first(run.dir / "runs", ".safetensors");
  ASSERT_FALSE(ckpt.empty());
  const std::string gen = "generate --ckpt_path=" + ckpt.string() + " --prompt='In the' --max_new_tokens=40 ";
  const auto a = run_tandem(gen + "--seed=3"), b = run_tandem(gen + "--seed=3");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out.rfind("In the", 0), 0u) << a.out;
  EXPECT_EQ(a.out.size(), 6u + 40u + 1u);  // prompt, 40 bytes, newline
  const auto greedy = run_tandem(gen + "--temperature=0"), negative = run_tandem(gen + "--temperature=-2 --seed=9");
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  EXPECT_EQ(greedy.out, negative.out);
}

TEST(GptCli, GeneratePrintConfigShowsTheResolvedOptionsWithoutACheckpoint) {
  const auto r = run_tandem("generate --prompt='Amen' --max_new_tokens=7 --print_config");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out_has("max_new_tokens: 7")) << r.out;
  EXPECT_TRUE(r.out_has("prompt: Amen")) << r.out;
  const auto bad = run_tandem("generate --max_new_tokens=seven --print_config");
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
}

// The newest checkpoint under root.
fs::path newest_checkpoint(const fs::path& root) {
  fs::path best;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.path().extension() == ".safetensors" && (best.empty() || fs::last_write_time(e.path()) > fs::last_write_time(best))) best = e.path();
  }
  return best;
}

TEST(GptCli, ResumesMidEpochExactly) {
  GptRun whole("gpt_whole"), split("gpt_split");
  // 6 batches per epoch; the split run saves every 2 steps, stops after step 4 (mid-epoch) and resumes.
  const std::string every2 = " --data.val_samples=0 --trainer.callbacks='[{name: ModelCheckpoint, every_n_train_steps: 2, save_top_k: -1}]'";
  const auto all = run_tandem(whole.fit("--trainer.max_epochs=1 --data.val_samples=0"));
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const auto first = run_tandem(split.fit("--trainer.max_epochs=1 --trainer.max_steps=4" + every2));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const fs::path mid = newest_checkpoint(split.dir / "runs");
  ASSERT_NE(mid.string().find("step=4"), std::string::npos) << mid;
  const auto resumed = run_tandem(split.fit("--trainer.max_epochs=1 --ckpt_path=" + mid.string() + every2));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const fs::path end = newest_checkpoint(split.dir / "runs");
  ASSERT_NE(end.string().find("step=6"), std::string::npos) << end;
  const auto a = tandem::trainer::load_checkpoint(newest_checkpoint(whole.dir / "runs").string()).model;
  const auto b = tandem::trainer::load_checkpoint(end.string()).model;
  ASSERT_EQ(a.keys(), b.keys());
  for (const auto& key : a.keys()) EXPECT_EQ(a.at(key).to_vector<float>(), b.at(key).to_vector<float>()) << key;
}

TEST(GptCli, BadTextInputExitsTwoSayingWhy) {
  GptRun run("gpt_bad");
  auto above = run_tandem(run.fit("--data.block_size=16 --trainer.max_epochs=1"));
  EXPECT_EQ(above.exit_code, 2);
  EXPECT_TRUE(above.err_has("--data.block_size=16 is above the model's block_size 8")) << above.err;
  std::ofstream(run.dir / "empty.txt").close();
  auto empty = run_tandem(run.fit("--data.path=" + (run.dir / "empty.txt").string() + " --trainer.max_epochs=1"));
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_TRUE(empty.err_has("is empty")) << empty.err;
  auto mlp = run_tandem("fit --model=mlp " + run.data + run.trainer);
  EXPECT_EQ(mlp.exit_code, 2);
  EXPECT_TRUE(mlp.err_has("--data=text gives token ids")) << mlp.err;
  auto vocab = run_tandem(run.fit("--model.vocab_size=100 --trainer.max_epochs=1"));
  EXPECT_EQ(vocab.exit_code, 2);
  EXPECT_TRUE(vocab.err_has("token id 118")) << vocab.err;  // 'v', the largest byte of the text
  auto no_ckpt = run_tandem("generate --prompt=hi");
  EXPECT_EQ(no_ckpt.exit_code, 2);
  EXPECT_TRUE(no_ckpt.err_has("--ckpt_path=FILE is required")) << no_ckpt.err;
}

namespace {
// The value of `name` in the metrics table `tandem fit` prints ("| val_loss   | 3.44772 |").
double table_value(const std::string& out, const std::string& name) {
  const auto at = out.rfind("| " + name + " ");
  if (at == std::string::npos) return NAN;
  const auto bar = out.find('|', at + 2);
  return std::stod(out.substr(bar + 1));
}
}  // namespace

// The same run under bf16-mixed on the CPU, and under dp on two emulated GPUs (the CUDA kernels,
// the fused attention included, run on the CPU in the emulation build).
TEST(GptCli, TrainsUnderBf16MixedAndDpOnEmulatedGpus) {
  GptRun run("gpt_precision");
  const auto plain = run_tandem(run.fit("--trainer.max_epochs=2"));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const double val = table_value(plain.out, "val_loss");
  const auto bf16 = run_tandem(run.fit("--trainer.max_epochs=2 --trainer.precision=bf16-mixed"));
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  EXPECT_NEAR(table_value(bf16.out, "val_loss"), val, 0.05) << bf16.out;  // bf16 products: ~3 digits
  EXPECT_NE(table_value(bf16.out, "val_loss"), val);                      // and it did run in bf16
#if TANDEM_CUDA_EMULATION
  const auto dp = run_command("cd '" + run.dir.string() + "' && env OMP_NUM_THREADS=1 TANDEM_EMULATED_GPUS=2 " +
                              std::string(TANDEM_CLI_PATH) + " " +
                              run.fit("--trainer.max_epochs=2 --trainer.accelerator=cuda --trainer.devices=2 --trainer.strategy=dp"));
  ASSERT_EQ(dp.exit_code, 0) << dp.err;
  EXPECT_NEAR(table_value(dp.out, "val_loss"), val, 1e-4) << dp.out;  // the same global batch, split over 2 devices
#endif
}
