// The tiny training run the checkpoint fuzz targets resume (fuzz_checkpoint.cpp,
// fuzz_checkpoint_state.cpp): Linear 4->3, Adam, StepLR, ModelCheckpoint and EarlyStopping on
// val_loss, 8 examples in batches of 4, max_epochs=2, writing under `root`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/data/data_loader.h"
#include "engine/data/data_module.h"
#include "engine/data/tensor_dataset.h"
#include "engine/nn/nn.h"
#include "engine/optim/adam.h"
#include "engine/optim/lr_scheduler.h"
#include "engine/trainer/callbacks/early_stopping.h"
#include "engine/trainer/callbacks/model_checkpoint.h"
#include "engine/trainer/trainer.h"
#include "tensor/generator.h"
#include "tensor/ops/ops.h"

namespace tandem::fuzz {

class TinyModule : public trainer::LightningModule {
 public:
  TinyModule() { linear = register_module("linear", std::make_shared<nn::Linear>(4, 3)); }
  std::string name() const override { return "TinyModule"; }
  Tensor forward(const Tensor& x) override { return linear->forward(x); }
  Tensor training_step(const data::Batch& b, int64_t) override { return cross_entropy(forward(b.input), b.target); }
  Tensor validation_step(const data::Batch& b, int64_t) override {
    log("val_loss", cross_entropy(forward(b.input), b.target));
    return Tensor();
  }
  trainer::OptimizerConfig configure_optimizers() override {
    trainer::OptimizerConfig c;
    c.optimizer = std::make_shared<optim::Adam>(parameters(), optim::AdamOptions{.lr = 0.01});
    c.scheduler = std::make_shared<optim::StepLR>(*c.optimizer, 2, 0.5);
    return c;
  }
  std::shared_ptr<nn::Linear> linear;
};

class TinyData : public data::DataModule {
 public:
  void setup(const std::string&) override {}
  std::shared_ptr<data::DataLoader> train_dataloader() override { return loader(); }
  std::shared_ptr<data::DataLoader> val_dataloader() override { return loader(); }
  std::shared_ptr<data::DataLoader> test_dataloader() override { return loader(); }

 private:
  std::shared_ptr<data::DataLoader> loader() {
    std::vector<float> x(8 * 4);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7) - 3.0f;
    auto dataset = std::make_shared<data::TensorDataset>(
        Tensor::from_vector(x, {8, 4}), Tensor::from_vector<int64_t>({0, 1, 2, 0, 1, 2, 0, 1}, {8}));
    data::DataLoaderOptions o;
    o.batch_size = 4;
    o.prefetch = 0;
    return std::make_shared<data::DataLoader>(dataset, o);
  }
};

inline trainer::TrainerOptions tiny_run_options(const std::string& root) {
  trainer::TrainerOptions o;
  o.accelerator = "cpu";
  o.devices = 1;
  o.default_root_dir = root;
  o.max_epochs = 2;
  o.num_sanity_val_steps = 0;
  o.enable_progress_bar = false;
  o.enable_model_summary = false;
  trainer::ModelCheckpointOptions mc;
  mc.dirpath = root + "/checkpoints";
  mc.monitor = "val_loss";
  mc.save_top_k = 1;
  trainer::EarlyStoppingOptions es;
  es.monitor = "val_loss";
  o.callbacks = {std::make_shared<trainer::ModelCheckpoint>(mc), std::make_shared<trainer::EarlyStopping>(es)};
  return o;
}

// Runs body; the errors a bad checkpoint may rightly cause end it quietly.
template <typename Body>
void expecting_checkpoint_errors(Body&& body) {
  try {
    body();
  } catch (const DataError&) {
  } catch (const StateDictError&) {
  } catch (const ConfigError&) {
  }
}


// Resumes fit from the checkpoint at path, then validates from it, each with a fresh model.
inline void resume_tiny_run(const std::string& path, const std::string& root) {
  manual_seed(0);
  TinyData datamodule;
  expecting_checkpoint_errors([&] {
    TinyModule model;
    trainer::Trainer trainer(tiny_run_options(root));
    trainer.fit(model, datamodule, path);
  });
  expecting_checkpoint_errors([&] {
    TinyModule model;
    trainer::Trainer trainer(tiny_run_options(root));
    trainer.validate(model, datamodule, path, false);
  });
}

}  // namespace tandem::fuzz
