// `tandem` runs end to end, as a user meets them: extending a finished run, resuming with
// another optimizer, writes on a full disk, config files, library errors as messages, predict's
// output directory, a fit that trains nothing, and plan's help against what fit runs.
#include <yaml-cpp/yaml.h>

#include "cli_test_util.h"
#include "engine/trainer/checkpoint.h"

namespace {

// `tandem args` with writes to regular files limited to 512 bytes, as on a full disk: a write
// past the limit fails (EFBIG) instead of killing the process (SIGXFSZ is ignored). stderr goes
// to the pipe with stdout, since the limit would apply to a file.
RunResult run_tandem_small_disk(const std::string& args, const fs::path& cwd) {
  return run_command("cd '" + cwd.string() + "' && ulimit -f 1 && trap '' XFSZ && env OMP_NUM_THREADS=1 " +
                     "CUDA_VISIBLE_DEVICES= " + std::string(TANDEM_CLI_PATH) + " " + args + " 2>&1");
}

// The largest absolute difference between two checkpoints' model tensors.
double weight_change(const fs::path& a, const fs::path& b) {
  const auto first = tandem::trainer::load_checkpoint(a.string()).model;
  const auto second = tandem::trainer::load_checkpoint(b.string()).model;
  double most = 0;
  for (const auto& [name, tensor] : first) {
    const std::vector<float> x = tensor.to_vector<float>(), y = second.at(name).to_vector<float>();
    for (size_t i = 0; i < x.size(); ++i) most = std::max(most, double(std::abs(x[i] - y[i])));
  }
  return most;
}

fs::path only_checkpoint(const fs::path& version) {
  fs::path found;
  for (const auto& e : fs::directory_iterator(version / "checkpoints")) {
    EXPECT_TRUE(found.empty()) << "more than one checkpoint in " << version;
    found = e.path();
  }
  return found;
}

}  // namespace

TEST(CliRuns, ExtendingAFinishedRunTrainsTheNewEpochs) {
  TinyRun run("extend");
  auto first = run_tandem("fit " + run.common + " --trainer.max_epochs=1", run.dir);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  // The 1-epoch cosine ended at lr 0; the extension follows the 2-epoch cosine from step 1.
  auto extended = run_tandem("fit " + run.common + " --trainer.max_epochs=2 --ckpt_path=last", run.dir);
  ASSERT_EQ(extended.exit_code, 0) << extended.out << extended.err;
  EXPECT_TRUE(extended.out_has("learning-rate schedule (CosineAnnealingLR {\"T_max\":2")) << extended.out;
  EXPECT_TRUE(extended.out_has("scheduler step 1 on this run's schedule: lr 0.0005 (the checkpoint's schedule was at 0)"))
      << extended.out;
  EXPECT_GT(weight_change(only_checkpoint(run.version(0)), only_checkpoint(run.version(1))), 1e-6)
      << "the extension's epoch left the weights as they were";

  // Without a scheduler now, the extension runs at the configured rate, not the cosine's last one.
  auto constant = run_tandem("fit " + run.common + " --trainer.max_epochs=3 --lr_scheduler=null --ckpt_path=last", run.dir);
  ASSERT_EQ(constant.exit_code, 0) << constant.out << constant.err;
  EXPECT_TRUE(constant.out_has("this run has none; training continues at the configured constant lr 0.001"))
      << constant.out;
  EXPECT_GT(weight_change(only_checkpoint(run.version(1)), only_checkpoint(run.version(2))), 1e-6);
}

TEST(CliRuns, ResumingWithAnotherOptimizerIsRefused) {
  TinyRun run("optimizer");
  auto first = run_tandem("fit " + run.common + " --trainer.max_epochs=1", run.dir);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  auto other = run_tandem("fit " + run.common + " --trainer.max_epochs=2 --optimizer=AdamW --ckpt_path=last", run.dir);
  EXPECT_EQ(other.exit_code, 2) << other.out << other.err;
  EXPECT_TRUE(other.err_has("its optimizer state was written by Adam, but this run configures AdamW")) << other.err;
  EXPECT_TRUE(other.err_has("resume with --optimizer=Adam")) << other.err;
  EXPECT_FALSE(fs::exists(run.version(1) / "checkpoints")) << "nothing trained";
}

