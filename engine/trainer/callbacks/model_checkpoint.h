// ModelCheckpoint: saves checkpoints during fit, keeping the best save_top_k by a monitored
// metric (or the latest ones when nothing is monitored), plus last.safetensors with save_last.
//
// When it saves (Lightning's triggers, at most one of them set):
//   every_n_epochs (the default, 1): at the end of each training epoch when validation runs
//     once per epoch at its end (or not at all); otherwise after each validation run;
//   every_n_train_steps = n: after every n-th optimizer step (on_train_batch_end);
//   train_time_interval = s seconds: after the first optimizer step that ends s seconds or more
//     after the previous save (or the start of training); rank 0's clock decides for all ranks.
// Never during the sanity check or fast_dev_run, never twice at one global step, and never
// between the batches of an accumulated step (its gradients would not be in the checkpoint),
// so a step or time checkpoint resumes exactly (checkpoint_connector.cpp).
//
// filename is a template over "epoch", "step" and any callback metric, with optional printf-
// like formats: "{epoch}-{step}" (the default) gives "epoch=3-step=120.safetensors", and
// "{epoch}-{val_loss:.3f}" gives "epoch=3-val_loss=0.123.safetensors"; the "name=" prefix is
// added unless the template already writes it ("epoch={epoch}") or auto_insert_metric_name is
// false. A name already used by another kept checkpoint gets "-v1", "-v2", ...
#pragma once
#include <chrono>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "engine/trainer/callback.h"

namespace tandem::trainer {

struct ModelCheckpointOptions {
  std::string dirpath;      // "": <log_dir>/checkpoints (<default_root_dir>/checkpoints without a logger)
  std::string filename;     // "": "{epoch}-{step}"
  std::string monitor;      // "": keep the latest save_top_k
  std::string mode = "min"; // "min" | "max"
  int64_t save_top_k = 1;   // -1: keep all; 0: none (last.safetensors still, with save_last)
  bool save_last = false;
  // Unset: 1 unless every_n_train_steps or train_time_interval is set, else 0 (Lightning).
  std::optional<int64_t> every_n_epochs;
  int64_t every_n_train_steps = 0;             // 0: not by steps
  std::optional<double> train_time_interval;   // seconds; unset: not by time
  bool auto_insert_metric_name = true;
  // nullopt: Lightning's rule above; true/false: force saving at train epoch end or after validation.
  std::optional<bool> save_on_train_epoch_end;
};

class ModelCheckpoint : public Callback {
 public:
  explicit ModelCheckpoint(ModelCheckpointOptions options = {});
  std::string name() const override { return "ModelCheckpoint"; }
  std::string state_key() const override;
  bool is_monitoring() const override { return true; }
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;

  void setup(Trainer& trainer, LightningModule& module, const std::string& stage) override;
  void on_train_start(Trainer& trainer, LightningModule& module) override;
  void on_train_batch_end(Trainer& trainer, LightningModule& module, const Tensor& loss, const data::Batch& batch,
                          int64_t batch_idx) override;
  void on_train_epoch_end(Trainer& trainer, LightningModule& module) override;
  void on_validation_end(Trainer& trainer, LightningModule& module) override;

  const ModelCheckpointOptions& options() const { return options_; }
  const std::string& dirpath() const { return dirpath_; }
  const std::string& best_model_path() const { return best_model_path_; }
  std::optional<double> best_model_score() const { return best_model_score_; }
  const std::string& last_model_path() const { return last_model_path_; }
  // path -> score of every kept top-k checkpoint.
  const std::map<std::string, double>& best_k_models() const { return best_k_models_; }

  // The file name (without directory and extension) the template gives for these values.
  std::string format_checkpoint_name(int64_t epoch, int64_t step, const std::map<std::string, double>& metrics) const;

 private:
  bool should_skip(Trainer& trainer) const;
  bool epoch_due(const Trainer& trainer) const;
  bool saves_on_train_epoch_end(Trainer& trainer) const;
  void save(Trainer& trainer);
  void save_top_k(Trainer& trainer, const std::map<std::string, double>& metrics);
  bool better(double a, double b) const;
  // Deletes a superseded checkpoint (rank 0), unless it is outside dirpath or the one resumed from.
  void remove_checkpoint(const Trainer& trainer, const std::string& path) const;
  std::string unique_path(const std::string& stem, const std::string& keep_if_same) const;

  ModelCheckpointOptions options_;
  std::string dirpath_;
  std::map<std::string, double> best_k_models_;
  std::string best_model_path_, last_model_path_, kth_best_model_path_;
  std::optional<double> best_model_score_;
  std::optional<double> current_score_;
  int64_t every_n_epochs_ = 1;  // options_.every_n_epochs resolved
  int64_t last_saved_step_ = -1;
  std::chrono::steady_clock::time_point last_time_checked_;
};

}  // namespace tandem::trainer
