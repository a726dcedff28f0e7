// LightningModule: a model plus how to train, validate, test and predict with it, in
// Lightning's shape. It is an nn::Module (parameters, buffers, state_dict come from there);
// the Trainer drives the loops and calls these hooks. Modules never name a device: new tensors
// follow an input (type_as / to(device())). A module knows the Trainer only through ModuleHost
// (below), so strategies, which run its steps, sit below the Trainer.
//
//   class MyModel : public trainer::LightningModule {
//     Tensor training_step(const data::Batch& b, int64_t i) override {
//       Tensor loss = cross_entropy(net->forward(b.input), b.target);
//       log("train_loss", loss, {.prog_bar = true});
//       return loss;
//     }
//     OptimizerConfig configure_optimizers() override { ... }
//   };
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "engine/data/batch.h"
#include "engine/module/metrics_sink.h"
#include "engine/nn/module.h"
#include "engine/optim/lr_scheduler.h"
#include "engine/optim/optimizer.h"
#include "nlohmann/json.hpp"

namespace tandem::trainer {

class Trainer;

// What a LightningModule asks of the loop that runs it (the Trainer implements it): where its
// log calls go, the loop's counters, whether this process is rank 0, the strategy's all_gather,
// and the Trainer itself for modules that reach for it (Lightning's self.trainer).
class ModuleHost {
 public:
  virtual MetricsSink& metrics() = 0;
  virtual int64_t global_step() const = 0;
  virtual int64_t current_epoch() const = 0;
  virtual bool is_global_zero() const = 0;
  virtual Tensor all_gather(const Tensor& tensor) = 0;
  virtual Trainer* trainer() = 0;

 protected:
  ~ModuleHost() = default;
};

// What configure_optimizers returns: an optimizer and an optional scheduler stepped every
// `frequency` optimizer steps ("step") or epochs ("epoch"), Lightning's lr_scheduler dict.
struct OptimizerConfig {
  std::shared_ptr<optim::Optimizer> optimizer;
  std::shared_ptr<optim::LRScheduler> scheduler;
  std::string interval = "epoch";  // "step" | "epoch"
  int64_t frequency = 1;
  std::string monitor;             // reserved for ReduceLROnPlateau-style schedulers
};

class LightningModule : public nn::Module {
 public:
  // ---- steps: return the loss (training), the step's outputs (validation, test: for
  // validation_step_end / test_step_end; undefined when there are none) or what predict
  // produces; may return undefined ----
  virtual Tensor training_step(const data::Batch& batch, int64_t batch_idx) = 0;
  virtual Tensor validation_step(const data::Batch& batch, int64_t batch_idx) { return Tensor(); }
  virtual Tensor test_step(const data::Batch& batch, int64_t batch_idx) { return Tensor(); }
  virtual Tensor predict_step(const data::Batch& batch, int64_t batch_idx) { return forward(batch.input); }
  virtual OptimizerConfig configure_optimizers() = 0;
  // Lightning's training_step_end, called with training_step's outputs for the whole batch:
  // under dp/ddp2 the outputs of every device concatenated along dim 0 on the root device (0-d
  // outputs stacked into [devices]); with one device, training_step's output as it is. `batch` is
  // the whole batch on the root device (C++ has no dict outputs to carry the targets). Return the
  // loss; nullopt (the default: not defined) keeps training_step's loss (dp: the per-device losses
  // weighted by their share of the batch, which equals one device at the whole batch).
  virtual std::optional<Tensor> training_step_end(const Tensor& /*outputs*/, const data::Batch& /*batch*/) {
    return std::nullopt;
  }
  // Lightning's validation_step_end / test_step_end: the same gathering of the step's outputs
  // for the whole batch (called only when the step returned outputs), for metrics that need the
  // whole batch at once; what they log counts for the whole batch.
  virtual void validation_step_end(const Tensor& /*outputs*/, const data::Batch& /*batch*/) {}
  virtual void test_step_end(const Tensor& /*outputs*/, const data::Batch& /*batch*/) {}
  // dp/ddp2 run a copy of the model on every device: a new module of the same architecture (its
  // weights and buffers are then copied from this one). nullptr (the default): not replicable,
  // and dp says so.
  virtual std::shared_ptr<LightningModule> make_replica() const { return nullptr; }

