#include "engine/trainer/logger_connector.h"

#include <algorithm>
#include <limits>

#include "base/error.h"
#include "engine/strategies/strategy.h"

namespace tandem::trainer {

namespace {

const char* reduce_name(ReduceFx fx) {
  switch (fx) {
    case ReduceFx::Mean: return "mean";
    case ReduceFx::Sum: return "sum";
    case ReduceFx::Max: return "max";
    case ReduceFx::Min: return "min";
  }
  return "?";
}

}  // namespace

double LoggerConnector::Result::local_epoch_value() const {
  switch (reduce_fx) {
    case ReduceFx::Mean: return weight > 0 ? weighted_sum / weight : plain_sum / double(std::max<int64_t>(count, 1));
    case ReduceFx::Sum: return plain_sum;
    case ReduceFx::Max: return max;
    case ReduceFx::Min: return min;
  }
  return 0.0;
}

double LoggerConnector::epoch_value(const Result& r) const {
  if (!r.sync_dist || !strategy_ || strategy_->world_size() == 1) return r.local_epoch_value();
  switch (r.reduce_fx) {
    case ReduceFx::Mean: {
      if (r.weight > 0) {
        const double sum = strategy_->reduce(r.weighted_sum, ReduceFx::Sum);
        const double weight = strategy_->reduce(r.weight, ReduceFx::Sum);
        return weight > 0 ? sum / weight : 0.0;
      }
      const double sum = strategy_->reduce(r.plain_sum, ReduceFx::Sum);
      const double count = strategy_->reduce(double(r.count), ReduceFx::Sum);
      return sum / std::max(count, 1.0);
    }
    case ReduceFx::Sum: return strategy_->reduce(r.plain_sum, ReduceFx::Sum);
    case ReduceFx::Max: return strategy_->reduce(r.max, ReduceFx::Max);
    case ReduceFx::Min: return strategy_->reduce(r.min, ReduceFx::Min);
  }
  return 0.0;
}

LoggerConnector::Result* LoggerConnector::StageResults::find(const std::string& name) {
  for (auto& r : results) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

LoggerConnector::StageResults& LoggerConnector::results_of(RunningStage stage) { return stages_[stage]; }

void LoggerConnector::log(const std::string& name, double value, const LogOptions& options) {
  TANDEM_CHECK(!name.empty(), ValueError, "log(): the metric name is empty; give it a name like \"train_loss\"");
  TANDEM_CHECK(!(options.rank_zero_only && options.sync_dist), ValueError,
               "log('" + name + "'): rank_zero_only=true and sync_dist=true together would make rank 0 wait for ranks "
               "that never log it; use one of them");
  if (options.rank_zero_only && strategy_ && !strategy_->is_global_zero()) return;
  // Lightning's defaults: per step in training steps, per epoch everywhere else.
  const bool step_hook = hook_ == LogHook::TrainingStep;
  const bool on_step = options.on_step.value_or(step_hook);
  const bool on_epoch = options.on_epoch.value_or(!step_hook);
  if (!on_step && !on_epoch) return;  // logged nowhere, as Lightning
  // The step value is reduced now; epoch aggregates stay local until end_epoch syncs them.
  const double step_value = options.sync_dist && on_step && strategy_ ? strategy_->reduce(value, options.reduce_fx) : value;
  const double weight = static_cast<double>(options.batch_size.value_or(batch_size_));

  StageResults& stage = results_of(stage_);
  Result* r = stage.find(name);
  if (!r) {
    Result fresh;
    fresh.name = name;
    fresh.on_step = on_step;
    fresh.on_epoch = on_epoch;
    fresh.prog_bar = options.prog_bar;
    fresh.to_logger = options.logger;
    fresh.reduce_fx = options.reduce_fx;
    fresh.sync_dist = options.sync_dist;
    fresh.max = -std::numeric_limits<double>::infinity();
    fresh.min = std::numeric_limits<double>::infinity();
    stage.results.push_back(fresh);
    r = &stage.results.back();
  } else if (r->reduce_fx != options.reduce_fx || r->on_step != on_step || r->on_epoch != on_epoch ||
             r->sync_dist != options.sync_dist) {
    throw ValueError("log('" + name + "'): logged again with different options (reduce_fx=" +
                     reduce_name(options.reduce_fx) + " vs " + reduce_name(r->reduce_fx) +
                     ", on_step/on_epoch, sync_dist); log each name with the same options throughout an epoch");
  }
  r->step_value = step_value;
  r->updated_this_step = true;
  r->weighted_sum += value * weight;
  r->weight += weight;
  r->plain_sum += value;
  r->max = std::max(r->max, value);
  r->min = std::min(r->min, value);
  r->count += 1;
}

void LoggerConnector::begin_epoch(RunningStage stage) { results_of(stage).results.clear(); }

void LoggerConnector::publish(const std::string& name, double value, bool prog_bar, bool to_logger, Metrics* for_logger) {
  callback_metrics_[name] = value;
  if (prog_bar) progress_bar_metrics_[name] = value;
  if (to_logger) {
    logged_metrics_[name] = value;
    if (for_logger) (*for_logger)[name] = value;
  }
}

LoggerConnector::Metrics LoggerConnector::end_step(RunningStage stage) {
  Metrics rows;
  for (Result& r : results_of(stage).results) {
    if (!r.updated_this_step) continue;
    r.updated_this_step = false;
    if (!r.on_step) continue;
    if (r.on_epoch) {
      publish(r.name + "_step", r.step_value, r.prog_bar, r.to_logger, &rows);
      callback_metrics_[r.name] = r.step_value;  // the latest of the fork
    } else {
      publish(r.name, r.step_value, r.prog_bar, r.to_logger, &rows);
    }
  }
  return rows;
}

LoggerConnector::Metrics LoggerConnector::end_epoch(RunningStage stage) {
  Metrics rows;
  for (Result& r : results_of(stage).results) {
    r.updated_this_step = false;
    if (!r.on_epoch || r.count == 0) continue;
    const double v = epoch_value(r);
    r.final_epoch_value = v;
    if (r.on_step) {
      publish(r.name + "_epoch", v, r.prog_bar, r.to_logger, &rows);
      callback_metrics_[r.name] = v;
      progress_bar_metrics_.erase(r.name + "_step");  // Lightning shows the epoch value once the epoch ends
    } else {
      publish(r.name, v, r.prog_bar, r.to_logger, &rows);
    }
  }
  return rows;
}

LoggerConnector::Metrics LoggerConnector::epoch_metrics(RunningStage stage) const {
  Metrics out;
  auto it = stages_.find(stage);
  if (it == stages_.end()) return out;
  for (const Result& r : it->second.results) {
    if (!r.on_epoch || r.count == 0) continue;
    out[r.on_step ? r.name + "_epoch" : r.name] = r.final_epoch_value ? *r.final_epoch_value : r.local_epoch_value();
  }
  return out;
}

void LoggerConnector::restore(const Snapshot& s) {
  callback_metrics_ = s.callback;
  progress_bar_metrics_ = s.progress_bar;
  logged_metrics_ = s.logged;
}

void LoggerConnector::clear() {
  stages_.clear();
  callback_metrics_.clear();
  progress_bar_metrics_.clear();
  logged_metrics_.clear();
}

}  // namespace tandem::trainer
