#include "engine/trainer/fit_loop.h"

#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "engine/data/data_loader.h"
#include "engine/optim/clip_grad.h"
#include "engine/trainer/trainer.h"

namespace tandem::trainer {

bool FitLoop::max_steps_reached() const {
  const TrainerOptions& o = trainer_.options_;
  return o.max_steps != -1 && trainer_.progress_.global_step >= o.max_steps;
}

bool FitLoop::done() const {
  if (trainer_.should_stop || max_steps_reached()) return true;
  return trainer_.max_epochs_ != -1 && trainer_.progress_.epoch >= trainer_.max_epochs_;
}

void FitLoop::plan_batches(data::DataLoader& train_loader, data::DataLoader* val_loader) {
  Trainer& t = trainer_;
  const TrainerOptions& o = t.options_;
  t.num_training_batches_ = limited_batches(o.limit_train_batches, train_loader.num_batches(), "limit_train_batches");
  train_batch_size_ = train_loader.batch_size();
  t.checkpoint_connector_.rescale_resume_position(train_batch_size_);
  t.num_val_batches_ = val_loader ? limited_batches(o.limit_val_batches, val_loader->num_batches(), "limit_val_batches") : 0;

  val_check_batch_ = 0;
  if (t.num_val_batches_ == 0) return;
  if (!o.val_check_interval.is_count()) {
    val_check_batch_ = std::max<int64_t>(1, static_cast<int64_t>(double(t.num_training_batches_) * o.val_check_interval.fraction()));
    return;
  }
  val_check_batch_ = o.val_check_interval.count();
  if (o.check_val_every_n_epoch && val_check_batch_ > t.num_training_batches_) {
    throw ConfigError("trainer option val_check_interval=" + std::to_string(val_check_batch_) +
                      " is more than the " + std::to_string(t.num_training_batches_) +
                      " training batches of an epoch; lower it, or set check_val_every_n_epoch=null to count "
                      "batches across epochs");
  }
}

// A fit that will train nothing says why (Lightning's "`Trainer.fit` stopped: ..." lines).
void FitLoop::say_why_nothing_trains(const data::DataLoader& train_loader) {
  Trainer& t = trainer_;
  if (t.num_training_batches_ == 0) {
    t.should_stop = true;
    if (t.is_global_zero()) {
      std::printf("Tandem: `fit` stopped: no training batches (limit_train_batches leaves 0 of the %lld); nothing "
                  "was trained\n", static_cast<long long>(train_loader.num_batches()));
    }
  } else if (done() && t.is_global_zero()) {
    if (max_steps_reached()) {
      std::printf("Tandem: `fit` stopped: `max_steps=%lld` reached before any training (the run is at global step "
                  "%lld); nothing was trained\n", static_cast<long long>(t.options_.max_steps),
                  static_cast<long long>(t.progress_.global_step));
    } else {
      std::printf("Tandem: `fit` stopped: `max_epochs=%lld` reached before any training (the run is at epoch %lld); "
                  "nothing was trained\n", static_cast<long long>(t.max_epochs_), static_cast<long long>(t.progress_.epoch));
    }
  }
}

void FitLoop::run() {
  Trainer& t = trainer_;
  auto train_loader = t.datamodule_->train_dataloader();
  TANDEM_CHECK(train_loader != nullptr, ConfigError, "fit: the datamodule returned no train_dataloader(); give it one");
  auto val_loader = t.datamodule_->val_dataloader();
  t.shard_for_ranks(*train_loader, RunningStage::Train);
  if (val_loader) t.shard_for_ranks(*val_loader, RunningStage::Validate);
  if ((t.world_size() > 1 || t.strategy_->devices_per_process() > 1) && t.is_global_zero()) {
    // The seeds' rule: ddp multiplies the batch by the processes, dp splits it over its devices.
    std::printf("%s; each rank trains on %lld of the %lld examples\n",
                t.strategy_->describe_batch(train_loader->batch_size(), t.options_.accumulate_grad_batches).c_str(),
                static_cast<long long>(train_loader->sampler().size()),
                static_cast<long long>(train_loader->dataset().size()));
    std::fflush(stdout);
  }
  plan_batches(*train_loader, val_loader.get());

  t.evaluation_loop_.run_sanity_check(val_loader.get());
  // cuda_graph: the strategy's steps run through a CUDA graph (Trainer checked that the strategy
  // can capture them).
  t.strategy_->setup_step_executor(t.options_.cuda_graph, t.logger_connector_);
  t.stage_ = RunningStage::Train;
  t.for_each_callback([&](Callback& cb) { cb.on_train_start(t, *t.module_); });
  t.module_->on_train_start();
  say_why_nothing_trains(*train_loader);
  while (!done()) {
    run_epoch(*train_loader, val_loader.get());
    // current_epoch counts epochs run, also one cut short by max_steps or should_stop
    // (Lightning); checkpoints saved inside the epoch recorded where it stood.
    t.progress_.epoch += 1;
    t.progress_.batch_in_epoch = 0;
    t.progress_.epoch_finished = false;
  }
  t.strategy_->release_step_executor();
  t.for_each_callback([&](Callback& cb) { cb.on_train_end(t, *t.module_); });
  t.module_->on_train_end();
}

bool FitLoop::should_validate_after_batch(int64_t batch_idx) const {
  const TrainerOptions& o = trainer_.options_;
  if (val_check_batch_ == 0) return false;
  if (o.check_val_every_n_epoch && (trainer_.progress_.epoch + 1) % *o.check_val_every_n_epoch != 0) return false;
  // Without check_val_every_n_epoch, an int interval counts batches over the whole run.
  const int64_t iteration = o.check_val_every_n_epoch ? batch_idx : trainer_.progress_.total_batch_idx - 1;
  return (iteration + 1) % val_check_batch_ == 0;
}

void FitLoop::run_epoch(data::DataLoader& train_loader, data::DataLoader* val_loader) {
  Trainer& t = trainer_;
  t.stage_ = RunningStage::Train;
  t.module_->train();
  t.logger_connector_.begin_epoch(RunningStage::Train);
  const CheckpointConnector::ResumePoint resume = t.checkpoint_connector_.take_resume_point();
  const int64_t skip = std::min(resume.skip_batches, t.num_training_batches_);
  const bool resume_after_batch = resume.after_batch_pending && skip > 0;
  train_loader.start_epoch(t.progress_.epoch, skip);
  t.progress_.batch_in_epoch = skip;
  t.progress_.epoch_finished = false;
  accumulated_batches_ = 0;

  t.logger_connector_.set_context(RunningStage::Train, LogHook::TrainEpoch);
  t.for_each_callback([&](Callback& cb) { cb.on_train_epoch_start(t, *t.module_); });
  t.module_->on_train_epoch_start();
  // Resumed from a checkpoint saved inside on_train_batch_end: that batch's after-batch work
  // had not run yet, so it runs now, as it did in the interrupted run.
  if (resume_after_batch) after_batch(skip - 1, skip == t.num_training_batches_, val_loader);

  for (int64_t batch_idx = skip; batch_idx < t.num_training_batches_ && !max_steps_reached() && !t.should_stop; ++batch_idx) {
    t.beat("waiting for the training batch", batch_idx);
    std::optional<data::Batch> batch = train_loader.next();
    if (!batch) {  // the loader ran short of what num_batches() promised: the epoch is over
      t.progress_.epoch_finished = true;
      break;
    }
    const bool is_last = batch_idx + 1 == t.num_training_batches_;
    const bool stepped = run_batch(*batch, batch_idx, is_last);
    after_batch(batch_idx, is_last, val_loader);
    if (stepped) t.progress_.batches_that_stepped += 1;
  }
  finish_epoch();
}

void FitLoop::after_batch(int64_t batch_idx, bool is_last, data::DataLoader* val_loader) {
  Trainer& t = trainer_;
  if (is_last) t.progress_.epoch_finished = true;
  if (is_last) step_schedulers("epoch");  // after the last batch, before validation (Lightning)
  t.progress_.after_batch_pending = false;     // a checkpoint saved by this validation resumes after it
  if (should_validate_after_batch(batch_idx)) {
    t.evaluation_loop_.run(RunningStage::Validate, *val_loader, t.num_val_batches_);
    t.stage_ = RunningStage::Train;
    t.logger_connector_.set_context(RunningStage::Train, LogHook::TrainingStep);
  }
}

void FitLoop::finish_epoch() {
  Trainer& t = trainer_;
  t.beat("the end of the training epoch (metric reduction, checkpoints)", t.progress_.batch_in_epoch, /*waits_for_peers=*/true);
  t.logger_connector_.set_context(RunningStage::Train, LogHook::TrainEpoch);
  t.module_->on_train_epoch_end();
  const Trainer::Metrics rows = t.logger_connector_.end_epoch(RunningStage::Train);
  // Epoch metrics share the step of the epoch's last optimizer step (Lightning).
  t.log_step_rows(rows, std::max<int64_t>(t.progress_.batches_that_stepped - 1, 0));
  t.for_each_callback([&](Callback& cb) {
    if (!cb.is_monitoring()) cb.on_train_epoch_end(t, *t.module_);
  });
  t.for_each_callback([&](Callback& cb) {
    if (cb.is_monitoring()) cb.on_train_epoch_end(t, *t.module_);
  });
}

bool FitLoop::run_batch(const data::Batch& host_batch, int64_t batch_idx, bool is_last) {
  Trainer& t = trainer_;
  batch_idx_ = batch_idx;
  TrainingStepRequest request;
  request.batch_idx = batch_idx;
  request.will_step = accumulated_batches_ + 1 >= t.options_.accumulate_grad_batches || is_last;
  // Accumulated gradients sum over the batches, so each loss is scaled to give their mean.
  request.loss_factor = 1.0 / double(t.options_.accumulate_grad_batches);
  const TrainingStepResult step =
      t.strategy_->run_training_step(*t.module_, *t.optimizer_config_.optimizer, host_batch, request, *this);
  if (step.stepped) {
    accumulated_batches_ = 0;
    t.progress_.global_step += 1;
    step_schedulers("step");
  }
  // The batch is done: a checkpoint saved from on_train_batch_end resumes after it.
  t.progress_.batch_in_epoch = batch_idx + 1;
  t.progress_.total_batch_idx += 1;
  t.progress_.after_batch_pending = true;
  t.beat("on_train_batch_end hooks (checkpoints)", batch_idx, /*waits_for_peers=*/true);
  t.for_each_callback([&](Callback& cb) { cb.on_train_batch_end(t, *t.module_, step.loss, step.batch, batch_idx); });
  t.module_->on_train_batch_end(step.loss, step.batch, batch_idx);

  const Trainer::Metrics rows = t.logger_connector_.end_step(RunningStage::Train);
  // While accumulating nothing is logged; then every log_every_n_steps optimizer steps.
  if (step.stepped && ((t.progress_.batches_that_stepped + 1) % t.options_.log_every_n_steps == 0 || t.should_stop)) {
    t.log_step_rows(rows, t.progress_.batches_that_stepped);
  }
  return step.stepped;
}

void FitLoop::enter(const char* phase, bool waits_for_peers) { trainer_.beat(phase, batch_idx_, waits_for_peers); }

void FitLoop::on_batch_start(const data::Batch& batch) {
  Trainer& t = trainer_;
  t.logger_connector_.set_context(RunningStage::Train, LogHook::TrainingStep);
  t.logger_connector_.set_batch_size(batch.size());
  t.for_each_callback([&](Callback& cb) { cb.on_train_batch_start(t, *t.module_, batch, batch_idx_); });
  t.module_->on_train_batch_start(batch, batch_idx_);
  accumulated_batches_ += 1;  // this batch's backward counts toward the optimizer step from here on
}

void FitLoop::check_finite_loss(double value) {
  Trainer& t = trainer_;
  // Every rank learns that one of them diverged, so all stop here together (no rank is left
  // waiting in the gradient allreduce).
  t.beat("the loss check across ranks", batch_idx_, /*waits_for_peers=*/true);
  if (!t.strategy_->reduce_any(!std::isfinite(value))) return;
  const std::string what = std::isfinite(value) ? "a finite loss here, but another rank's loss was nan or inf"
                                                 : std::string("loss=") + (std::isnan(value) ? "nan" : "inf");
  const std::string where =
      t.world_size() > 1 ? " on rank " + std::to_string(t.global_rank()) + " of " + std::to_string(t.world_size()) : "";
  throw NonFiniteLossError("training_step returned " + what + where +
                           " at epoch " + std::to_string(t.progress_.epoch) + ", batch " + std::to_string(batch_idx_) +
                           " (global step " + std::to_string(t.progress_.global_step) + "); stopped before the "
                           "optimizer step, so the weights and checkpoints are untouched. Lower the learning rate, "
                           "set gradient_clip_val, or check the inputs of that batch");
}

void FitLoop::on_before_backward(const Tensor& loss) {
  Trainer& t = trainer_;
  t.for_each_callback([&](Callback& cb) { cb.on_before_backward(t, *t.module_, loss); });
  t.module_->on_before_backward(loss);
}

void FitLoop::on_after_backward() {
  Trainer& t = trainer_;
  t.for_each_callback([&](Callback& cb) { cb.on_after_backward(t, *t.module_); });
  t.module_->on_after_backward();
}

void FitLoop::on_before_optimizer_step(optim::Optimizer& optimizer, bool skipping) {
  Trainer& t = trainer_;
  const TrainerOptions& o = t.options_;
  t.for_each_callback([&](Callback& cb) { cb.on_before_optimizer_step(t, *t.module_, optimizer); });
  t.module_->on_before_optimizer_step(optimizer);
  if (skipping || !o.gradient_clip_val || *o.gradient_clip_val <= 0.0) return;
  std::vector<Tensor> params;
  for (const auto& group : optimizer.param_groups()) params.insert(params.end(), group.params.begin(), group.params.end());
  if (o.gradient_clip_algorithm == "value") {
    optim::clip_grad_value_(params, *o.gradient_clip_val);
    return;
  }
  const double norm = t.strategy_->clip_grad_norm(params, *o.gradient_clip_val);
  if (!std::isfinite(norm)) {
    throw NonFiniteLossError("the gradient norm is " + std::to_string(norm) + " at epoch " +
                             std::to_string(t.progress_.epoch) + " (global step " + std::to_string(t.progress_.global_step) +
                             "); stopped before the optimizer step, so the weights and checkpoints are untouched");
  }
}

void FitLoop::on_before_zero_grad(optim::Optimizer& optimizer) {
  Trainer& t = trainer_;
  t.for_each_callback([&](Callback& cb) { cb.on_before_zero_grad(t, *t.module_, optimizer); });
  t.module_->on_before_zero_grad(optimizer);
}

void FitLoop::step_schedulers(const std::string& interval) {
  const OptimizerConfig& config = trainer_.optimizer_config_;
  if (!config.scheduler || config.interval != interval) return;
  const int64_t count = interval == "step" ? trainer_.progress_.global_step : trainer_.progress_.epoch + 1;
  if (count % config.frequency == 0) config.scheduler->step();
}

}  // namespace tandem::trainer
