// `tandem fit|validate|test|predict` as a user runs them: the built binary (TANDEM_CLI_PATH),
// its stdout, stderr and exit codes (0 ok, 2 usage/config errors, 1 runtime errors), and the
// files a run leaves (metrics.csv, config.yaml, checkpoints), on a tiny generated dataset.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_test_util.h"

TEST(Cli, HelpPerSubcommand) {
  for (const std::string stage : {"fit", "validate", "test", "predict"}) {
    auto r = run_tandem(stage + " --help");
    EXPECT_EQ(r.exit_code, 0) << stage << ": " << r.err;
    EXPECT_TRUE(r.out_has("usage: tandem " + stage)) << r.out;
    EXPECT_TRUE(r.out_has("--trainer.max_epochs")) << r.out;
    EXPECT_TRUE(r.out_has("--model=cnn")) << r.out;
    EXPECT_TRUE(r.out_has("--optimizer=AdamW")) << r.out;
    EXPECT_TRUE(r.out_has("--lr_scheduler.step_size")) << r.out;
    EXPECT_TRUE(r.out_has("--data.batch_size")) << r.out;
  }
  auto top = run_tandem("--help");
  EXPECT_EQ(top.exit_code, 0);
  for (const char* name : {"fit", "validate", "test", "predict", "plan"}) EXPECT_TRUE(top.out_has(name)) << top.out;
}

TEST(Cli, PrintConfigRoundTripsThroughConfig) {
  const fs::path dir = temp_dir("print_config");
  auto first = run_tandem("fit --model=cnn --optimizer=AdamW --lr_scheduler=StepLR --lr_scheduler.step_size=5 "
                          "--trainer.max_epochs=3 --seed_everything=7 --print_config");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  for (const char* key : {"seed_everything: 7", "ckpt_path: ~", "max_epochs: 3", "name: cnn", "batch_norm: false",
                          "name: AdamW", "weight_decay: 0.01", "step_size: 5", "batch_size: 256",
                          "root: /usr/share/datasets/fashion-mnist"}) {
    EXPECT_TRUE(first.out_has(key)) << "missing '" << key << "' in:\n" << first.out;
  }
  std::ofstream(dir / "run.yaml") << first.out;
  auto again = run_tandem("fit --config " + (dir / "run.yaml").string() + " --print_config");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, first.out);
  // Flags override the file wherever they appear.
  auto override = run_tandem("test --optimizer.lr=0.01 --config " + (dir / "run.yaml").string() + " --print_config");
  ASSERT_EQ(override.exit_code, 0) << override.err;
  EXPECT_TRUE(override.out_has("lr: 0.01")) << override.out;
  EXPECT_TRUE(override.out_has("name: AdamW")) << override.out;
}

TEST(Cli, DefaultsAreTheMainJob) {
  auto r = run_tandem("fit --print_config");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* key : {"name: mlp", "hidden: [1024, 1024]", "name: Adam", "lr: 0.001",
                          "name: CosineAnnealingLR\n  T_max: ~", "accelerator: auto", "max_epochs: 10"}) {
    EXPECT_TRUE(r.out_has(key)) << "missing '" << key << "' in:\n" << r.out;
  }
  // The cosine over the run is a default, not a requirement.
  auto constant = run_tandem("fit --lr_scheduler=null --print_config");
  ASSERT_EQ(constant.exit_code, 0) << constant.err;
  EXPECT_TRUE(constant.out_has("lr_scheduler: ~")) << constant.out;
}

