#pragma once
// What every Trainer-driven benchmark sets the same way: one epoch on the CPU with nothing but
// the training steps inside the timed fit() (no sanity validation, checkpoints, progress bar or
// model summary), its logs in a scratch directory that every rank of one mpirun names alike (after
// the launcher, the ranks' parent process) and that the benchmark removes when it is done.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "engine/trainer/trainer_options.h"

namespace tandem::bench {

inline std::filesystem::path scratch_dir(const std::string& bench_name) {
  return std::filesystem::temp_directory_path() / ("tandem_bench_" + bench_name + "_" + std::to_string(getppid()));
}

inline trainer::TrainerOptions training_only_options(const std::string& bench_name) {
  trainer::TrainerOptions o;
  o.accelerator = "cpu";
  o.max_epochs = 1;
  o.num_sanity_val_steps = 0;
  o.enable_checkpointing = false;
  o.enable_progress_bar = false;
  o.enable_model_summary = false;
  o.default_root_dir = scratch_dir(bench_name).string();
  return o;
}

}  // namespace tandem::bench
