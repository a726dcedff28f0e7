#include "engine/trainer/evaluation_loop.h"

#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "engine/data/data_loader.h"
#include "engine/data/distributed_sampler.h"
#include "engine/trainer/trainer.h"
#include "tensor/autograd/grad_mode.h"

namespace tandem::trainer {

int64_t limited_batches(const BatchCount& limit, int64_t available, const char* option) {
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

void EvaluationLoop::run_sanity_check(data::DataLoader* val_loader) {
  Trainer& t = trainer_;
  const TrainerOptions& o = t.options_;
  t.num_sanity_batches_ = 0;
  if (!val_loader || t.num_val_batches_ == 0 || o.num_sanity_val_steps == 0) return;
  t.num_sanity_batches_ = o.num_sanity_val_steps == -1 ? t.num_val_batches_ : std::min(o.num_sanity_val_steps, t.num_val_batches_);
  // Whatever the sanity run logs is thrown away, so monitors never see it.
  const LoggerConnector::Snapshot before = t.logger_connector_.snapshot();
  t.stage_ = RunningStage::SanityCheck;
  t.for_each_callback([&](Callback& cb) { cb.on_sanity_check_start(t, *t.module_); });
  run(RunningStage::SanityCheck, *val_loader, t.num_sanity_batches_);
  t.for_each_callback([&](Callback& cb) { cb.on_sanity_check_end(t, *t.module_); });
  t.logger_connector_.restore(before);
  t.logger_connector_.begin_epoch(RunningStage::Validate);
  t.stage_ = RunningStage::Train;
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

Trainer::Metrics EvaluationLoop::run(RunningStage stage, data::DataLoader& loader, int64_t num_batches) {
  Trainer& t = trainer_;
  const bool is_test = stage == RunningStage::Test;
  if (!t.fitting_ && t.world_size() > 1 && t.is_global_zero() && (is_test || stage == RunningStage::Validate)) {
    warn_about_padding(loader, is_test ? "test" : "validate", t.world_size());
  }
  const RunningStage results = is_test ? RunningStage::Test : RunningStage::Validate;
  const RunningStage outer_stage = t.stage_;
  t.stage_ = stage;
  const bool was_training = t.module_->is_training();
  t.module_->eval();
  NoGradGuard no_grad;
  LightningModule& m = *t.module_;

  t.logger_connector_.begin_epoch(results);
  t.logger_connector_.set_context(results, LogHook::EvaluationEpoch);
  if (is_test) {
    t.for_each_callback([&](Callback& cb) { cb.on_test_start(t, m); });
    m.on_test_start();
    t.for_each_callback([&](Callback& cb) { cb.on_test_epoch_start(t, m); });
    m.on_test_epoch_start();
  } else {
    t.for_each_callback([&](Callback& cb) { cb.on_validation_start(t, m); });
    m.on_validation_start();
    t.for_each_callback([&](Callback& cb) { cb.on_validation_epoch_start(t, m); });
    m.on_validation_epoch_start();
  }

  loader.start_epoch(t.progress_.epoch, 0);
  for (int64_t i = 0; i < num_batches; ++i) {
    t.beat(is_test ? "a test batch" : "a validation batch", i);
    std::optional<data::Batch> host_batch = loader.next();
    if (!host_batch) break;
    const data::Batch batch = t.strategy_->batch_to_device(*host_batch);
    t.logger_connector_.set_context(results, LogHook::EvaluationStep);
    t.logger_connector_.set_batch_size(batch.size());
    if (is_test) {
      t.for_each_callback([&](Callback& cb) { cb.on_test_batch_start(t, m, batch, i); });
      m.on_test_batch_start(batch, i);
      t.strategy_->test_step(m, batch, i);
      t.for_each_callback([&](Callback& cb) { cb.on_test_batch_end(t, m, batch, i); });
      m.on_test_batch_end(batch, i);
    } else {
      t.for_each_callback([&](Callback& cb) { cb.on_validation_batch_start(t, m, batch, i); });
      m.on_validation_batch_start(batch, i);
      t.strategy_->validation_step(m, batch, i);
      t.for_each_callback([&](Callback& cb) { cb.on_validation_batch_end(t, m, batch, i); });
      m.on_validation_batch_end(batch, i);
    }
    const Trainer::Metrics rows = t.logger_connector_.end_step(results);
    if (stage != RunningStage::SanityCheck) t.log_step_rows(rows, t.progress_.batches_that_stepped);
  }

  // The module's epoch-end hook may log; then the epoch's metrics are computed, so callbacks
  // (ModelCheckpoint, EarlyStopping, the progress bar) see them.
  t.beat("the end of evaluation (metric reduction, checkpoints)", num_batches, /*waits_for_peers=*/true);
  t.logger_connector_.set_context(results, LogHook::EvaluationEpoch);
  is_test ? m.on_test_epoch_end() : m.on_validation_epoch_end();
  const Trainer::Metrics rows = t.logger_connector_.end_epoch(results);
  if (stage != RunningStage::SanityCheck) t.log_step_rows(rows, t.progress_.batches_that_stepped);
  if (is_test) {
    t.for_each_callback([&](Callback& cb) { cb.on_test_epoch_end(t, m); });
    t.for_each_callback([&](Callback& cb) { cb.on_test_end(t, m); });
    m.on_test_end();
  } else {
    t.for_each_callback([&](Callback& cb) { cb.on_validation_epoch_end(t, m); });
    t.for_each_callback([&](Callback& cb) { cb.on_validation_end(t, m); });
    m.on_validation_end();
  }
  if (was_training) t.module_->train();
  t.stage_ = outer_stage;
  return t.logger_connector_.epoch_metrics(results);
}

std::vector<Tensor> EvaluationLoop::run_predict(data::DataLoader& loader, int64_t num_batches) {
  Trainer& t = trainer_;
  t.stage_ = RunningStage::Predict;
  t.module_->eval();
  NoGradGuard no_grad;
  LightningModule& m = *t.module_;
  std::vector<Tensor> outputs;
  t.for_each_callback([&](Callback& cb) { cb.on_predict_start(t, m); });
  m.on_predict_start();
  loader.start_epoch(0, 0);
  for (int64_t i = 0; i < num_batches; ++i) {
    std::optional<data::Batch> host_batch = loader.next();
    if (!host_batch) break;
    const data::Batch batch = t.strategy_->batch_to_device(*host_batch);
    t.for_each_callback([&](Callback& cb) { cb.on_predict_batch_start(t, m, batch, i); });
    Tensor out = t.strategy_->predict_step(m, batch, i);
    if (out.defined()) out = out.detach();
    t.for_each_callback([&](Callback& cb) { cb.on_predict_batch_end(t, m, out, batch, i); });
    outputs.push_back(out);
  }
  t.for_each_callback([&](Callback& cb) { cb.on_predict_end(t, m); });
  m.on_predict_end();
  return outputs;
}

}  // namespace tandem::trainer
