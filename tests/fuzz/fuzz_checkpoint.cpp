// Fuzz target: checkpoints (engine/trainer/checkpoint.cpp and the Trainer's restore,
// checkpoint_connector.cpp), as `tandem fit --ckpt_path=FILE` and `tandem validate
// --ckpt_path=FILE` read them. Input: the checkpoint file's bytes. A tiny model (Linear 4->3,
// Adam, StepLR) with ModelCheckpoint and EarlyStopping resumes fit from the file (max_epochs=2,
// 8 examples in batches of 4), then validates from it. Allowed outcomes besides success: DataError (a
// malformed file), StateDictError (weights of another model), ConfigError (state written by
// another optimizer). The run writes under fuzz_checkpoint_run/ in the working directory,
// a relative path so that the checkpoints' recorded paths (ModelCheckpoint's state) match the
// seeds' on every machine; the directory is removed after each input.
#include <cstdint>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/data/data_loader.h"
#include "engine/data/data_module.h"
#include "engine/data/tensor_dataset.h"
#include "engine/nn/nn.h"
#include "engine/ops/ops.h"
#include "engine/optim/adam.h"
#include "engine/optim/lr_scheduler.h"
#include "engine/tensor/generator.h"
#include "engine/trainer/callbacks/early_stopping.h"
#include "engine/trainer/callbacks/model_checkpoint.h"
#include "engine/trainer/trainer.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

using namespace tandem;

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

trainer::TrainerOptions options(const std::string& root) {
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

template <typename Body>
void expecting_checkpoint_errors(Body&& body) {
  try {
    body();
  } catch (const DataError&) {
  } catch (const StateDictError&) {
  } catch (const ConfigError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchFile file("checkpoint.safetensors");
  static const std::string root = "fuzz_checkpoint_run";
  const std::string& path = file.write(data, size);
  manual_seed(0);
  TinyData datamodule;
  expecting_checkpoint_errors([&] {
    TinyModule model;
    trainer::Trainer trainer(options(root));
    trainer.fit(model, datamodule, path);
  });
  expecting_checkpoint_errors([&] {
    TinyModule model;
    trainer::Trainer trainer(options(root));
    trainer.validate(model, datamodule, path, false);
  });
  std::filesystem::remove_all(root);
  return 0;
}
