// ImageClassifier: the LightningModule shared by the MLP and the CNN. It owns `net` (an
// nn::Sequential, so state_dict names read "net.0.weight" as in a Lightning module with
// `self.net = nn.Sequential(...)`), trains with cross_entropy, logs the metrics every model
// here logs under the same names (train_loss, val_loss, val_acc, test_loss, test_acc), and
// builds its optimizer and scheduler from the config's optimizer/lr_scheduler sections.
//
// Inputs may come flat ([B, 784]) or as images ([B, 1, 28, 28]); each model reshapes what it
// needs in prepare_input, so one data module serves every model.
#pragma once
#include <functional>
#include <memory>

#include <yaml-cpp/yaml.h>

#include "engine/module/lightning_module.h"
#include "engine/nn/sequential.h"

namespace tandem::models {

// The resolved `optimizer` and `lr_scheduler` config sections (see engine/config/optimizer_section.h).
struct OptimizationConfig {
  YAML::Node optimizer;     // a map with name and the class's options
  YAML::Node lr_scheduler;  // null: no scheduler
  // Adam, lr 1e-3, no scheduler: the C++ default and the benchmarks' setup (the CLI adds
  // a cosine schedule by default, apps/tandem/run_config.cpp).
  static OptimizationConfig defaults();
  // `optimizer` with the lr_scheduler section's schedule. A schedule over "the whole run"
  // (CosineAnnealingLR with T_max null) spans `trainer`'s limits, as Lightning modules write
  // T_max=self.trainer.max_epochs; without a trainer the run has no limit.
  trainer::OptimizerConfig with_scheduler(std::shared_ptr<optim::Optimizer> optimizer,
                                          const trainer::Trainer* trainer) const;
};

class ImageClassifier : public trainer::LightningModule {
 public:
  Tensor forward(const Tensor& input) override;  // logits [B, classes]
  Tensor training_step(const data::Batch& batch, int64_t batch_idx) override;
  Tensor validation_step(const data::Batch& batch, int64_t batch_idx) override;
  Tensor test_step(const data::Batch& batch, int64_t batch_idx) override;
  trainer::OptimizerConfig configure_optimizers() override;
  // dp/ddp2's copies: a model built again from the same configuration (make_model sets it).
  std::shared_ptr<trainer::LightningModule> make_replica() const override {
    return replica_factory ? replica_factory() : nullptr;
  }

  std::shared_ptr<nn::Sequential> net;
  std::function<std::shared_ptr<trainer::LightningModule>()> replica_factory;

 protected:
  explicit ImageClassifier(OptimizationConfig optimization);
  // The input as this model's first layer wants it.
  virtual Tensor prepare_input(const Tensor& input) const = 0;
  // Records the optimizer and scheduler sections in hparams (hparams.yaml, checkpoints).
  void record_optimization_hparams();

 private:
  // Loss and accuracy of one evaluation batch, logged as <stage>_loss and <stage>_acc.
  void evaluate(const data::Batch& batch, const std::string& stage);

  OptimizationConfig optimization_;
};

// Fraction of rows whose largest logit is at the target class (a float32 scalar, no grad).
Tensor accuracy(const Tensor& logits, const Tensor& target);

}  // namespace tandem::models
