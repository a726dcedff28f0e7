// TrainerOptions: Lightning's Trainer arguments with Lightning's defaults. Each is a
// `--trainer.<name>` option described once, by a row of trainer_option_table.cpp (key, member,
// kind, help, check; the default is the member's). The hardware ones are resolved by
// plan_execution; the rest drive the loops. validate_trainer_options() throws ConfigError for
// anything out of range, naming the option, the value and what is allowed.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "engine/accelerators/devices_spec.h"
#include "engine/strategies/execution_plan.h"

namespace tandem::trainer {

class Callback;

// limit_*_batches and val_check_interval: an int is a count of batches, a float a fraction of
// the available ones (Lightning's int-or-float arguments). `1` and `1.0` mean different things.
class BatchCount {
 public:
  BatchCount(int count) : value_(static_cast<int64_t>(count)) {}      // NOLINT: like Lightning's int
  BatchCount(int64_t count) : value_(count) {}                        // NOLINT
  BatchCount(double fraction) : value_(fraction) {}                   // NOLINT: like Lightning's float
  bool is_count() const { return std::holds_alternative<int64_t>(value_); }
  int64_t count() const { return std::get<int64_t>(value_); }
  double fraction() const { return std::get<double>(value_); }
  // "10" or "0.25": a '.', 'e' or "inf" in the text makes it a fraction. ConfigError otherwise.
  static BatchCount parse(const std::string& text, const std::string& option);
  std::string str() const;  // "10" or "0.25" (a fraction always shows a '.')

 private:
  std::variant<int64_t, double> value_;
};

// fast_dev_run: false (off), true (1 batch) or n batches of train/val/test/predict, one epoch,
// no sanity check, no logger or checkpoint writes.
struct FastDevRun {
  int64_t batches = 0;
  FastDevRun(bool on = false) : batches(on ? 1 : 0) {}  // NOLINT
  FastDevRun(int n) : batches(n) {}                      // NOLINT
  FastDevRun(int64_t n) : batches(n) {}                  // NOLINT
  bool enabled() const { return batches > 0; }
};

// The hardware options (accelerator, devices, strategy, num_nodes, precision,
// auto_select_gpus) come from HardwareOptions and are handed to plan_execution as they are.
struct TrainerOptions : HardwareOptions {
  // ---- distributed (Lightning's DDPStrategy(process_group_backend=..., timeout=...)) ----
  std::string process_group_backend = "auto";  // auto (nccl for CUDA when built, else mpi) | mpi | nccl
  double collective_timeout = 600.0;           // seconds; a collective that takes longer fails the job
  // Embedding in an MPI code: train on the host's communicator (collectives::host_comm(MPI_Comm)
  // from collectives/mpi/host_comm.h, or a Fortran integer handle) instead of MPI_COMM_WORLD.
  // World size and ranks come from it; the host owns MPI (initializes it before, finalizes it
  // after); Tandem duplicates the communicator, frees only its duplicate, and never relaunches.
  // Every rank of it constructs the Trainer together. Not a command-line option.
  std::optional<collectives::HostComm> communicator;
  // Seconds a rank may go without progress (a phase of a training step, an evaluation batch, a
  // checkpoint) before its watchdog ends the job, naming the phase it is stuck in
  // (step_watchdog.h). Unset: collective_timeout plus the 10 s abort grace when the job has
  // several processes (a backstop: the collective timeout names a late rank first), off in one.
  // 0: off.
  std::optional<double> step_timeout;

  // ---- restarts (the `tandem fit` process that launches the job; docs/ELASTIC.md) ----
  int64_t max_restarts = 0;                  // relaunches after a lost rank or a timeout
  std::optional<int64_t> min_processes;      // elastic: a restart may run at fewer processes, not below this
  std::string elastic_batch = "per_rank";    // at fewer processes keep "per_rank" or "global" batch

  // ---- loops ----
  // Unset: 1000 when max_steps is -1, else no epoch limit (Lightning). -1: no limit.
  std::optional<int64_t> max_epochs;
  int64_t max_steps = -1;  // optimizer steps; -1: no limit
  BatchCount limit_train_batches = 1.0;
  BatchCount limit_val_batches = 1.0;
  BatchCount limit_test_batches = 1.0;
  BatchCount limit_predict_batches = 1.0;
  // Validate every n training batches (int) or this fraction of the epoch (float <= 1).
  BatchCount val_check_interval = 1.0;
  // Validate every n epochs; unset: only by val_check_interval, which then counts batches
  // across epochs (must be an int).
  std::optional<int64_t> check_val_every_n_epoch = 1;
  int64_t num_sanity_val_steps = 2;  // -1: the whole validation set
  int64_t accumulate_grad_batches = 1;
  std::optional<double> gradient_clip_val;      // unset: no clipping
  std::string gradient_clip_algorithm = "norm";  // "norm" | "value"
  int64_t log_every_n_steps = 50;
  std::string default_root_dir = ".";
  bool allow_tf32 = false;  // float32 GEMM/conv on GPUs may use TF32 tensor cores
  bool cuda_graph = false;  // capture forward+backward into a CUDA graph (cuda_graph_step.h)
  bool enable_checkpointing = true;  // adds a ModelCheckpoint when callbacks have none
  bool enable_progress_bar = true;
  bool enable_model_summary = true;
  FastDevRun fast_dev_run = false;
  std::vector<std::shared_ptr<Callback>> callbacks;
};

// Throws ConfigError for the first invalid value, e.g. "trainer option max_steps=-5 is not
// valid: expected -1 (no limit) or a number of optimizer steps >= 0".
void validate_trainer_options(const TrainerOptions& options);

// The hardware part, as plan_execution takes it.
HardwareOptions hardware_options(const TrainerOptions& options);

// Every option except callbacks from a resolved configuration tree (the `trainer` section made
// by make_trainer_schema + parse_args). Throws ConfigError when a value has the wrong shape.
TrainerOptions trainer_options_from_config(const YAML::Node& config);

}  // namespace tandem::trainer