TEST(CliRuns, FailedWritesAreErrorsAndKeepTheOldFile) {
  TinyRun run("full_disk", 200);  // 200 predictions are well over the 512 bytes allowed
  auto fit = run_tandem("fit " + run.common + " --trainer.max_epochs=1", run.dir);
  ASSERT_EQ(fit.exit_code, 0) << fit.out << fit.err;
  const fs::path predictions = run.dir / "pred.csv";
  { std::ofstream(predictions) << "index,class\n0,3\n"; }
  auto predict = run_tandem_small_disk("predict " + run.common + " --ckpt_path=last --predictions=" + predictions.string(),
                                       run.dir);
  EXPECT_EQ(predict.exit_code, 1) << predict.out;
  EXPECT_TRUE(predict.out_has("cannot save '" + predictions.string() + "'")) << predict.out;
  EXPECT_TRUE(predict.out_has("File too large")) << predict.out;
  EXPECT_EQ(read_file(predictions), "index,class\n0,3\n") << "the old predictions must survive";
  for (const auto& e : fs::directory_iterator(run.dir)) EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos);

  // config.yaml is written when fit starts; on a full disk that is an error, not an empty file.
  auto full = run_tandem_small_disk("fit " + run.common + " --trainer.max_epochs=1", run.dir);
  EXPECT_EQ(full.exit_code, 1) << full.out;
  EXPECT_TRUE(full.out_has("config.yaml': writing")) << full.out;
  EXPECT_FALSE(fs::exists(run.version(1) / "config.yaml"));
}

TEST(CliRuns, ConfigYamlIsWrittenWhenFitStarts) {
  TinyRun run("config_first");
  // This run fails at its second step; its config.yaml is there to rerun or debug it.
  auto failed = run_tandem("fit " + run.common + " --optimizer=SGD --optimizer.lr=1e38 --trainer.max_epochs=1", run.dir);
  ASSERT_EQ(failed.exit_code, 1) << failed.out << failed.err;
  const YAML::Node saved = YAML::LoadFile((run.version(0) / "config.yaml").string());
  EXPECT_EQ(saved["optimizer"]["name"].as<std::string>(), "SGD");
  EXPECT_EQ(saved["optimizer"]["lr"].as<double>(), 1e38);
}

TEST(CliRuns, ConfigFilesThatAreNotMappingsAreRefused) {
  const fs::path dir = temp_dir("bad_config");
  { std::ofstream(dir / "empty.yaml") << ""; }
  { std::ofstream(dir / "list.yaml") << "- trainer\n- model\n"; }
  auto empty = run_tandem("fit --config " + (dir / "empty.yaml").string() + " --print_config");
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_TRUE(empty.err_has("empty.yaml is empty; a config file holds a mapping")) << empty.err;
  auto list = run_tandem("fit --config " + (dir / "list.yaml").string() + " --print_config");
  EXPECT_EQ(list.exit_code, 2);
  EXPECT_TRUE(list.err_has("the top level must be a mapping like 'trainer: {devices: 2}', got a list")) << list.err;
  auto directory = run_tandem("fit --config " + dir.string() + " --print_config");
  EXPECT_EQ(directory.exit_code, 2);
  EXPECT_TRUE(directory.err_has(dir.string() + " is a directory; give a YAML file")) << directory.err;
  EXPECT_FALSE(directory.err_has("basic_filebuf")) << directory.err;
  fs::remove_all(dir);
}

