// Why the processes of a supervised job failed, told to the `tandem fit` process that launched
// them (apps/tandem/restart_agent.h). That process sets kFailureDirVariable for the job; a rank
// that fails records one file there, rank_<r>.json = {rank, error, restartable, message},
// before it exits. A rank killed by a signal records nothing; the launcher's exit status says it.
#pragma once
#include <exception>
#include <string>
#include <vector>

namespace tandem::trainer {

// Set by the restart agent in the job's environment.
inline constexpr const char* kFailureDirVariable = "TANDEM_FAILURE_DIR";
// The attempt a supervised process belongs to: 0 first, then 1, 2, ... (torchrun's restart count).
inline constexpr const char* kRestartCountVariable = "TANDEM_RESTART_COUNT";

struct JobFailure {
  int rank = 0;
  std::string error;         // "CommError", "StepTimeout", "ConfigError", ...
  bool restartable = false;  // a lost or stuck rank: running again can succeed
  std::string message;
};

// A failure as the agent judges it: CommError (a collective failed or timed out, a peer is
// gone) is restartable; every other error (configuration, data, a NaN loss) would fail again.
JobFailure job_failure_from(const std::exception& error, int rank);

// Records the failure when the job is supervised (kFailureDirVariable set), atomically; does
// nothing otherwise. Never throws: it runs on the way out of a failing process.
void record_job_failure(const JobFailure& failure);

// Every failure recorded in dir, by rank; unreadable files are skipped.
std::vector<JobFailure> read_job_failures(const std::string& dir);

// True when this process was started by a restart agent (kRestartCountVariable set).
bool supervised_by_restart_agent();

}  // namespace tandem::trainer
