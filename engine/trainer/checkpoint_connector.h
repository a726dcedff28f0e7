// CheckpointConnector: what the Trainer puts in a checkpoint and how a run continues from one
// (Lightning's checkpoint connector): save_checkpoint, ckpt_path ("last", "best", a file),
// exact resume of fit (weights, optimizer, scheduler, loop position, generator, callbacks), and
// weights alone for validate/test/predict. The format is described in checkpoint_connector.cpp.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::trainer {

class Trainer;
struct Checkpoint;

class CheckpointConnector {
 public:
  explicit CheckpointConnector(Trainer& trainer) : trainer_(trainer) {}

  // "" (fresh), a file, "last" (the newest last.safetensors) or "best" (the best checkpoint of
  // the trainer's ModelCheckpoint) -> the file, or "". ConfigError when there is none.
  std::string resolve_ckpt_path(const std::string& ckpt_path);
  // The run "last"/"best" refer to (Trainer::set_checkpoint_run_dir).
  void set_run_dir(std::string dir) { run_dir_ = std::move(dir); }

  // Rank 0 writes the current state to path atomically; the others wait.
  void save_checkpoint(const std::string& path);
  // fit: everything, so that the run continues exactly where it stopped.
  void restore_fit_state(const std::string& path);
  // validate/test/predict: the weights (and the module's own state).
  void restore_weights(const std::string& path);

  // Where the first epoch of a fit starts; forgotten at the start of every fit.
  struct ResumePoint {
    int64_t skip_batches = 0;          // batches of the resumed epoch done before saving
    bool after_batch_pending = false;  // the checkpoint was saved inside on_train_batch_end
  };
  void forget_resume_point() { resume_ = {}; resume_world_size_ = 0; }
  // A mid-epoch position saved at another world size or batch size, in this run's batches.
  void rescale_resume_position(int64_t batch_size);
  // The resume point, once (the first epoch takes it; later epochs start at their beginning).
  ResumePoint take_resume_point();

 private:
  nlohmann::json dump_trainer_state();
  // The checkpoint "last" means: this run's ModelCheckpoint directories, then the newest
  // lightning_logs/version_N/checkpoints; appends where it looked.
  std::optional<std::string> find_newest_checkpoint(std::vector<std::string>* looked);
  // Says on rank 0 which file a stage restored (and warns when its metadata is unverified).
  void announce_restore(const char* what, const std::string& path, const Checkpoint& ckpt) const;

  Trainer& trainer_;
  std::string run_dir_;
  ResumePoint resume_;
  // The world size and per-rank batch size resume_.skip_batches counts in (the saved run's;
  // batch size 0 when the checkpoint did not record it), rescaled by rescale_resume_position.
  int64_t resume_world_size_ = 0, resume_batch_size_ = 0;
};

}  // namespace tandem::trainer
