// Validation, test, the sanity check and predict: the module in eval mode, no autograd graph,
// batches through the strategy, metrics aggregated per epoch. During fit, validation returns
// the module to train mode afterwards.
#include <cmath>
#include <cstdio>

#include "engine/autograd/grad_mode.h"
#include "engine/core/error.h"
#include "engine/data/data_loader.h"
#include "engine/data/distributed_sampler.h"
#include "engine/trainer/trainer.h"

namespace tandem::trainer {

int64_t Trainer::limited_batches(const BatchCount& limit, int64_t available, const char* option) const {
  if (limit.is_count()) return std::min(limit.count(), available);
  const double f = limit.fraction();
  const int64_t n = f >= 1.0 ? available : static_cast<int64_t>(double(available) * f);
  if (n == 0 && f > 0.0 && available > 0) {
    throw ConfigError(std::string("trainer option ") + option + "=" + limit.str() + " gives 0 of the " +
                      std::to_string(available) + " batches; use at least " + std::to_string(1.0 / double(available)) +
                      " or an int count");
  }
  return n;
}

void Trainer::run_sanity_check(data::DataLoader* val_loader) {
  num_sanity_batches_ = 0;
  if (!val_loader || num_val_batches_ == 0 || options_.num_sanity_val_steps == 0) return;
  num_sanity_batches_ = options_.num_sanity_val_steps == -1 ? num_val_batches_
                                                            : std::min(options_.num_sanity_val_steps, num_val_batches_);
  // Whatever the sanity run logs is thrown away, so monitors never see it.
  const LoggerConnector::Snapshot before = logger_connector_.snapshot();
  stage_ = RunningStage::SanityCheck;
  for_each_callback([&](Callback& cb) { cb.on_sanity_check_start(*this, *module_); });
  run_evaluation(RunningStage::SanityCheck, *val_loader, num_sanity_batches_);
  for_each_callback([&](Callback& cb) { cb.on_sanity_check_end(*this, *module_); });
  logger_connector_.restore(before);
  logger_connector_.begin_epoch(RunningStage::Validate);
  stage_ = RunningStage::Train;
}

namespace {

// Lightning warns that validate/test on several devices evaluates some samples twice (the
// DistributedSampler pads every rank to the same length); this says when and how many.
void warn_about_padding(const data::DataLoader& loader, const char* stage, int world) {
  const auto* sampler = dynamic_cast<const data::DistributedSampler*>(&loader.sampler());
  if (!sampler || !sampler->options().pad) return;
  const int64_t n = sampler->dataset_size(), padded = sampler->size() * world;
  if (padded == n) return;
  std::fprintf(stderr,
               "Tandem: warning: %s on %d processes pads the %lld examples to %lld so that every process gets the "
               "same number of batches: %lld of them are evaluated twice and counted twice in the %s metrics. "
               "Run %s with --trainer.devices=1 --trainer.num_nodes=1 to evaluate each example exactly once.\n",
               stage, world, static_cast<long long>(n), static_cast<long long>(padded),
               static_cast<long long>(padded - n), stage, stage);
}

}  // namespace

Trainer::Metrics Trainer::run_evaluation(RunningStage stage, data::DataLoader& loader, int64_t num_batches) {
  const bool is_test = stage == RunningStage::Test;
  if (!fitting_ && world_size() > 1 && is_global_zero() && (is_test || stage == RunningStage::Validate)) {
    warn_about_padding(loader, is_test ? "test" : "validate", world_size());
  }
  const RunningStage results = is_test ? RunningStage::Test : RunningStage::Validate;
  const RunningStage outer_stage = stage_;
  stage_ = stage;
  const bool was_training = module_->is_training();
  module_->eval();
  NoGradGuard no_grad;
  LightningModule& m = *module_;

  logger_connector_.begin_epoch(results);
  logger_connector_.set_context(results, LogHook::EvaluationEpoch);
  if (is_test) {
    for_each_callback([&](Callback& cb) { cb.on_test_start(*this, m); });
    m.on_test_start();
    for_each_callback([&](Callback& cb) { cb.on_test_epoch_start(*this, m); });
    m.on_test_epoch_start();
  } else {
    for_each_callback([&](Callback& cb) { cb.on_validation_start(*this, m); });
    m.on_validation_start();
    for_each_callback([&](Callback& cb) { cb.on_validation_epoch_start(*this, m); });
    m.on_validation_epoch_start();
  }

  loader.start_epoch(progress_.epoch, 0);
  for (int64_t i = 0; i < num_batches; ++i) {
    beat(is_test ? "a test batch" : "a validation batch", i);
    std::optional<data::Batch> host_batch = loader.next();
    if (!host_batch) break;
    const data::Batch batch = strategy_->batch_to_device(*host_batch);
    logger_connector_.set_context(results, LogHook::EvaluationStep);
    logger_connector_.set_batch_size(batch.size());
    if (is_test) {
      for_each_callback([&](Callback& cb) { cb.on_test_batch_start(*this, m, batch, i); });
      m.on_test_batch_start(batch, i);
      strategy_->test_step(m, batch, i);
      for_each_callback([&](Callback& cb) { cb.on_test_batch_end(*this, m, batch, i); });
      m.on_test_batch_end(batch, i);
    } else {
      for_each_callback([&](Callback& cb) { cb.on_validation_batch_start(*this, m, batch, i); });
      m.on_validation_batch_start(batch, i);
      strategy_->validation_step(m, batch, i);
      for_each_callback([&](Callback& cb) { cb.on_validation_batch_end(*this, m, batch, i); });
      m.on_validation_batch_end(batch, i);
    }
    const Metrics rows = logger_connector_.end_step(results);
    if (stage != RunningStage::SanityCheck) log_step_rows(rows, progress_.batches_that_stepped);
  }

  // The module's epoch-end hook may log; then the epoch's metrics are computed, so callbacks
  // (ModelCheckpoint, EarlyStopping, the progress bar) see them.
  beat("the end of evaluation (metric reduction, checkpoints)", num_batches, /*waits_for_peers=*/true);
  logger_connector_.set_context(results, LogHook::EvaluationEpoch);
  is_test ? m.on_test_epoch_end() : m.on_validation_epoch_end();
  const Metrics rows = logger_connector_.end_epoch(results);
  if (stage != RunningStage::SanityCheck) log_step_rows(rows, progress_.batches_that_stepped);
  if (is_test) {
    for_each_callback([&](Callback& cb) { cb.on_test_epoch_end(*this, m); });
    for_each_callback([&](Callback& cb) { cb.on_test_end(*this, m); });
    m.on_test_end();
  } else {
    for_each_callback([&](Callback& cb) { cb.on_validation_epoch_end(*this, m); });
    for_each_callback([&](Callback& cb) { cb.on_validation_end(*this, m); });
    m.on_validation_end();
  }
  if (was_training) module_->train();
  stage_ = outer_stage;
  return logger_connector_.epoch_metrics(results);
}

std::vector<Tensor> Trainer::run_predict(data::DataLoader& loader, int64_t num_batches) {
  stage_ = RunningStage::Predict;
  module_->eval();
  NoGradGuard no_grad;
  LightningModule& m = *module_;
  std::vector<Tensor> outputs;
  for_each_callback([&](Callback& cb) { cb.on_predict_start(*this, m); });
  m.on_predict_start();
  loader.start_epoch(0, 0);
  for (int64_t i = 0; i < num_batches; ++i) {
    std::optional<data::Batch> host_batch = loader.next();
    if (!host_batch) break;
    const data::Batch batch = strategy_->batch_to_device(*host_batch);
    for_each_callback([&](Callback& cb) { cb.on_predict_batch_start(*this, m, batch, i); });
    Tensor out = strategy_->predict_step(m, batch, i);
    if (out.defined()) out = out.detach();
    for_each_callback([&](Callback& cb) { cb.on_predict_batch_end(*this, m, out, batch, i); });
    outputs.push_back(out);
  }
  for_each_callback([&](Callback& cb) { cb.on_predict_end(*this, m); });
  m.on_predict_end();
  return outputs;
}

}  // namespace tandem::trainer