TEST(Cli, UnknownFlagSuggestsTheClosest) {
  auto r = run_tandem("fit --trainer.max_epoch=3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(r.err_has("did you mean --trainer.max_epochs?")) << r.err;
  auto section = run_tandem("fit --optimzer=AdamW");
  EXPECT_EQ(section.exit_code, 2);
  EXPECT_TRUE(section.err_has("did you mean --optimizer")) << section.err;
  auto subcommand = run_tandem("fitt");
  EXPECT_EQ(subcommand.exit_code, 2);
  EXPECT_TRUE(subcommand.err_has("did you mean 'fit'?")) << subcommand.err;
}

TEST(Cli, BadValuesSayWhatIsAllowed) {
  auto epochs = run_tandem("fit --trainer.max_epochs=abc");
  EXPECT_EQ(epochs.exit_code, 2);
  EXPECT_TRUE(epochs.err_has("expected an integer")) << epochs.err;
  auto optimizer = run_tandem("fit --optimizer=RMSprop");
  EXPECT_EQ(optimizer.exit_code, 2);
  EXPECT_TRUE(optimizer.err_has("SGD, Adam, AdamW")) << optimizer.err;
  auto model = run_tandem("fit --model=resnet");
  EXPECT_EQ(model.exit_code, 2);
  EXPECT_TRUE(model.err_has("mlp, cnn")) << model.err;
  auto lr = run_tandem("fit --optimizer.lr=0");
  EXPECT_EQ(lr.exit_code, 2);
  EXPECT_TRUE(lr.err_has("--optimizer.lr=0")) << lr.err;
  auto batch = run_tandem("fit --data.batch_size=0");
  EXPECT_EQ(batch.exit_code, 2);
  EXPECT_TRUE(batch.err_has("batch_size")) << batch.err;
  auto missing_file = run_tandem("fit --config /nonexistent/run.yaml");
  EXPECT_EQ(missing_file.exit_code, 2);
  EXPECT_TRUE(missing_file.err_has("/nonexistent/run.yaml")) << missing_file.err;
}

TEST(Cli, MissingDataSaysHowToInstallIt) {
  const fs::path dir = temp_dir("missing_data");
  auto r = run_tandem("fit --data.root=" + (dir / "nothing_here").string() + " --trainer.max_epochs=1", dir);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(r.err_has("dataset-fashion-mnist")) << r.err;
  EXPECT_TRUE(r.err_has("--data.root")) << r.err;
}

TEST(Cli, TinyFitThenTestTheCheckpoint) {
  const fs::path dir = temp_dir("fit");
  fs::create_directories(dir / "data");
  write_tiny_fashion_mnist((dir / "data").string(), 60, 20);
  const std::string data = "--data.root=" + (dir / "data").string() + " --data.val_size=12 --data.batch_size=8";
  const std::string common = data + " --trainer.default_root_dir=" + (dir / "runs").string() +
                             " --trainer.accelerator=cpu --trainer.enable_progress_bar=false";
  auto fit = run_tandem("fit " + common + " --model.hidden=[32] --trainer.max_epochs=1 "
                        "--trainer.limit_train_batches=2 --trainer.log_every_n_steps=1", dir);
  ASSERT_EQ(fit.exit_code, 0) << fit.out << fit.err;
  EXPECT_TRUE(fit.out_has("val_acc")) << fit.out;  // the final metrics table

  const fs::path version = dir / "runs" / "lightning_logs" / "version_0";
  const std::string metrics = read_file(version / "metrics.csv");
  const std::string header = metrics.substr(0, metrics.find('\n'));
  for (const char* column : {"step", "epoch", "train_loss", "val_loss", "val_acc"}) {
    EXPECT_NE(header.find(column), std::string::npos) << "no " << column << " column in: " << header;
  }
  EXPECT_TRUE(fs::exists(version / "hparams.yaml"));
  EXPECT_TRUE(fs::exists(version / "config.yaml"));
  const fs::path ckpt = find_first(version, ".safetensors");
  ASSERT_FALSE(ckpt.empty()) << "no checkpoint under " << version;

  // The saved config rebuilds the same model; the checkpoint supplies its weights.
  auto test = run_tandem("test --config " + (version / "config.yaml").string() + " --ckpt_path=" + ckpt.string(), dir);
  ASSERT_EQ(test.exit_code, 0) << test.out << test.err;
  EXPECT_TRUE(test.out_has("test_acc")) << test.out;
  EXPECT_TRUE(test.out_has("test_loss")) << test.out;

  auto predict = run_tandem("predict " + common + " --model.hidden=[32] --ckpt_path=" + ckpt.string() +
                            " --predictions=" + (dir / "pred.csv").string(), dir);
  ASSERT_EQ(predict.exit_code, 0) << predict.out << predict.err;
  const std::string predictions = read_file(dir / "pred.csv");
  EXPECT_EQ(std::count(predictions.begin(), predictions.end(), '\n'), 21) << predictions;  // header + 20

  // A checkpoint of another architecture is a runtime error (exit 1) naming the mismatch.
  auto wrong = run_tandem("test " + common + " --ckpt_path=" + ckpt.string(), dir);
  EXPECT_EQ(wrong.exit_code, 1) << wrong.out << wrong.err;
  fs::remove_all(dir);
}

TEST(Cli, NonFiniteLossIsARuntimeErrorSayingWhereAndWhatToDo) {
  TinyRun run("nan");
  // A learning rate of 1e38 overflows the weights at the first step, so the next loss is not finite.
  auto r = run_tandem("fit " + run.common + " --optimizer=SGD --optimizer.lr=1e38 --trainer.max_epochs=1", run.dir);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(r.err_has("tandem fit: error: training_step returned loss=")) << r.err;
  EXPECT_TRUE(r.err_has("global step 1")) << r.err;
  EXPECT_TRUE(r.err_has("Lower the learning rate")) << r.err;
  EXPECT_FALSE(fs::exists(run.version(0) / "checkpoints")) << "no checkpoint of a broken run";
}

TEST(Cli, CallbacksFromFlagsAndTheirErrors) {
  TinyRun run("callbacks");
  const std::string callbacks =
      "--trainer.callbacks='[LearningRateMonitor, {name: ModelCheckpoint, monitor: val_acc, mode: max, "
      "save_top_k: -1, filename: \"e{epoch}-{val_acc:.2f}\"}]'";
  auto printed = run_tandem("fit " + run.common + " " + callbacks + " --print_config", run.dir);
  ASSERT_EQ(printed.exit_code, 0) << printed.err;
  for (const char* key : {"- name: LearningRateMonitor", "logging_interval: ~", "- name: ModelCheckpoint",
                          "monitor: val_acc", "save_last: false", "every_n_epochs: ~",
                          "every_n_train_steps: 0", "train_time_interval: ~"}) {
    EXPECT_TRUE(printed.out_has(key)) << "missing '" << key << "' in:\n" << printed.out;
  }
  auto fit = run_tandem("fit " + run.common + " " + callbacks + " --trainer.max_epochs=2 --trainer.log_every_n_steps=1",
                        run.dir);
  ASSERT_EQ(fit.exit_code, 0) << fit.out << fit.err;
  std::vector<std::string> checkpoints;
  for (const auto& e : fs::directory_iterator(run.version(0) / "checkpoints")) checkpoints.push_back(e.path().filename());
  ASSERT_EQ(checkpoints.size(), 2u);  // the configured ModelCheckpoint replaced the default one
  for (const auto& name : checkpoints) {
    EXPECT_EQ(name.rfind("e", 0), 0u) << name;
    EXPECT_NE(name.find("-val_acc="), std::string::npos) << name;  // e.g. eepoch=1-val_acc=0.92
  }
  const std::string metrics = read_file(run.version(0) / "metrics.csv");
  EXPECT_NE(metrics.substr(0, metrics.find('\n')).find("lr-Adam"), std::string::npos) << metrics;

  auto unknown = run_tandem("fit " + run.common + " --trainer.callbacks=[EarlyStop]", run.dir);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_TRUE(unknown.err_has("--trainer.callbacks[0]=EarlyStop is not valid: expected one of")) << unknown.err;
  auto required = run_tandem("fit " + run.common + " --trainer.callbacks=[EarlyStopping] --print_config", run.dir);
  EXPECT_EQ(required.exit_code, 2);
  EXPECT_TRUE(required.err_has("EarlyStopping needs --trainer.callbacks[0].monitor")) << required.err;
}

TEST(Cli, FitResumesFromLastAndTestWritesItsMetrics) {
  TinyRun run("resume");
  auto first = run_tandem("fit " + run.common + " --trainer.max_epochs=1", run.dir);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_TRUE(first.out_has("Fit metric")) << first.out;
  auto resumed = run_tandem("fit " + run.common + " --trainer.max_epochs=2 --ckpt_path=last", run.dir);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  // The resumed run trained epoch 1 only: its metrics rows are all epoch 1.
  const std::string metrics = read_file(run.version(1) / "metrics.csv");
  std::istringstream lines(metrics);
  std::string line;
  std::getline(lines, line);
  ASSERT_EQ(line.rfind("step,epoch,", 0), 0u) << line;
  int rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
    EXPECT_EQ(line.substr(line.find(',') + 1, 2), "1,") << line;
  }
  EXPECT_GT(rows, 0);

  // `tandem test` puts test_loss and test_acc in its own metrics.csv as well as the table.
  auto test = run_tandem("test " + run.common + " --ckpt_path=last", run.dir);
  ASSERT_EQ(test.exit_code, 0) << test.out << test.err;
  EXPECT_TRUE(test.out_has("Test metric")) << test.out;
  const std::string test_metrics = read_file(run.version(2) / "metrics.csv");
  const std::string header = test_metrics.substr(0, test_metrics.find('\n'));
  EXPECT_EQ(header, "step,epoch,test_acc,test_loss") << test_metrics;
}
