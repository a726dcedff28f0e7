// The fit loop: epochs of training batches with gradient accumulation, clipping, optimizer
// and scheduler steps, validation at val_check_interval / check_val_every_n_epoch, and the
// stopping rules (max_epochs, max_steps, should_stop). Lightning's order of events, per batch:
//   on_train_batch_start -> training_step -> backward (loss / accumulate_grad_batches)
//   -> [step boundary: on_before_optimizer_step -> clip -> optimizer.step -> zero_grad
//       -> step-interval scheduler] -> on_train_batch_end -> step metrics to the loggers
//   -> validation when due
// and per epoch: epoch-interval scheduler (after the last batch) -> on_train_epoch_end
// (module, then the epoch metrics, then callbacks: ModelCheckpoint saves here).
#include <cmath>
#include <cstdio>

#include "engine/autograd/grad_mode.h"
#include "engine/core/error.h"
#include "engine/data/data_loader.h"
#include "engine/ops/ops.h"
#include "engine/optim/clip_grad.h"
#include "engine/trainer/trainer.h"

namespace tandem::trainer {

bool Trainer::max_steps_reached() const {
  return options_.max_steps != -1 && progress_.global_step >= options_.max_steps;
}

bool Trainer::done_fitting() const {
  if (should_stop || max_steps_reached()) return true;
  return max_epochs_ != -1 && progress_.epoch >= max_epochs_;
}

void Trainer::run_fit() {
  auto train_loader = datamodule_->train_dataloader();
  TANDEM_CHECK(train_loader != nullptr, ConfigError, "fit: the datamodule returned no train_dataloader(); give it one");
  auto val_loader = datamodule_->val_dataloader();
  shard_for_ranks(*train_loader, RunningStage::Train);
  if (val_loader) shard_for_ranks(*val_loader, RunningStage::Validate);
  if ((world_size() > 1 || strategy_->devices_per_process() > 1) && is_global_zero()) {
    // The seeds' rule: ddp multiplies the batch by the processes, dp splits it over its devices.
    std::printf("%s; each rank trains on %lld of the %lld examples\n",
                strategy_->describe_batch(train_loader->batch_size(), options_.accumulate_grad_batches).c_str(),
                static_cast<long long>(train_loader->sampler().size()),
                static_cast<long long>(train_loader->dataset().size()));
    std::fflush(stdout);
  }
  num_training_batches_ = limited_batches(options_.limit_train_batches, train_loader->num_batches(), "limit_train_batches");
  train_batch_size_ = train_loader->batch_size();
  rescale_resume_position(train_batch_size_);
  num_val_batches_ = val_loader ? limited_batches(options_.limit_val_batches, val_loader->num_batches(), "limit_val_batches") : 0;

  val_check_batch_ = 0;
  if (num_val_batches_ > 0) {
    if (options_.val_check_interval.is_count()) {
      val_check_batch_ = options_.val_check_interval.count();
      if (options_.check_val_every_n_epoch && val_check_batch_ > num_training_batches_) {
        throw ConfigError("trainer option val_check_interval=" + std::to_string(val_check_batch_) +
                          " is more than the " + std::to_string(num_training_batches_) +
                          " training batches of an epoch; lower it, or set check_val_every_n_epoch=null to count "
                          "batches across epochs");
      }
    } else {
      val_check_batch_ = std::max<int64_t>(1, static_cast<int64_t>(double(num_training_batches_) * options_.val_check_interval.fraction()));
    }
  }

  run_sanity_check(val_loader.get());
  // cuda_graph: the strategy's steps run through a CUDA graph executor (Trainer checked that the
  // strategy can capture them).
  strategy_->set_step_executor(options_.cuda_graph
                                   ? std::make_unique<CudaGraphStep>(strategy_->root_device().index, logger_connector_)
                                   : nullptr);
  stage_ = RunningStage::Train;
  for_each_callback([&](Callback& cb) { cb.on_train_start(*this, *module_); });
  module_->on_train_start();
  // A fit that will train nothing says why (Lightning's "`Trainer.fit` stopped: ..." lines).
  if (num_training_batches_ == 0) {
    should_stop = true;
    if (is_global_zero()) {
      std::printf("Tandem: `fit` stopped: no training batches (limit_train_batches leaves 0 of the %lld); nothing "
                  "was trained\n", static_cast<long long>(train_loader->num_batches()));
    }
  } else if (done_fitting() && is_global_zero()) {
    if (max_steps_reached()) {
      std::printf("Tandem: `fit` stopped: `max_steps=%lld` reached before any training (the run is at global step "
                  "%lld); nothing was trained\n", static_cast<long long>(options_.max_steps),
                  static_cast<long long>(progress_.global_step));
    } else {
      std::printf("Tandem: `fit` stopped: `max_epochs=%lld` reached before any training (the run is at epoch %lld); "
                  "nothing was trained\n", static_cast<long long>(max_epochs_), static_cast<long long>(progress_.epoch));
    }
  }
  while (!done_fitting()) {
    run_train_epoch(*train_loader, val_loader.get());
    // current_epoch counts epochs run, also one cut short by max_steps or should_stop
    // (Lightning); checkpoints saved inside the epoch recorded where it stood.
    progress_.epoch += 1;
    progress_.batch_in_epoch = 0;
    progress_.epoch_finished = false;
  }
  if (StepExecutor* executor = strategy_->step_executor()) executor->release();
  for_each_callback([&](Callback& cb) { cb.on_train_end(*this, *module_); });
  module_->on_train_end();
}

bool Trainer::should_validate_after_batch(int64_t batch_idx, bool /*is_last_batch*/) const {
  if (val_check_batch_ == 0) return false;
  if (options_.check_val_every_n_epoch && (progress_.epoch + 1) % *options_.check_val_every_n_epoch != 0) return false;
  // Without check_val_every_n_epoch, an int interval counts batches over the whole run.
  const int64_t iteration = options_.check_val_every_n_epoch ? batch_idx : progress_.total_batch_idx - 1;
  return (iteration + 1) % val_check_batch_ == 0;
}

void Trainer::run_train_epoch(data::DataLoader& train_loader, data::DataLoader* val_loader) {
  stage_ = RunningStage::Train;
  module_->train();
  logger_connector_.begin_epoch(RunningStage::Train);
  const int64_t skip = std::min(resume_skip_batches_, num_training_batches_);
  const bool resume_after_batch = resume_after_batch_pending_ && skip > 0;
  resume_skip_batches_ = 0;
  resume_after_batch_pending_ = false;
  train_loader.start_epoch(progress_.epoch, skip);
  progress_.batch_in_epoch = skip;
  progress_.epoch_finished = false;
  accumulated_batches_ = 0;

  logger_connector_.set_context(RunningStage::Train, LogHook::TrainEpoch);
  for_each_callback([&](Callback& cb) { cb.on_train_epoch_start(*this, *module_); });
  module_->on_train_epoch_start();
  // Resumed from a checkpoint saved inside on_train_batch_end: that batch's after-batch work
  // had not run yet, so it runs now, as it did in the interrupted run.
  if (resume_after_batch) after_train_batch(skip - 1, skip == num_training_batches_, val_loader);

  for (int64_t batch_idx = skip; batch_idx < num_training_batches_ && !max_steps_reached() && !should_stop; ++batch_idx) {
    beat("waiting for the training batch", batch_idx);
    std::optional<data::Batch> batch = train_loader.next();
    if (!batch) {  // the loader ran short of what num_batches() promised: the epoch is over
      progress_.epoch_finished = true;
      break;
    }
    const bool is_last = batch_idx + 1 == num_training_batches_;
    const bool stepped = run_train_batch(*batch, batch_idx, is_last);
    after_train_batch(batch_idx, is_last, val_loader);
    if (stepped) progress_.batches_that_stepped += 1;
  }
  finish_train_epoch();
}

void Trainer::after_train_batch(int64_t batch_idx, bool is_last, data::DataLoader* val_loader) {
  if (is_last) progress_.epoch_finished = true;
  if (is_last) step_schedulers("epoch");  // after the last batch, before validation (Lightning)
  progress_.after_batch_pending = false;     // a checkpoint saved by this validation resumes after it
  if (should_validate_after_batch(batch_idx, is_last)) {
    run_evaluation(RunningStage::Validate, *val_loader, num_val_batches_);
    stage_ = RunningStage::Train;
    logger_connector_.set_context(RunningStage::Train, LogHook::TrainingStep);
  }
}

void Trainer::finish_train_epoch() {
  beat("the end of the training epoch (metric reduction, checkpoints)", progress_.batch_in_epoch, /*waits_for_peers=*/true);
  logger_connector_.set_context(RunningStage::Train, LogHook::TrainEpoch);
  module_->on_train_epoch_end();
  const Metrics rows = logger_connector_.end_epoch(RunningStage::Train);
  // Epoch metrics share the step of the epoch's last optimizer step (Lightning).
  log_step_rows(rows, std::max<int64_t>(progress_.batches_that_stepped - 1, 0));
  for_each_callback([&](Callback& cb) {
    if (!cb.is_monitoring()) cb.on_train_epoch_end(*this, *module_);
  });
  for_each_callback([&](Callback& cb) {
    if (cb.is_monitoring()) cb.on_train_epoch_end(*this, *module_);
  });
}

bool Trainer::run_train_batch(const data::Batch& host_batch, int64_t batch_idx, bool is_last) {
  const data::Batch batch = strategy_->training_batch(host_batch);
  logger_connector_.set_context(RunningStage::Train, LogHook::TrainingStep);
  logger_connector_.set_batch_size(batch.size());
  for_each_callback([&](Callback& cb) { cb.on_train_batch_start(*this, *module_, batch, batch_idx); });
  module_->on_train_batch_start(batch, batch_idx);

  beat("before_training_step (buffer broadcast)", batch_idx, /*waits_for_peers=*/true);
  strategy_->before_training_step(*module_);
  beat("training_step", batch_idx);
  accumulated_batches_ += 1;
  const bool will_step = accumulated_batches_ >= options_.accumulate_grad_batches || is_last;
  const Strategy::StepResult step = strategy_->execute_training_step(
      *module_, batch, batch_idx, [&] { return forward_backward(batch, batch_idx, will_step); });
  const Tensor loss = step.loss;
  if (step.backward_done && loss.defined()) {
    // Backward already ran (in the step executor: a CUDA graph or its warm-up): check the loss
    // now, and when it is not finite run the step's forward once more eagerly, with the host
    // checks the executor deferred (an out-of-range class index), so the error names the cause.
    const double value = loss.item();
    if (!std::isfinite(value)) {
      const Tensor eager = strategy_->training_step(*module_, batch, batch_idx);
      if (eager.defined() && eager.numel() == 1) check_finite_loss(eager.item(), batch_idx);
    }
    check_finite_loss(value, batch_idx);
  } else if (loss.defined()) {
    check_loss_shape(loss);
    check_finite_loss(loss.item(), batch_idx);
    backward_step(loss, will_step);
  }
  if (will_step) {
    beat("the optimizer step (gradient allreduce, clipping, update)", batch_idx, /*waits_for_peers=*/true);
    optimizer_step();
    accumulated_batches_ = 0;
    progress_.global_step += 1;
    step_schedulers("step");
  }
  // The batch is done: a checkpoint saved from on_train_batch_end resumes after it.
  progress_.batch_in_epoch = batch_idx + 1;
  progress_.total_batch_idx += 1;
  progress_.after_batch_pending = true;
  beat("on_train_batch_end hooks (checkpoints)", batch_idx, /*waits_for_peers=*/true);
  for_each_callback([&](Callback& cb) { cb.on_train_batch_end(*this, *module_, loss, batch, batch_idx); });
  module_->on_train_batch_end(loss, batch, batch_idx);

  const Metrics rows = logger_connector_.end_step(RunningStage::Train);
  // While accumulating nothing is logged; then every log_every_n_steps optimizer steps.
  if (will_step && ((progress_.batches_that_stepped + 1) % options_.log_every_n_steps == 0 || should_stop)) {
    log_step_rows(rows, progress_.batches_that_stepped);
  }
  return will_step;
}

// training_step, then backward when it returned a loss; what a step executor runs (a CUDA graph
// captures it).
Tensor Trainer::forward_backward(const data::Batch& batch, int64_t batch_idx, bool will_step) {
  const Tensor loss = strategy_->training_step(*module_, batch, batch_idx);
  if (!loss.defined()) return loss;
  check_loss_shape(loss);
  backward_step(loss, will_step);
  return loss;
}

void Trainer::check_loss_shape(const Tensor& loss) const {
  TANDEM_CHECK(loss.numel() == 1, ValueError,
               "training_step returned a tensor of shape " + loss.shape_str() + "; return the scalar loss (e.g. mean(...))");
}

void Trainer::check_finite_loss(double value, int64_t batch_idx) {
  // Every rank learns that one of them diverged, so all stop here together (no rank is left
  // waiting in the gradient allreduce).
  beat("the loss check across ranks", batch_idx, /*waits_for_peers=*/true);
  if (!strategy_->reduce_any(!std::isfinite(value))) return;
  const std::string what = std::isfinite(value) ? "a finite loss here, but another rank's loss was nan or inf"
                                                 : std::string("loss=") + (std::isnan(value) ? "nan" : "inf");
  const std::string where = world_size() > 1 ? " on rank " + std::to_string(global_rank()) + " of " + std::to_string(world_size()) : "";
  throw NonFiniteLossError("training_step returned " + what + where +
                           " at epoch " + std::to_string(progress_.epoch) + ", batch " + std::to_string(batch_idx) +
                           " (global step " + std::to_string(progress_.global_step) + "); stopped before the "
                           "optimizer step, so the weights and checkpoints are untouched. Lower the learning rate, "
                           "set gradient_clip_val, or check the inputs of that batch");
}

void Trainer::backward_step(const Tensor& loss, bool will_step) {
  beat("backward", progress_.batch_in_epoch);
  for_each_callback([&](Callback& cb) { cb.on_before_backward(*this, *module_, loss); });
  module_->on_before_backward(loss);
  // Accumulated gradients sum over the batches, so each loss is scaled to give their mean; the
  // strategy's precision plugin scales it further for 16-mixed.
  strategy_->backward(loss, 1.0 / double(options_.accumulate_grad_batches), will_step);
  for_each_callback([&](Callback& cb) { cb.on_after_backward(*this, *module_); });
  module_->on_after_backward();
}

void Trainer::optimizer_step() {
  optim::Optimizer& optimizer = *optimizer_config_.optimizer;
  strategy_->optimizer_step(optimizer, [&](bool skipping) {
    // Hooks see the gradients the optimizer would use (averaged across ranks, unscaled); a step
    // the precision plugin skips (an inf or NaN under 16-mixed) is not clipped.
    for_each_callback([&](Callback& cb) { cb.on_before_optimizer_step(*this, *module_, optimizer); });
    module_->on_before_optimizer_step(optimizer);
    if (skipping || !options_.gradient_clip_val || *options_.gradient_clip_val <= 0.0) return;
    std::vector<Tensor> params;
    for (const auto& group : optimizer.param_groups()) params.insert(params.end(), group.params.begin(), group.params.end());
    if (options_.gradient_clip_algorithm == "value") {
      optim::clip_grad_value_(params, *options_.gradient_clip_val);
    } else {
      const double norm = strategy_->clip_grad_norm(params, *options_.gradient_clip_val);
      if (!std::isfinite(norm)) {
        throw NonFiniteLossError("the gradient norm is " + std::to_string(norm) + " at epoch " +
                                 std::to_string(progress_.epoch) + " (global step " + std::to_string(progress_.global_step) +
                                 "); stopped before the optimizer step, so the weights and checkpoints are untouched");
      }
    }
  });
  for_each_callback([&](Callback& cb) { cb.on_before_zero_grad(*this, *module_, optimizer); });
  module_->on_before_zero_grad(optimizer);
  // A step executor (a captured backward) accumulates into the gradient buffers it saw, so they
  // stay allocated and are zeroed in place.
  optimizer.zero_grad(/*set_to_none=*/strategy_->step_executor() == nullptr);
}

void Trainer::step_schedulers(const std::string& interval) {
  if (!optimizer_config_.scheduler || optimizer_config_.interval != interval) return;
  const int64_t count = interval == "step" ? progress_.global_step : progress_.epoch + 1;
  if (count % optimizer_config_.frequency == 0) optimizer_config_.scheduler->step();
}

void Trainer::log_step_rows(const Metrics& rows, int64_t step) {
  if (!logger_ || rows.empty() || !is_global_zero()) return;
  Metrics with_epoch = rows;
  with_epoch["epoch"] = double(progress_.epoch);
  logger_->log_metrics(with_epoch, step);
}

void Trainer::log_to_loggers(const Metrics& metrics) {
  if (!logger_ || metrics.empty() || !is_global_zero() || sanity_checking()) return;
  Metrics with_epoch = metrics;
  with_epoch["epoch"] = double(progress_.epoch);
  logger_->log_metrics(with_epoch, progress_.batches_that_stepped);
}

}  // namespace tandem::trainer
