// Callback: code that hooks into the Trainer's loops without being part of the model
// (Lightning's Callback). Every hook does nothing by default; override the ones you need.
// Callbacks with state (ModelCheckpoint, EarlyStopping) return it from state_dict() and get it
// back from load_state_dict() when a run resumes; state_key() tells instances apart in the
// checkpoint, so two ModelCheckpoints with different monitors keep separate states.
#pragma once
#include <cstdint>
#include <string>

#include "engine/data/batch.h"
#include "engine/optim/optimizer.h"
#include "nlohmann/json.hpp"

namespace tandem::trainer {

class Trainer;
class LightningModule;

class Callback {
 public:
  virtual ~Callback() = default;

  // Class name, used in messages and as the default state key.
  virtual std::string name() const = 0;
  virtual std::string state_key() const { return name(); }
  virtual nlohmann::json state_dict() const { return nlohmann::json::object(); }
  virtual void load_state_dict(const nlohmann::json& /*state*/) {}
  // Callbacks that read callback_metrics to decide (ModelCheckpoint, EarlyStopping) run after
  // the module's epoch-end hooks, once the epoch's metrics are computed (Lightning's order).
  virtual bool is_monitoring() const { return false; }

  // stage: "fit", "validate", "test" or "predict".
  virtual void setup(Trainer&, LightningModule&, const std::string& /*stage*/) {}
  virtual void teardown(Trainer&, LightningModule&, const std::string& /*stage*/) {}

  virtual void on_fit_start(Trainer&, LightningModule&) {}
  virtual void on_fit_end(Trainer&, LightningModule&) {}
  virtual void on_sanity_check_start(Trainer&, LightningModule&) {}
  virtual void on_sanity_check_end(Trainer&, LightningModule&) {}

  virtual void on_train_start(Trainer&, LightningModule&) {}
  virtual void on_train_end(Trainer&, LightningModule&) {}
  virtual void on_train_epoch_start(Trainer&, LightningModule&) {}
  virtual void on_train_epoch_end(Trainer&, LightningModule&) {}
  virtual void on_train_batch_start(Trainer&, LightningModule&, const data::Batch&, int64_t /*batch_idx*/) {}
  // loss: what training_step returned (before the 1/accumulate_grad_batches scaling).
  virtual void on_train_batch_end(Trainer&, LightningModule&, const Tensor& /*loss*/, const data::Batch&,
                                  int64_t /*batch_idx*/) {}

  virtual void on_validation_start(Trainer&, LightningModule&) {}
  virtual void on_validation_end(Trainer&, LightningModule&) {}
  virtual void on_validation_epoch_start(Trainer&, LightningModule&) {}
  virtual void on_validation_epoch_end(Trainer&, LightningModule&) {}
  virtual void on_validation_batch_start(Trainer&, LightningModule&, const data::Batch&, int64_t) {}
  virtual void on_validation_batch_end(Trainer&, LightningModule&, const data::Batch&, int64_t) {}

  virtual void on_test_start(Trainer&, LightningModule&) {}
  virtual void on_test_end(Trainer&, LightningModule&) {}
  virtual void on_test_epoch_start(Trainer&, LightningModule&) {}
  virtual void on_test_epoch_end(Trainer&, LightningModule&) {}
  virtual void on_test_batch_start(Trainer&, LightningModule&, const data::Batch&, int64_t) {}
  virtual void on_test_batch_end(Trainer&, LightningModule&, const data::Batch&, int64_t) {}

  virtual void on_predict_start(Trainer&, LightningModule&) {}
  virtual void on_predict_end(Trainer&, LightningModule&) {}
  virtual void on_predict_batch_start(Trainer&, LightningModule&, const data::Batch&, int64_t) {}
  virtual void on_predict_batch_end(Trainer&, LightningModule&, const Tensor& /*prediction*/,
                                    const data::Batch&, int64_t) {}

  virtual void on_before_backward(Trainer&, LightningModule&, const Tensor& /*loss*/) {}
  virtual void on_after_backward(Trainer&, LightningModule&) {}
  // Gradients are final (accumulated, and reduced across ranks with DDP), not yet clipped.
  virtual void on_before_optimizer_step(Trainer&, LightningModule&, optim::Optimizer&) {}
  virtual void on_before_zero_grad(Trainer&, LightningModule&, optim::Optimizer&) {}

  // Adds to / reads from the checkpoint's trainer_state (besides state_dict()).
  virtual void on_save_checkpoint(Trainer&, LightningModule&, nlohmann::json& /*trainer_state*/) {}
  virtual void on_load_checkpoint(Trainer&, LightningModule&, const nlohmann::json& /*trainer_state*/) {}

  // Training stopped by an exception (NaN loss, a data error, ...); it is rethrown afterwards.
  virtual void on_exception(Trainer&, LightningModule&, const std::exception&) {}
};

}  // namespace tandem::trainer