TEST(CliRuns, LibraryErrorsComeWithWhatWasWrong) {
  auto seed = run_tandem("fit --seed_everything=-1 --print_config");
  EXPECT_EQ(seed.exit_code, 2) << seed.out;
  EXPECT_TRUE(seed.err_has("--seed_everything=-1 is not valid: expected an integer from 0 to 18446744073709551615"))
      << seed.err;
  EXPECT_FALSE(seed.err_has("yaml-cpp")) << seed.err;

  // A model of 800 billion weights, under a 4 GiB address-space limit so the outcome does not
  // depend on the machine's memory or overcommit policy. AddressSanitizer reserves terabytes of
  // address space for its shadow at start, so it cannot run under that limit; its allocator
  // refuses any block over 1 TiB instead (returning null: sanitizers/sanitizer_defaults.cpp).
#if defined(__SANITIZE_ADDRESS__)
  const std::string address_limit;
#else
  const std::string address_limit = "ulimit -v 4194304 && ";
#endif
  TinyRun run("huge");
  auto huge = run_command("cd '" + run.dir.string() + "' && " + address_limit + "env OMP_NUM_THREADS=1 " +
                          std::string(TANDEM_CLI_PATH) + " fit " + run.common + " --model.hidden=[1000000000]");
  EXPECT_EQ(huge.exit_code, 1) << huge.out << huge.err;
  EXPECT_TRUE(huge.err_has("tandem fit: error: out of host memory: cannot allocate 3136000000000 bytes")) << huge.err;
}

TEST(CliRuns, PredictCreatesItsDirectory) {
  TinyRun run("predict_dir");
  auto fit = run_tandem("fit " + run.common + " --trainer.max_epochs=1", run.dir);
  ASSERT_EQ(fit.exit_code, 0) << fit.out << fit.err;
  const fs::path ckpt = only_checkpoint(run.version(0));
  const fs::path root = run.dir / "not" / "yet";
  auto predict = run_tandem("predict " + run.common + " --ckpt_path=" + ckpt.string() +
                            " --trainer.default_root_dir=" + root.string(), run.dir);
  ASSERT_EQ(predict.exit_code, 0) << predict.out << predict.err;
  const std::string text = read_file(root / "predictions.csv");
  EXPECT_EQ(text.rfind("index,class\n0,", 0), 0u) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 21) << text;  // header + 20 test examples
}

TEST(CliRuns, FitThatTrainsNothingSaysWhy) {
  TinyRun run("nothing");
  auto zero_batches = run_tandem("fit " + run.common + " --trainer.limit_train_batches=0", run.dir);
  ASSERT_EQ(zero_batches.exit_code, 0) << zero_batches.out << zero_batches.err;
  EXPECT_TRUE(zero_batches.out_has("`fit` stopped: no training batches (limit_train_batches leaves 0 of the 6)"))
      << zero_batches.out;
  auto zero_epochs = run_tandem("fit " + run.common + " --trainer.max_epochs=0", run.dir);
  ASSERT_EQ(zero_epochs.exit_code, 0) << zero_epochs.out << zero_epochs.err;
  EXPECT_TRUE(zero_epochs.out_has("`fit` stopped: `max_epochs=0` reached before any training")) << zero_epochs.out;
  EXPECT_FALSE(zero_epochs.err_has("T_max")) << zero_epochs.err;
}

TEST(CliRuns, PlanHelpShowsTheDefaultsFitRunsWith) {
  auto fit = run_tandem("fit --help");
  auto plan = run_tandem("plan --help");
  ASSERT_EQ(fit.exit_code, 0);
  ASSERT_EQ(plan.exit_code, 0);
  // Every trainer option's line, default included, is the same in both.
  std::istringstream lines(fit.out);
  std::string line;
  int compared = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("  --trainer.", 0) != 0 || line.find("  (default: ") == std::string::npos) continue;
    EXPECT_TRUE(plan.out_has(line + "\n")) << "plan --help lacks or differs in: " << line;
    ++compared;
  }
  EXPECT_GT(compared, 20);
  EXPECT_TRUE(plan.out_has("  --trainer.max_epochs  (default: 10)")) << plan.out;
}

TEST(CliRuns, AnUnknownCpuInstructionSetIsAConfigError) {
  TinyRun run("cpu_isa");
  auto r = run_command("cd '" + run.dir.string() + "' && env TANDEM_CPU_ISA=sse9 OMP_NUM_THREADS=1 CUDA_VISIBLE_DEVICES= " +
                       std::string(TANDEM_CLI_PATH) + " fit " + run.common + " --trainer.max_epochs=1");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(r.err_has("TANDEM_CPU_ISA='sse9' is not an instruction set; use avx512, avx2 or portable")) << r.err;
}
