// EvaluationLoop: validation, test, the sanity check and predict (Lightning's evaluation and
// prediction loops). The module in eval mode, no autograd graph, batches through the strategy,
// metrics aggregated per epoch. During fit, validation returns the module to train mode
// afterwards.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/module/lightning_module.h"
#include "engine/trainer/logger_connector.h"
#include "engine/trainer/trainer_options.h"
#include "tensor/tensor.h"

namespace tandem::data { class DataLoader; }

namespace tandem::trainer {

class Trainer;

// The batches a loop runs of `available` under a limit_*_batches option: a count, or a fraction
// rounded down (ConfigError when a positive fraction leaves none).
int64_t limited_batches(const BatchCount& limit, int64_t available, const char* option);

class EvaluationLoop {
 public:
  explicit EvaluationLoop(Trainer& trainer) : trainer_(trainer) {}

  // A validation (or sanity-check) or test epoch of num_batches; returns its epoch metrics.
  std::map<std::string, double> run(RunningStage stage, data::DataLoader& loader, int64_t num_batches);
  // Before fit's first epoch: num_sanity_val_steps validation batches, whose metrics are thrown away.
  void run_sanity_check(data::DataLoader* val_loader);
  // predict_step's outputs, one per batch, detached.
  std::vector<Tensor> run_predict(data::DataLoader& loader, int64_t num_batches);

 private:
  Trainer& trainer_;
};

}  // namespace tandem::trainer
