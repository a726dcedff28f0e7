// Picks a Communicator backend by name. This file's .cpp is the only place that knows which
// backends were compiled in (no #ifdef elsewhere): asking for one that was not says so.
//
// Embedding in an MPI code that already has a communicator: construct
// collectives::MpiCommunicator(your_comm, options) from collectives/mpi/mpi_communicator.h
// instead (see docs/COLLECTIVES.md for who initializes, frees and finalizes what).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"

namespace tandem::collectives {

enum class CommBackend { Local, Mpi, Nccl };

const char* comm_backend_name(CommBackend backend);         // "local", "mpi", "nccl"
CommBackend parse_comm_backend(const std::string& name);    // ConfigError listing the names
bool comm_backend_compiled_in(CommBackend backend);

// Brings up the backend's runtime early (MPI: MPI_Init_thread unless MPI is already
// initialized; Tandem then finalizes it at exit). Optional: make_communicator does it too, but
// a main() that wants MPI to see argc/argv calls this first. No-op for local.
void init_comm_runtime(CommBackend backend, int* argc = nullptr, char*** argv = nullptr);

// The world communicator of a backend: local = one process; mpi = MPI_COMM_WORLD (duplicated,
// so Tandem's traffic never mixes with the application's); nccl = every MPI rank on one GPU,
// `device_index` (default: the local rank), bootstrapped over MPI_COMM_WORLD. Throws
// ConfigError when the backend was not built ("built without MPI").
std::shared_ptr<Communicator> make_communicator(CommBackend backend, const CommOptions& options = {},
                                                int device_index = -1);

// ddp_spawn: starts `count` more processes running `program args` (MPI_Comm_spawn; `env` lines
// "KEY=VALUE" added to their environment) and returns the MPI world of this process (rank 0)
// and them (ranks 1..count). ConfigError when built without MPI; CommError when MPI refuses;
// the job is aborted when they have not joined within options.timeout.
std::shared_ptr<Communicator> spawn_world(const std::string& program, const std::vector<std::string>& args, int count,
                                          const std::vector<std::string>& env, const CommOptions& options = {});
// In a process spawn_world started: the same world.
std::shared_ptr<Communicator> join_spawned_world(const CommOptions& options = {});

}  // namespace tandem::collectives
