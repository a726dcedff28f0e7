// LoggerConnector: collects what LightningModule::log records and turns it into the three
// views Lightning keeps: callback_metrics (what ModelCheckpoint/EarlyStopping monitor and what
// fit/validate/test report), progress-bar metrics, and rows for the loggers (metrics.csv).
//
// Each value is logged with on_step and/or on_epoch (defaults depend on the hook that logs it,
// as in Lightning). A value logged with both is "forked": `name_step` per step and
// `name_epoch` per epoch, and `name` in callback_metrics holds the latest of the two. Epoch
// values aggregate every step's value with reduce_fx: mean weighted by batch size, sum of
// values, max, or min.
//
// sync_dist (DDP): a step value is reduced across ranks when it is logged; an epoch value is
// aggregated locally and reduced once at the epoch's end, the mean as sum(value x batch size)
// over sum(batch size) across all ranks, so ranks with smaller batches weigh less. Every rank
// must log the same sync_dist names in the same order (they are collectives).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/module/metrics_sink.h"

namespace tandem { class Strategy; }

namespace tandem::trainer {

enum class RunningStage { Train, Validate, Test, Predict, SanityCheck };

// Which hook is running, for on_step/on_epoch defaults and for error messages.
enum class LogHook {
  None,
  TrainingStep,       // training_step and the train batch hooks: on_step
  TrainEpoch,         // on_train_epoch_start/end: on_epoch
  EvaluationStep,     // validation_step/test_step and their batch hooks: on_epoch
  EvaluationEpoch,    // on_validation/test_epoch_start/end: on_epoch
};

class LoggerConnector : public MetricsSink {
 public:
  using Metrics = std::map<std::string, double>;

  explicit LoggerConnector(const Strategy* strategy = nullptr) : strategy_(strategy) {}

  // The context of the next log() calls.
  void set_context(RunningStage stage, LogHook hook) { stage_ = stage; hook_ = hook; }
  void set_batch_size(int64_t batch_size) { batch_size_ = batch_size; }
  RunningStage stage() const { return stage_; }

  // Records one value (what CUDA graph steps defer: MetricsSink). Throws ValueError for names
  // already used with other options in this epoch; values that are not finite numbers are still
  // recorded (NaN shows up as nan).
  void log(const std::string& name, double value, const LogOptions& options) override;

  // Starts a stage's epoch: forgets its previous step and epoch aggregates.
  void begin_epoch(RunningStage stage);
  // After a batch: the on_step values logged during it go to callback_metrics and the progress
  // bar; returns those meant for the loggers (forked names).
  Metrics end_step(RunningStage stage);
  // After the epoch-end hooks: the on_epoch aggregates go to callback_metrics and the progress
  // bar; returns those meant for the loggers.
  Metrics end_epoch(RunningStage stage);
  // Names (as in callback_metrics) logged during the stage's last epoch, for validate/test's
  // return value.
  Metrics epoch_metrics(RunningStage stage) const;

  const Metrics& callback_metrics() const { return callback_metrics_; }
  const Metrics& progress_bar_metrics() const { return progress_bar_metrics_; }
  const Metrics& logged_metrics() const { return logged_metrics_; }
  // Sanity validation must leave no trace: snapshot before, restore after.
  struct Snapshot { Metrics callback, progress_bar, logged; };
  Snapshot snapshot() const { return {callback_metrics_, progress_bar_metrics_, logged_metrics_}; }
  void restore(const Snapshot& s);
  void clear();

 private:
  struct Result {
    std::string name;
    bool on_step = false, on_epoch = false, prog_bar = false, to_logger = true, sync_dist = false;
    ReduceFx reduce_fx = ReduceFx::Mean;
    double step_value = 0.0;
    bool updated_this_step = false;
    double weighted_sum = 0.0, weight = 0.0, plain_sum = 0.0, max = 0.0, min = 0.0;
    int64_t count = 0;
    std::optional<double> final_epoch_value;  // set by end_epoch (after the sync)
    double local_epoch_value() const;
  };
  struct StageResults {
    std::vector<Result> results;  // in the order first logged
    Result* find(const std::string& name);
  };
  StageResults& results_of(RunningStage stage);
  void publish(const std::string& name, double value, bool prog_bar, bool to_logger, Metrics* for_logger);
  // The epoch aggregate, reduced across ranks when the value was logged with sync_dist.
  double epoch_value(const Result& r) const;

  const Strategy* strategy_;
  RunningStage stage_ = RunningStage::Train;
  LogHook hook_ = LogHook::None;
  int64_t batch_size_ = 1;
  std::map<RunningStage, StageResults> stages_;
  Metrics callback_metrics_, progress_bar_metrics_, logged_metrics_;
};

}  // namespace tandem::trainer
