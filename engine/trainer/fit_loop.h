// FitLoop: the Trainer's fit, Lightning's fit loop (loops/fit_loop.py and its training epoch
// loop). Epochs of training batches, each handed to the strategy in one call
// (Strategy::run_training_step), with gradient accumulation, clipping, scheduler steps,
// validation at val_check_interval / check_val_every_n_epoch, and the stopping rules
// (max_epochs, max_steps, should_stop). Lightning's order of events, per batch:
//   on_train_batch_start -> training_step -> backward (loss / accumulate_grad_batches)
//   -> [step boundary: on_before_optimizer_step -> clip -> optimizer.step -> zero_grad
//       -> step-interval scheduler] -> on_train_batch_end -> step metrics to the loggers
//   -> validation when due
// and per epoch: epoch-interval scheduler (after the last batch) -> on_train_epoch_end
// (module, then the epoch metrics, then callbacks: ModelCheckpoint saves here).
// The strategy runs the batch; this loop is its TrainingStepHooks (the callbacks, the watchdog,
// the finite-loss check and clipping) and keeps the counters.
#pragma once
#include <cstdint>
#include <string>

#include "engine/strategies/training_step_hooks.h"

namespace tandem::data { class DataLoader; }

namespace tandem::trainer {

class Trainer;

class FitLoop : private TrainingStepHooks {
 public:
  explicit FitLoop(Trainer& trainer) : trainer_(trainer) {}

  // The trainer's fit, from the sanity check to on_train_end.
  void run();
  // Between the batches of an accumulated step (accumulate_grad_batches > 1): gradients are
  // partial and no checkpoint could hold them.
  bool accumulating_gradients() const { return accumulated_batches_ > 0; }
  // This fit's per-rank training batch size (0 before the loop starts).
  int64_t train_batch_size() const { return train_batch_size_; }

 private:
  // num_training_batches, the validation interval and the resume position for this fit.
  void plan_batches(data::DataLoader& train_loader, data::DataLoader* val_loader);
  void say_why_nothing_trains(const data::DataLoader& train_loader);
  void run_epoch(data::DataLoader& train_loader, data::DataLoader* val_loader);
  // Returns whether the batch ended an optimizer step.
  bool run_batch(const data::Batch& host_batch, int64_t batch_idx, bool is_last);
  // What follows a batch's on_train_batch_end: the epoch-interval scheduler step after the last
  // batch, then validation when due.
  void after_batch(int64_t batch_idx, bool is_last, data::DataLoader* val_loader);
  void finish_epoch();
  bool should_validate_after_batch(int64_t batch_idx) const;
  void step_schedulers(const std::string& interval);
  bool max_steps_reached() const;
  bool done() const;

  // TrainingStepHooks: the strategy calls these during run_batch's step.
  void enter(const char* phase, bool waits_for_peers) override;
  void on_batch_start(const data::Batch& batch) override;
  void check_finite_loss(double value) override;
  void on_before_backward(const Tensor& loss) override;
  void on_after_backward() override;
  void on_before_optimizer_step(optim::Optimizer& optimizer, bool skipping) override;
  void on_before_zero_grad(optim::Optimizer& optimizer) override;

  Trainer& trainer_;
  int64_t val_check_batch_ = 0;      // validate after this many batches (0: never)
  int64_t accumulated_batches_ = 0;  // backwards since the last optimizer step
  int64_t train_batch_size_ = 0;
  int64_t batch_idx_ = 0;            // the batch being trained
};

}  // namespace tandem::trainer
