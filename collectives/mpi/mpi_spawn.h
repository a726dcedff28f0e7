// Starting the ranks of a job from its first process (ddp_spawn) instead of from mpirun:
// MPI_Comm_spawn starts the others, and the parent-children intercommunicator is merged into one
// intracommunicator in which the spawner is rank 0 and the children follow in their order.
// Works from a singleton (a program started without mpirun): Open MPI then starts its runtime
// daemon for the children.
#pragma once
#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

namespace tandem::collectives::mpi {

// Spawns `count` processes running `program` with `args`, `env` ("KEY=VALUE") added to their
// environment; returns the merged communicator (this process rank 0), which the caller frees.
// Throws CommError when MPI refuses; aborts the job when the children have not joined within
// `timeout` (MPI_Comm_spawn waits forever for a child that died before MPI_Init).
MPI_Comm spawn_and_merge(const std::string& program, const std::vector<std::string>& args, int count,
                         const std::vector<std::string>& env, std::chrono::milliseconds timeout);

// In a process that spawn_and_merge started: the same merged communicator (the caller frees it).
// Throws CommError when this process has no spawning parent; aborts past `timeout`.
MPI_Comm merge_with_parent(std::chrono::milliseconds timeout);

}  // namespace tandem::collectives::mpi
