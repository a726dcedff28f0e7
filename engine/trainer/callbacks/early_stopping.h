// EarlyStopping: stops fit when a monitored metric has not improved by more than min_delta
// for `patience` consecutive checks. Checks run at the same points as ModelCheckpoint's saves
// (train epoch end when validation runs once per epoch, else after each validation). A
// missing metric is a ConfigError listing the available ones (strict, as Lightning), and a
// NaN/inf value stops at once (check_finite).
#pragma once
#include <limits>
#include <optional>
#include <string>

#include "engine/trainer/callback.h"

namespace tandem::trainer {

struct EarlyStoppingOptions {
  std::string monitor;
  double min_delta = 0.0;
  int64_t patience = 3;
  std::string mode = "min";  // "min" | "max"
  bool strict = true;        // a missing monitor is an error (false: skip the check)
  bool check_finite = true;
  std::optional<double> stopping_threshold;   // stop once the metric is this good
  std::optional<double> divergence_threshold; // stop once the metric is this bad
  std::optional<bool> check_on_train_epoch_end;
};

class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options);
  explicit EarlyStopping(const std::string& monitor, int64_t patience = 3, const std::string& mode = "min",
                         double min_delta = 0.0);
  std::string name() const override { return "EarlyStopping"; }
  std::string state_key() const override;
  bool is_monitoring() const override { return true; }
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;

  void on_train_epoch_end(Trainer& trainer, LightningModule& module) override;
  void on_validation_end(Trainer& trainer, LightningModule& module) override;

  const EarlyStoppingOptions& options() const { return options_; }
  int64_t wait_count() const { return wait_count_; }
  int64_t stopped_epoch() const { return stopped_epoch_; }
  double best_score() const { return best_score_; }

 private:
  bool checks_on_train_epoch_end(Trainer& trainer) const;
  void check(Trainer& trainer);

  EarlyStoppingOptions options_;
  int64_t wait_count_ = 0;
  int64_t stopped_epoch_ = 0;
  double best_score_;
  std::string reason_;
};

}  // namespace tandem::trainer
