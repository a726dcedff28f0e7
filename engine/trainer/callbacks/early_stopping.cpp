#include "engine/trainer/callbacks/early_stopping.h"

#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "base/json_integer.h"
#include "engine/trainer/trainer.h"

namespace tandem::trainer {

namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

EarlyStoppingOptions make_options(const std::string& monitor, int64_t patience, const std::string& mode, double min_delta) {
  EarlyStoppingOptions o;
  o.monitor = monitor;
  o.patience = patience;
  o.mode = mode;
  o.min_delta = min_delta;
  return o;
}

}  // namespace

EarlyStopping::EarlyStopping(EarlyStoppingOptions options) : options_(std::move(options)) {
  TANDEM_CHECK(!options_.monitor.empty(), ConfigError, "EarlyStopping needs a monitor, e.g. EarlyStopping(\"val_loss\")");
  TANDEM_CHECK(options_.mode == "min" || options_.mode == "max", ConfigError,
               "EarlyStopping(mode='" + options_.mode + "') is not valid: expected 'min' or 'max'");
  TANDEM_CHECK(options_.patience >= 0, ConfigError,
               "EarlyStopping(patience=" + std::to_string(options_.patience) + ") is not valid: expected >= 0");
  best_score_ = options_.mode == "min" ? INFINITY : -INFINITY;
}

EarlyStopping::EarlyStopping(const std::string& monitor, int64_t patience, const std::string& mode, double min_delta)
    : EarlyStopping(make_options(monitor, patience, mode, min_delta)) {}

std::string EarlyStopping::state_key() const {
  return "EarlyStopping{monitor=" + options_.monitor + ",mode=" + options_.mode + "}";
}

nlohmann::json EarlyStopping::state_dict() const {
  return {{"wait_count", wait_count_}, {"stopped_epoch", stopped_epoch_}, {"best_score", best_score_},
          {"patience", options_.patience}};
}

void EarlyStopping::load_state_dict(const nlohmann::json& s) {
  wait_count_ = json_integer(s.value("wait_count", nlohmann::json(0)), name() + " state wait_count", 0, kMaxJsonCounter);
  stopped_epoch_ = json_integer(s.value("stopped_epoch", nlohmann::json(0)), name() + " state stopped_epoch", 0,
                                kMaxJsonCounter);
  if (s.contains("best_score") && s["best_score"].is_number()) best_score_ = s["best_score"].get<double>();
}

bool EarlyStopping::checks_on_train_epoch_end(Trainer& trainer) const {
  if (options_.check_on_train_epoch_end) return *options_.check_on_train_epoch_end;
  const TrainerOptions& o = trainer.options();
  return !o.val_check_interval.is_count() && o.val_check_interval.fraction() == 1.0 && o.check_val_every_n_epoch &&
         *o.check_val_every_n_epoch == 1;
}

void EarlyStopping::on_train_epoch_end(Trainer& trainer, LightningModule&) {
  if (checks_on_train_epoch_end(trainer)) check(trainer);
}

void EarlyStopping::on_validation_end(Trainer& trainer, LightningModule&) {
  if (!checks_on_train_epoch_end(trainer)) check(trainer);
}

void EarlyStopping::check(Trainer& trainer) {
  if (!trainer.fitting() || trainer.fast_dev_run() || trainer.sanity_checking()) return;
  const auto& metrics = trainer.callback_metrics();
  auto it = metrics.find(options_.monitor);
  if (it == metrics.end()) {
    if (!options_.strict) return;
    std::string available;
    for (const auto& [k, v] : metrics) available += (available.empty() ? "" : ", ") + k;
    throw ConfigError("EarlyStopping(monitor='" + options_.monitor + "') found no such metric; logged: " +
                      (available.empty() ? std::string("(none)") : available) + ". Log it with log(\"" +
                      options_.monitor + "\", value), fix the name, or set strict=false");
  }
  const double current = it->second;
  const bool min_mode = options_.mode == "min";
  auto improves = [&](double a, double b) { return min_mode ? a < b : a > b; };
  bool stop = false;
  if (options_.check_finite && !std::isfinite(current)) {
    stop = true;
    reason_ = "monitored metric " + options_.monitor + " = " + num(current) + " is not finite; the best was " + num(best_score_);
  } else if (options_.stopping_threshold && improves(current, *options_.stopping_threshold)) {
    stop = true;
    reason_ = options_.monitor + " = " + num(current) + " reached the stopping threshold " + num(*options_.stopping_threshold);
  } else if (options_.divergence_threshold && improves(*options_.divergence_threshold, current)) {
    stop = true;
    reason_ = options_.monitor + " = " + num(current) + " is worse than the divergence threshold " + num(*options_.divergence_threshold);
  } else if (improves(min_mode ? current + options_.min_delta : current - options_.min_delta, best_score_)) {
    best_score_ = current;
    wait_count_ = 0;
    reason_.clear();
  } else {
    wait_count_ += 1;
    if (wait_count_ >= options_.patience) {
      stop = true;
      reason_ = options_.monitor + " did not improve by more than " + num(options_.min_delta) + " in the last " +
                std::to_string(wait_count_) + " checks; the best was " + num(best_score_);
    }
  }
  stop = trainer.strategy().reduce_any(stop);
  if (stop) {
    trainer.should_stop = true;
    stopped_epoch_ = trainer.current_epoch();
    if (trainer.is_global_zero() && trainer.options().enable_progress_bar) {
      std::printf("EarlyStopping: stopping at epoch %lld: %s\n", static_cast<long long>(stopped_epoch_), reason_.c_str());
      std::fflush(stdout);
    }
  }
}

}  // namespace tandem::trainer
