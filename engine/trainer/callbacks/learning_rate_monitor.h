// LearningRateMonitor: writes each param group's learning rate to the loggers as
// "lr-<OptimizerName>" ("lr-Adam", or "lr-Adam/pg1", "lr-Adam/pg2" with several groups), at
// every logging step ("step") or once per epoch ("epoch"); unset follows the scheduler's
// interval (every logging step without a scheduler).
#pragma once
#include <map>
#include <optional>
#include <string>

#include "engine/trainer/callback.h"

namespace tandem::trainer {

class LearningRateMonitor : public Callback {
 public:
  explicit LearningRateMonitor(std::optional<std::string> logging_interval = std::nullopt);
  std::string name() const override { return "LearningRateMonitor"; }
  void on_train_batch_start(Trainer& trainer, LightningModule& module, const data::Batch&, int64_t) override;
  void on_train_epoch_start(Trainer& trainer, LightningModule& module) override;

  const std::optional<std::string>& logging_interval() const { return logging_interval_; }

  // The names and current rates, as they are logged.
  static std::map<std::string, double> learning_rates(const optim::Optimizer& optimizer);

 private:
  std::string interval(Trainer& trainer) const;
  std::optional<std::string> logging_interval_;
};

}  // namespace tandem::trainer
