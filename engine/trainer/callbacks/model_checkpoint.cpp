#include "engine/trainer/callbacks/model_checkpoint.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "base/error.h"
#include "engine/trainer/checkpoint.h"
#include "engine/trainer/trainer.h"

namespace fs = std::filesystem;

namespace tandem::trainer {

namespace {

std::string shortest(double v) {
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// Python-style format spec (".3f", "03d", ".2e") applied through printf.
std::string format_with_spec(double v, bool is_integer, const std::string& spec) {
  if (spec.empty()) return is_integer ? std::to_string(static_cast<long long>(v)) : shortest(v);
  const char kind = spec.back();
  char buf[128];
  const std::string fmt = "%" + spec;
  if (kind == 'd') {
    std::snprintf(buf, sizeof buf, fmt.c_str(), static_cast<long long>(v));
  } else if (std::string("eEfFgG%").find(kind) != std::string::npos) {
    std::snprintf(buf, sizeof buf, fmt.c_str(), v);
  } else {
    throw ConfigError("ModelCheckpoint filename: format '" + spec + "' is not supported; use one like .3f, .2e or 03d");
  }
  return buf;
}

}  // namespace

ModelCheckpoint::ModelCheckpoint(ModelCheckpointOptions options) : options_(std::move(options)) {
  TANDEM_CHECK(options_.mode == "min" || options_.mode == "max", ConfigError,
               "ModelCheckpoint(mode='" + options_.mode + "') is not valid: expected 'min' or 'max'");
  TANDEM_CHECK(options_.save_top_k >= -1, ConfigError,
               "ModelCheckpoint(save_top_k=" + std::to_string(options_.save_top_k) + ") is not valid: expected -1 (all), 0 or a count");
  const bool by_time = options_.train_time_interval.has_value();
  every_n_epochs_ = options_.every_n_epochs.value_or(options_.every_n_train_steps > 0 || by_time ? 0 : 1);
  TANDEM_CHECK(every_n_epochs_ >= 0, ConfigError,
               "ModelCheckpoint(every_n_epochs=" + std::to_string(every_n_epochs_) + ") is not valid: expected >= 0 (0: never)");
  TANDEM_CHECK(options_.every_n_train_steps >= 0, ConfigError,
               "ModelCheckpoint(every_n_train_steps=" + std::to_string(options_.every_n_train_steps) +
                   ") is not valid: expected >= 0 (0: not by steps)");
  TANDEM_CHECK(!by_time || (std::isfinite(*options_.train_time_interval) && *options_.train_time_interval > 0), ConfigError,
               "ModelCheckpoint(train_time_interval=" + (by_time ? shortest(*options_.train_time_interval) : "") +
                   ") is not valid: expected a number of seconds > 0, or null");
  const int triggers = int(every_n_epochs_ >= 1) + int(options_.every_n_train_steps >= 1) + int(by_time);
  TANDEM_CHECK(triggers <= 1, ConfigError,
               "ModelCheckpoint(every_n_train_steps=" + std::to_string(options_.every_n_train_steps) +
                   ", every_n_epochs=" + std::to_string(every_n_epochs_) + ", train_time_interval=" +
                   (by_time ? shortest(*options_.train_time_interval) : "null") +
                   "): these triggers are mutually exclusive (Lightning's rule); set only one of them");
  TANDEM_CHECK(!options_.monitor.empty() || options_.save_top_k <= 1, ConfigError,
               "ModelCheckpoint(save_top_k=" + std::to_string(options_.save_top_k) + ") needs a monitor to rank checkpoints by; "
               "set monitor (e.g. \"val_loss\"), or save_top_k=-1 to keep every checkpoint");
  if (options_.filename.empty()) options_.filename = "{epoch}-{step}";
}

std::string ModelCheckpoint::state_key() const {
  std::string key = "ModelCheckpoint{monitor=" + options_.monitor + ",mode=" + options_.mode +
                    ",every_n_epochs=" + std::to_string(every_n_epochs_);
  if (options_.every_n_train_steps > 0) key += ",every_n_train_steps=" + std::to_string(options_.every_n_train_steps);
  if (options_.train_time_interval) key += ",train_time_interval=" + shortest(*options_.train_time_interval);
  return key + "}";
}

nlohmann::json ModelCheckpoint::state_dict() const {
  nlohmann::json s;
  s["monitor"] = options_.monitor;
  s["dirpath"] = dirpath_;
  s["best_model_path"] = best_model_path_;
  s["best_model_score"] = best_model_score_ ? nlohmann::json(*best_model_score_) : nlohmann::json();
  s["current_score"] = current_score_ ? nlohmann::json(*current_score_) : nlohmann::json();
  s["best_k_models"] = best_k_models_;
  s["kth_best_model_path"] = kth_best_model_path_;
  s["last_model_path"] = last_model_path_;
  return s;
}

void ModelCheckpoint::load_state_dict(const nlohmann::json& s) {
  best_model_path_ = s.value("best_model_path", "");
  // The rest only means something in the same directory (Lightning keeps just best_model_path
  // when the directory changed, e.g. a new version_N).
  if (s.value("dirpath", "") != dirpath_) return;
  if (s.contains("best_model_score") && s["best_model_score"].is_number()) best_model_score_ = s["best_model_score"].get<double>();
  if (s.contains("current_score") && s["current_score"].is_number()) current_score_ = s["current_score"].get<double>();
  best_k_models_ = s.value("best_k_models", std::map<std::string, double>{});
  // The worst of best_k_models, derived from it rather than trusted: a state whose path is not
  // among them made the next save look up a missing entry (a fuzzed checkpoint found it).
  kth_best_model_path_.clear();
  for (const auto& [path, score] : best_k_models_) {
    if (kth_best_model_path_.empty() || better(best_k_models_.at(kth_best_model_path_), score)) kth_best_model_path_ = path;
  }
  last_model_path_ = s.value("last_model_path", "");
}

void ModelCheckpoint::setup(Trainer& trainer, LightningModule&, const std::string& stage) {
  if (stage != "fit" || trainer.fast_dev_run()) return;
  dirpath_ = !options_.dirpath.empty() ? options_.dirpath : (fs::path(trainer.log_dir()) / "checkpoints").string();
}

bool ModelCheckpoint::should_skip(Trainer& trainer) const {
  return !trainer.fitting() || trainer.fast_dev_run() || trainer.sanity_checking() ||
         last_saved_step_ == trainer.global_step();
}

bool ModelCheckpoint::saves_on_train_epoch_end(Trainer& trainer) const {
  if (options_.save_on_train_epoch_end) return *options_.save_on_train_epoch_end;
  const TrainerOptions& o = trainer.options();
  if (!o.check_val_every_n_epoch || *o.check_val_every_n_epoch != 1) return false;
  if (trainer.num_val_batches() == 0) return true;
  return !o.val_check_interval.is_count() && o.val_check_interval.fraction() == 1.0;
}

bool ModelCheckpoint::epoch_due(const Trainer& trainer) const {
  return every_n_epochs_ >= 1 && (trainer.current_epoch() + 1) % every_n_epochs_ == 0;
}

void ModelCheckpoint::on_train_start(Trainer&, LightningModule&) { last_time_checked_ = std::chrono::steady_clock::now(); }

void ModelCheckpoint::on_train_batch_end(Trainer& trainer, LightningModule&, const Tensor&, const data::Batch&, int64_t) {
  if (should_skip(trainer) || trainer.accumulating_gradients()) return;
  const bool steps_due = options_.every_n_train_steps >= 1 && trainer.global_step() % options_.every_n_train_steps == 0;
  bool time_due = false;
  const auto now = std::chrono::steady_clock::now();
  if (options_.train_time_interval) {
    time_due = std::chrono::duration<double>(now - last_time_checked_).count() >= *options_.train_time_interval;
    // The ranks' clocks differ; all of them must take part in the save (its barriers).
    time_due = trainer.strategy().broadcast_from_zero(time_due ? 1 : 0) != 0;
  }
  if (!steps_due && !time_due) return;
  if (time_due) last_time_checked_ = now;
  save(trainer);
}

void ModelCheckpoint::on_train_epoch_end(Trainer& trainer, LightningModule&) {
  if (should_skip(trainer) || !saves_on_train_epoch_end(trainer) || !epoch_due(trainer)) return;
  save(trainer);
}

void ModelCheckpoint::on_validation_end(Trainer& trainer, LightningModule&) {
  if (should_skip(trainer) || saves_on_train_epoch_end(trainer) || !epoch_due(trainer)) return;
  save(trainer);
}

std::string ModelCheckpoint::format_checkpoint_name(int64_t epoch, int64_t step,
                                                    const std::map<std::string, double>& metrics) const {
  const std::string& t = options_.filename;
  std::string out;
  size_t i = 0;
  while (i < t.size()) {
    const size_t open = t.find('{', i);
    if (open == std::string::npos) {
      out += t.substr(i);
      break;
    }
    const size_t close = t.find('}', open);
    if (close == std::string::npos) {
      throw ConfigError("ModelCheckpoint filename '" + t + "' has a '{' without its '}'");
    }
    out += t.substr(i, open - i);
    const std::string group = t.substr(open + 1, close - open - 1);
    const size_t colon = group.find(':');
    const std::string key = group.substr(0, colon);
    const std::string spec = colon == std::string::npos ? "" : group.substr(colon + 1);
    double value = 0.0;  // a metric not logged yet formats as 0, as Lightning
    bool integer = false;
    if (key == "epoch") { value = double(epoch); integer = true; }
    else if (key == "step") { value = double(step); integer = true; }
    else if (auto it = metrics.find(key); it != metrics.end()) value = it->second;
    const std::string prefix = key + "=";
    const bool written = out.size() >= prefix.size() && out.compare(out.size() - prefix.size(), prefix.size(), prefix) == 0;
    if (options_.auto_insert_metric_name && !written) out += prefix;
    out += format_with_spec(value, integer, spec);
    i = close + 1;
  }
  // Metric names like "train/loss" must not create directories.
  for (char& c : out) {
    if (c == '/') c = '_';
  }
  return out;
}

std::string ModelCheckpoint::unique_path(const std::string& stem, const std::string& replaced) const {
  std::string path = (fs::path(dirpath_) / (stem + ".safetensors")).string();
  for (int v = 1; fs::exists(path) && path != replaced; ++v) {
    path = (fs::path(dirpath_) / (stem + "-v" + std::to_string(v) + ".safetensors")).string();
  }
  return path;
}

void ModelCheckpoint::remove_checkpoint(const Trainer& trainer, const std::string& path) const {
  // Lightning's rule: never delete a file outside this callback's directory (a run resumed from
  // another version's checkpoint inherits its paths) or the checkpoint this fit resumed from.
  if (!trainer.is_global_zero()) return;
  std::error_code ec;
  const fs::path file = fs::weakly_canonical(path, ec);
  const fs::path dir = fs::weakly_canonical(dirpath_, ec);
  if (ec || file.parent_path() != dir) return;
  if (!trainer.ckpt_path().empty() && fs::weakly_canonical(trainer.ckpt_path(), ec) == file) return;
  fs::remove(file, ec);
}

bool ModelCheckpoint::better(double a, double b) const { return options_.mode == "min" ? a < b : a > b; }

void ModelCheckpoint::save(Trainer& trainer) {
  std::map<std::string, double> metrics = trainer.callback_metrics();
  metrics["epoch"] = double(trainer.current_epoch());
  metrics["step"] = double(trainer.global_step());
  save_top_k(trainer, metrics);
  if (options_.save_last) {
    const std::string path = (fs::path(dirpath_) / kLastCheckpointName).string();
    last_model_path_ = path;
    trainer.save_checkpoint(path);
  }
  last_saved_step_ = trainer.global_step();
}

void ModelCheckpoint::save_top_k(Trainer& trainer, const std::map<std::string, double>& metrics) {
  if (options_.save_top_k == 0) return;
  const std::string stem = format_checkpoint_name(trainer.current_epoch(), trainer.global_step(), metrics);
  if (options_.monitor.empty()) {
    // Nothing to rank by: keep the latest (save_top_k=1) or all of them (-1).
    const std::string previous = best_model_path_;
    const std::string path = unique_path(stem, options_.save_top_k == 1 ? previous : "");
    best_model_path_ = path;
    trainer.save_checkpoint(path);
    if (options_.save_top_k == 1 && !previous.empty() && previous != path) remove_checkpoint(trainer, previous);
    return;
  }
  auto it = metrics.find(options_.monitor);
  if (it == metrics.end()) {
    std::string available;
    for (const auto& [k, v] : metrics) available += (available.empty() ? "" : ", ") + k;
    throw ConfigError("ModelCheckpoint(monitor='" + options_.monitor + "') found no such metric; logged: " + available +
                      ". Log it with log(\"" + options_.monitor + "\", value) in the LightningModule, or fix the monitor name");
  }
  double current = it->second;
  if (std::isnan(current)) current = options_.mode == "min" ? INFINITY : -INFINITY;  // never the best
  current_score_ = current;
  const bool room = options_.save_top_k == -1 || int64_t(best_k_models_.size()) < options_.save_top_k;
  if (!room && !better(current, best_k_models_.at(kth_best_model_path_))) return;

  std::string replaced;
  if (!room) replaced = kth_best_model_path_;
  const std::string path = unique_path(stem, replaced);
  best_k_models_[path] = current;
  if (!room && kth_best_model_path_ != path) {
    best_k_models_.erase(kth_best_model_path_);
    remove_checkpoint(trainer, kth_best_model_path_);
  }
  // The worst kept one is the next to go; the best one is what ckpt_path="best" loads.
  kth_best_model_path_.clear();
  best_model_path_.clear();
  for (const auto& [p, score] : best_k_models_) {
    if (kth_best_model_path_.empty() || better(best_k_models_.at(kth_best_model_path_), score)) kth_best_model_path_ = p;
    if (best_model_path_.empty() || better(score, best_k_models_.at(best_model_path_))) best_model_path_ = p;
  }
  best_model_score_ = best_k_models_.at(best_model_path_);
  trainer.save_checkpoint(path);
}

}  // namespace tandem::trainer