  // ---- hooks (Lightning's names) ----
  virtual void on_fit_start() {}
  virtual void on_fit_end() {}
  virtual void on_train_epoch_start() {}
  virtual void on_train_epoch_end() {}
  virtual void on_validation_epoch_start() {}
  virtual void on_validation_epoch_end() {}
  virtual void on_test_epoch_start() {}
  virtual void on_test_epoch_end() {}
  virtual void on_train_batch_start(const data::Batch& batch, int64_t batch_idx) {}
  virtual void on_train_batch_end(const Tensor& loss, const data::Batch& batch, int64_t batch_idx) {}
  virtual void on_before_optimizer_step(optim::Optimizer& optimizer) {}
  // More of Lightning's hooks; the trainer calls each after the callbacks' hook of that name.
  virtual void setup(const std::string& stage) {}     // "fit", "validate", "test", "predict"
  virtual void teardown(const std::string& stage) {}
  virtual void on_train_start() {}
  virtual void on_train_end() {}
  virtual void on_validation_start() {}
  virtual void on_validation_end() {}
  virtual void on_test_start() {}
  virtual void on_test_end() {}
  virtual void on_predict_start() {}
  virtual void on_predict_end() {}
  virtual void on_validation_batch_start(const data::Batch& batch, int64_t batch_idx) {}
  virtual void on_validation_batch_end(const data::Batch& batch, int64_t batch_idx) {}
  virtual void on_test_batch_start(const data::Batch& batch, int64_t batch_idx) {}
  virtual void on_test_batch_end(const data::Batch& batch, int64_t batch_idx) {}
  virtual void on_before_backward(const Tensor& loss) {}
  virtual void on_after_backward() {}
  virtual void on_before_zero_grad(optim::Optimizer& optimizer) {}
  // Extra state of the module's own in checkpoints (trainer_state["module"]).
  virtual void on_save_checkpoint(nlohmann::json& module_state) {}
  virtual void on_load_checkpoint(const nlohmann::json& module_state) {}

  // ---- logging: forwarded to the host's metrics sink; a no-op when no host is attached ----
  // A tensor value must hold one element (ValueError otherwise); it is read as a double.
  void log(const std::string& name, const Tensor& value, const LogOptions& options = {});
  void log(const std::string& name, double value, const LogOptions& options = {});
  void log_dict(const std::map<std::string, Tensor>& values, const LogOptions& options = {});
  void log_dict(const std::map<std::string, double>& values, const LogOptions& options = {});

  // Log calls made on this thread while a LogCapture lives are recorded into it instead of
  // reaching the trainer (dp's device threads; the strategy merges them for the whole batch).
  struct LoggedValue {
    std::string name;
    double value = 0.0;
    LogOptions options;
  };
  class LogCapture {
   public:
    LogCapture();
    ~LogCapture();
    LogCapture(const LogCapture&) = delete;
    LogCapture& operator=(const LogCapture&) = delete;
    std::vector<LoggedValue> values;

   private:
    LogCapture* previous_;
  };

  // Lightning's all_gather: `tensor` from every rank stacked as [world_size, *shape] in rank
  // order (the same shape on every rank; no gradient). Without a host: [1, *shape].
  Tensor all_gather(const Tensor& tensor) const;

  // ---- state the trainer keeps current ----
  Device device() const { return nn::Module::device(); }
  int64_t global_step() const;
  int64_t current_epoch() const;
  bool is_global_zero() const;
  // The Trainer running this module; nullptr when none is attached.
  Trainer* trainer() const { return host_ ? host_->trainer() : nullptr; }
  ModuleHost* host() const { return host_; }
  void attach_host(ModuleHost* host) { host_ = host; }

  // Hyper-parameters saved to hparams.yaml and checkpoints (Lightning's save_hyperparameters).
  nlohmann::json hparams = nlohmann::json::object();

 private:
  ModuleHost* host_ = nullptr;
};

}  // namespace tandem::trainer
