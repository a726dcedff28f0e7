// Small, fast fixtures for the Trainer tests: a synthetic in-memory DataModule (TensorDataset +
// DataLoader, shuffled by seed) and a tiny classifier with dropout that counts every hook, so
// tests can assert loop counts exactly. Data values come from a formula, not from the Philox
// generator, so building the data never moves the RNG state the tests compare.
#pragma once
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/data/data_loader.h"
#include "engine/data/data_module.h"
#include "engine/data/tensor_dataset.h"
#include "engine/nn/nn.h"
#include "engine/optim/adam.h"
#include "engine/optim/lr_scheduler.h"
#include "engine/optim/sgd.h"
#include "engine/trainer/trainer.h"
#include "tensor/generator.h"

namespace tandem::trainer::testing {

// n examples of `features` inputs; the class is which of 3 fixed directions x points along most.
inline std::shared_ptr<data::TensorDataset> synthetic_dataset(int64_t n, int64_t features, int64_t offset) {
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int64_t i = 0; i < n; ++i) {
    double best = -1e9;
    int64_t label = 0;
    std::vector<double> row;
    for (int64_t j = 0; j < features; ++j) row.push_back(std::sin(0.7 * double(i + offset) + 1.3 * double(j) + 0.1 * double(j * j)));
    for (int64_t c = 0; c < 3; ++c) {
      double s = 0;
      for (int64_t j = 0; j < features; ++j) s += row[size_t(j)] * std::cos(double(c * features + j));
      if (s > best) { best = s; label = c; }
    }
    for (double v : row) x.push_back(float(v));
    y.push_back(label);
  }
  return std::make_shared<data::TensorDataset>(Tensor::from_vector(x, {n, features}), Tensor::from_vector(y, {n}));
}

class SyntheticDataModule : public data::DataModule {
 public:
  SyntheticDataModule(int64_t n_train = 64, int64_t n_val = 32, int64_t batch_size = 8, bool with_val = true)
      : n_train(n_train), n_val(n_val), batch_size(batch_size), with_val(with_val) {}
  void setup(const std::string&) override {
    setup_calls += 1;
    if (!train) {
      train = synthetic_dataset(n_train, 4, 0);
      val = synthetic_dataset(n_val, 4, 1000);
    }
  }
  std::shared_ptr<data::DataLoader> train_dataloader() override {
    data::DataLoaderOptions o;
    o.batch_size = batch_size;
    o.shuffle = true;
    o.seed = 1234;
    o.prefetch = 0;
    return std::make_shared<data::DataLoader>(train, o);
  }
  std::shared_ptr<data::DataLoader> val_dataloader() override {
    if (!with_val) return nullptr;
    data::DataLoaderOptions o;
    o.batch_size = batch_size;
    o.prefetch = 0;
    return std::make_shared<data::DataLoader>(val, o);
  }
  std::shared_ptr<data::DataLoader> test_dataloader() override { return val_dataloader_always(); }
  nlohmann::json hparams() const override { return {{"batch_size", batch_size}, {"n_train", n_train}}; }

  std::shared_ptr<data::DataLoader> val_dataloader_always() {
    data::DataLoaderOptions o;
    o.batch_size = batch_size;
    o.prefetch = 0;
    return std::make_shared<data::DataLoader>(val, o);
  }

  int64_t n_train, n_val, batch_size;
  bool with_val;
  int setup_calls = 0;
  std::shared_ptr<data::TensorDataset> train, val;
};

