#include "engine/trainer/callbacks/learning_rate_monitor.h"

#include "base/error.h"
#include "engine/trainer/trainer.h"

namespace tandem::trainer {

LearningRateMonitor::LearningRateMonitor(std::optional<std::string> logging_interval)
    : logging_interval_(std::move(logging_interval)) {
  if (logging_interval_) {
    TANDEM_CHECK(*logging_interval_ == "step" || *logging_interval_ == "epoch", ConfigError,
                 "LearningRateMonitor(logging_interval='" + *logging_interval_ + "') is not valid: expected 'step', 'epoch' or unset");
  }
}

std::map<std::string, double> LearningRateMonitor::learning_rates(const optim::Optimizer& optimizer) {
  std::map<std::string, double> out;
  const auto& groups = optimizer.param_groups();
  const std::string base = "lr-" + optimizer.name();
  for (size_t i = 0; i < groups.size(); ++i) {
    out[groups.size() == 1 ? base : base + "/pg" + std::to_string(i + 1)] = groups[i].lr();
  }
  return out;
}

std::string LearningRateMonitor::interval(Trainer& trainer) const {
  if (logging_interval_) return *logging_interval_;
  return trainer.lr_scheduler() && trainer.optimizer_config().interval == "epoch" ? "epoch" : "step";
}

void LearningRateMonitor::on_train_batch_start(Trainer& trainer, LightningModule&, const data::Batch&, int64_t) {
  if (interval(trainer) != "step" || !trainer.optimizer()) return;
  // The same cadence as the step metrics (log_every_n_steps).
  if ((trainer.fit_progress().batches_that_stepped + 1) % trainer.options().log_every_n_steps != 0) return;
  trainer.log_to_loggers(learning_rates(*trainer.optimizer()));
}

void LearningRateMonitor::on_train_epoch_start(Trainer& trainer, LightningModule&) {
  if (interval(trainer) != "epoch" || !trainer.optimizer()) return;
  trainer.log_to_loggers(learning_rates(*trainer.optimizer()));
}

}  // namespace tandem::trainer
