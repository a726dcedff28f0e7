// MpirunLauncher: how a program started by hand becomes a multi-process job (Lightning's
// subprocess script launcher, with mpirun in the role of torchrun). When the plan needs W
// processes and no launcher started this one, the program re-runs itself as
//
//   mpirun -np W [--oversubscribe] <this executable> <the same arguments>
//
// after printing that command. The environment carries over, plus TANDEM_LAUNCHED_BY_TANDEM=1
// (a child that still sees no launcher says so instead of relaunching forever),
// TANDEM_STDOUT_IS_TTY (whether the progress bar may redraw in place) and, as root,
// Open MPI's OMPI_ALLOW_RUN_AS_ROOT pair. --oversubscribe is added when W exceeds the cores
// here, so `--trainer.accelerator=cpu --trainer.devices=4` runs on a 2-core machine.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "engine/strategies/execution_plan.h"

namespace tandem {

// The command line that would run `argv` (argv[0] = this program) as the plan's job.
std::vector<std::string> mpirun_command(const ExecutionPlan& plan, const std::vector<std::string>& argv);

// The command that runs `argv` as a job of `world_size` processes on this machine:
// mpirun_command for several, this executable itself for one.
std::vector<std::string> job_command(const ExecutionPlan& plan, int world_size, const std::vector<std::string>& argv);

// Runs `cmd` as a child process (PATH searched) with the relaunch environment (as
// relaunch_with_mpirun sets it) plus `extra_env`, and waits for it. Returns its exit code, or
// 128 + N when a signal N ended it. A SIGINT or SIGTERM this process receives meanwhile is passed
// on to the child and sets *interrupted. CommError when the child cannot be started.
int run_job_and_wait(const std::vector<std::string>& cmd, const std::vector<std::pair<std::string, std::string>>& extra_env,
                     bool* interrupted);

// Replaces this process with mpirun_command(plan, argv) (execvp) and never returns on success.
// Throws ConfigError when the plan cannot be launched from here (several nodes need the
// scheduler's or mpirun's host list; a relaunched child that still sees no launcher), and
// CommError when mpirun cannot be executed (not installed, not on PATH).
[[noreturn]] void relaunch_with_mpirun(const ExecutionPlan& plan, const std::vector<std::string>& argv);

}  // namespace tandem