// 4 -> 16 -> dropout -> 3, Adam + StepLR; counts hooks.
class TinyClassifier : public LightningModule {
 public:
  explicit TinyClassifier(double lr = 0.05, double dropout = 0.25) : lr(lr), dropout(dropout) {
    net = register_module("net", std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 16),
                                                                  std::make_shared<nn::ReLU>(),
                                                                  std::make_shared<nn::Dropout>(dropout),
                                                                  std::make_shared<nn::Linear>(16, 3)));
    hparams = {{"lr", lr}, {"hidden", 16}};
  }
  std::string name() const override { return "TinyClassifier"; }
  Tensor forward(const Tensor& x) override { return net->forward(x); }

  Tensor training_step(const data::Batch& b, int64_t) override {
    count["training_step"] += 1;
    EXPECT_TRUE(is_training());
    Tensor loss = cross_entropy(forward(b.input), b.target);
    if (nan_at_step >= 0 && global_step() == nan_at_step) loss = loss * std::nan("");
    log("train_loss", loss, {.prog_bar = true});
    return loss;
  }
  Tensor validation_step(const data::Batch& b, int64_t) override {
    count["validation_step"] += 1;
    EXPECT_FALSE(is_training());
    Tensor loss = cross_entropy(forward(b.input), b.target);
    log("val_loss", loss, {.prog_bar = true});
    if (scripted_val_loss.size() > size_t(current_epoch())) log("scripted", scripted_val_loss[size_t(current_epoch())]);
    return Tensor();
  }
  Tensor test_step(const data::Batch& b, int64_t) override {
    count["test_step"] += 1;
    log("test_loss", cross_entropy(forward(b.input), b.target));
    return Tensor();
  }
  OptimizerConfig configure_optimizers() override {
    OptimizerConfig c;
    c.optimizer = std::make_shared<optim::Adam>(parameters(), optim::AdamOptions{.lr = lr});
    if (use_scheduler) c.scheduler = std::make_shared<optim::StepLR>(*c.optimizer, 2, 0.5);
    c.interval = scheduler_interval;
    return c;
  }
  void on_train_epoch_start() override { count["on_train_epoch_start"] += 1; }
  void on_train_epoch_end() override { count["on_train_epoch_end"] += 1; }
  void on_validation_epoch_start() override { count["on_validation_epoch_start"] += 1; }
  void on_validation_epoch_end() override { count["on_validation_epoch_end"] += 1; }
  void on_before_optimizer_step(optim::Optimizer&) override { count["optimizer_step"] += 1; }
  void on_fit_start() override { count["on_fit_start"] += 1; }
  void on_fit_end() override { count["on_fit_end"] += 1; }

  // dp's copies: the same architecture and settings (weights are copied by the strategy).
  std::shared_ptr<LightningModule> make_replica() const override {
    auto replica = std::make_shared<TinyClassifier>(lr, dropout);
    replica->use_scheduler = use_scheduler;
    replica->scheduler_interval = scheduler_interval;
    return replica;
  }
  std::shared_ptr<nn::Sequential> net;
  double lr;
  double dropout;
  bool use_scheduler = true;
  std::string scheduler_interval = "epoch";
  int64_t nan_at_step = -1;
  std::vector<double> scripted_val_loss;  // per epoch, logged as "scripted" for monitors
  std::map<std::string, int> count;
};

// A fresh directory under the system temp dir, removed at the end of the test. The process id
// keeps it apart from the same test run at the same time by another checkout's suite.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = (std::filesystem::temp_directory_path() /
            ("tandem_trainer_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" +
             std::to_string(getpid())))
               .string();
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

// Quiet CPU options writing under root.
inline TrainerOptions quiet_options(const std::string& root) {
  TrainerOptions o;
  o.accelerator = "cpu";
  o.devices = 1;
  o.default_root_dir = root;
  o.enable_progress_bar = false;
  o.enable_model_summary = false;
  o.enable_checkpointing = false;
  return o;
}

// max over i of |a[i] - b[i]| / max(|b[i]|, 0.1): relative, with a floor so weights near zero
// (where Adam magnifies rounding differences of tiny gradients) are compared absolutely.
inline double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, std::fabs(double(a[i]) - b[i]) / std::max(0.1, std::fabs(double(b[i]))));
  return worst;
}

inline std::vector<float> flat_weights(const nn::Module& m) {
  std::vector<float> out;
  for (const auto& p : m.parameters()) {
    const auto v = p.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Counts the hooks a callback sees.
class CountingCallback : public Callback {
 public:
  std::string name() const override { return "CountingCallback"; }
  void on_train_epoch_start(Trainer&, LightningModule&) override { count["train_epoch_start"] += 1; }
  void on_train_batch_end(Trainer&, LightningModule&, const Tensor&, const data::Batch&, int64_t) override {
    count["train_batch_end"] += 1;
  }
  void on_validation_end(Trainer& t, LightningModule&) override {
    count[t.sanity_checking() ? "sanity_validation_end" : "validation_end"] += 1;
  }
  void on_sanity_check_start(Trainer&, LightningModule&) override { count["sanity_check_start"] += 1; }
  void on_before_optimizer_step(Trainer&, LightningModule&, optim::Optimizer&) override {
    count["before_optimizer_step"] += 1;
  }
  // After clipping and the step, before zero_grad: the gradients the step used.
  void on_before_zero_grad(Trainer&, LightningModule& m, optim::Optimizer&) override {
    if (record_grad_norm) {
      double s = 0;
      for (const auto& p : m.parameters()) {
        if (!p.grad().defined()) continue;
        for (float g : p.grad().to_vector<float>()) s += double(g) * g;
      }
      grad_norms.push_back(std::sqrt(s));
      double biggest = 0;
      for (const auto& p : m.parameters()) {
        if (!p.grad().defined()) continue;
        for (float g : p.grad().to_vector<float>()) biggest = std::max(biggest, double(std::fabs(g)));
      }
      grad_max_abs.push_back(biggest);
    }
  }
  bool record_grad_norm = false;
  std::vector<double> grad_norms, grad_max_abs;
  std::map<std::string, int> count;
};

}  // namespace tandem::trainer::testing
