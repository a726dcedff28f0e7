// The restart agent: what `tandem fit --trainer.max_restarts=K` does in the process started by
// hand (torchrun's elastic agent, with mpirun launching the workers). Instead of replacing
// itself with mpirun (mpirun_launcher.h), it runs the job as a child and waits:
//
//   attempt 0: the job as planned (mpirun -np W <this program> fit <args>, or the program
//              itself for one process), with TANDEM_RESTART_COUNT=0 and TANDEM_FAILURE_DIR set;
//   failure:   judged by what the ranks recorded (engine/trainer/job_failure.h) and the exit
//              status: a lost rank (killed: exit status 128 + signal), a collective that failed
//              or timed out (CommError) or a stuck rank (the step watchdog) is restarted; any
//              other error (configuration, data, a NaN loss) would fail again and ends the run
//              with the job's exit code;
//   restart:   the same command plus --ckpt_path=<the newest complete checkpoint> (and, when the
//              size changes, --trainer.devices / --trainer.accumulate_grad_batches), printed
//              with the cause, at most K times; then an error naming the last cause, exit 1.
//
// The newest complete checkpoint: among the .safetensors files in the job's checkpoint
// directories (each configured ModelCheckpoint's dirpath, and
// <default_root_dir>/lightning_logs/version_*/checkpoints) modified since the agent started
// (so an earlier run's files are never picked up), the one that loads (atomic rename plus
// CRC-32: a torn or partial file is skipped) with the most training done (global step, then
// batches). None: the attempt starts where the run started (its own --ckpt_path, if any).
//
// Elastic size (min_processes): the slot of a failed attempt counts as lost, so each restart
// runs at one process fewer than the attempt before, never below min_processes (fewer: the
// run ends with an error). elastic_batch=per_rank keeps data.batch_size and
// accumulate_grad_batches (the global batch shrinks); global keeps batch x processes x
// accumulate_grad_batches by raising accumulate_grad_batches, at the largest size left that
// divides it.
//
// Inside a Slurm allocation (run by the batch script of `sbatch`, not by srun), each attempt is
// an srun step on the allocation's nodes,
//   srun --nodes=N --ntasks=W --ntasks-per-node=P --mpi=pmix --kill-on-bad-exit=1 <this program> fit <args>,
// so jobs of several nodes restart too. The ranks' failure reports go to a directory under
// default_root_dir, which the nodes share (each node has its own /tmp). After a failure the
// agent counts the nodes the job still holds (`scontrol show job`; with `sbatch --no-kill` Slurm
// keeps a job that lost a node): with all of them, the step restarts at its size; with fewer,
// it restarts on the nodes left when min_processes allows (sizes are whole nodes, multiples of
// P), else the run ends with an error naming the lost nodes' count.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "engine/strategies/cluster_environment.h"
#include "engine/strategies/execution_plan.h"
#include "engine/trainer/trainer_options.h"

namespace tandem::cli {

// The cluster environment to plan with when this process will be the restart agent inside a
// Slurm batch script (max_restarts > 0, in a Slurm job, not in an srun step): "local" with the
// allocation attached, so the plan is a job to launch (with srun) instead of the batch script's
// one process. nullopt everywhere else (the environment is detected as usual).
std::optional<ClusterEnvironment> restart_agent_cluster(const trainer::TrainerOptions& options);

// True when this `tandem fit` must run the job under the agent (max_restarts > 0 and this
// process is not itself a supervised one). ConfigError when restarts are asked for a job the
// agent cannot relaunch: started by mpirun/srun, several nodes outside a Slurm allocation (or
// more than it holds), a strategy that must be launched another way, or min_processes /
// elastic_batch values that cannot work.
bool needs_restart_agent(const trainer::TrainerOptions& options, const ExecutionPlan& plan);

// Runs `tandem fit <fit_args>` under the agent; returns the exit code of the run.
// batch_size: data.batch_size, for the messages about the global batch.
int run_fit_with_restarts(const std::vector<std::string>& fit_args, const trainer::TrainerOptions& options,
                          const ExecutionPlan& plan, int64_t batch_size);

}  // namespace tandem::cli
