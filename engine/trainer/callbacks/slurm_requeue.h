// SlurmRequeue: Lightning's SLURM auto-requeue. Slurm warns a job before its time limit with a
// signal (`#SBATCH --signal=USR1@90`: SIGUSR1 to every task, 90 s ahead); a preemption sends it
// where the cluster sets PreemptParameters=send_user_signal (else SIGTERM, which
// TANDEM_REQUEUE_SIGNAL=TERM makes the trigger), and `scancel --signal=USR1 <job>` sends it by
// hand. On that signal:
//
//   every rank   notes it (an async-signal-safe flag) and finishes the step it is in; after each
//                optimizer step the ranks agree whether any of them got it (reduce_any), so they
//                all stop after the same step, whoever was signalled first;
//   all ranks    save <default_root_dir>/hpc_ckpt_<N>.safetensors (N: one above the highest
//                there; Trainer::save_checkpoint, collective, written atomically by rank 0);
//   rank 0       runs `scontrol requeue <SLURM_JOB_ID>`: Slurm ends this run of the job and
//                queues it again with the same script;
//   the ranks    stop training (should_stop) and exit.
//
// The requeued job runs the same `srun tandem fit ...`; with no --ckpt_path, the command line
// resumes from the newest hpc_ckpt_<N>.safetensors in default_root_dir (requeued_job_checkpoint),
// as Lightning resumes from its hpc_ckpt_<N>.ckpt, but only in a job Slurm has requeued
// (SLURM_RESTART_COUNT >= 1): a new job with the same directory starts afresh.
//
// The signal is TANDEM_REQUEUE_SIGNAL (a name, USR1 or SIGUSR1, or a number; default USR1;
// `none` turns the requeue off and leaves the signal's default action). The callback is added
// by `tandem fit` to a job that srun started inside a Slurm job (slurm_requeue_for).
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "engine/strategies/cluster_environment.h"
#include "engine/trainer/callback.h"

namespace tandem::trainer {

class SlurmRequeue : public Callback {
 public:
  // Installs the handler for `signal` now (a signal before the first step is kept too); the
  // destructor puts the previous handler back. One instance at a time per process.
  SlurmRequeue(int signal, std::string job_id, std::string scontrol = "scontrol");
  ~SlurmRequeue() override;
  SlurmRequeue(const SlurmRequeue&) = delete;
  SlurmRequeue& operator=(const SlurmRequeue&) = delete;

  std::string name() const override { return "SlurmRequeue"; }
  void on_train_batch_end(Trainer& trainer, LightningModule& module, const Tensor& loss, const data::Batch& batch,
                          int64_t batch_idx) override;

  // The path of the checkpoint the last requeue saved; empty before one.
  const std::string& saved_checkpoint() const { return saved_; }

 private:
  int signal_;
  std::string job_id_, scontrol_, saved_;
  void* previous_handler_;  // struct sigaction, kept opaque to spare includers <csignal>
};

// The signal a TANDEM_REQUEUE_SIGNAL value names: HUP, INT, QUIT, USR1, USR2, ALRM, TERM (with
// or without SIG) or a number 1..64; std::nullopt for `none`; ConfigError for anything else.
std::optional<int> parse_requeue_signal(const std::string& text);

// The callback for this process: inside an srun step of a Slurm job (cluster.slurm->in_step)
// with TANDEM_REQUEUE_SIGNAL not `none`; else nullptr.
std::shared_ptr<SlurmRequeue> slurm_requeue_for(const ClusterEnvironment& cluster,
                                                const EnvLookup& env = process_environment());

// The newest <dir>/hpc_ckpt_<N>.safetensors (highest N), std::nullopt when there is none.
std::optional<std::string> newest_hpc_checkpoint(const std::string& dir);

// What a run in an srun step resumes from when no --ckpt_path is given: the newest hpc
// checkpoint in `dir` when Slurm has requeued the job (SLURM_RESTART_COUNT >= 1); else nullopt.
std::optional<std::string> requeued_job_checkpoint(const ClusterEnvironment& cluster, const std::string& dir,
                                                   const EnvLookup& env = process_environment());

}  // namespace tandem::trainer
