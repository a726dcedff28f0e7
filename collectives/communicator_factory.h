// Picks a Communicator backend by name. This file's .cpp is the only place that knows which
// backends were compiled in (no #ifdef elsewhere): asking for one that was not says so.
//
// Embedding in an MPI code that already has a communicator: make_communicator(backend,
// HostComm, ...) below, or construct collectives::MpiCommunicator(your_comm, options) from
// collectives/mpi/mpi_communicator.h (see docs/COLLECTIVES.md for who initializes, frees and
// finalizes what).
#pragma once
#include <cstdint>
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

// A communicator of the host application (an MPI code that embeds Tandem), held as MPI's
// Fortran handle (MPI_Comm_c2f) so that headers without <mpi.h> can carry one: the C++ host
// writes collectives::host_comm(my_comm) (collectives/mpi/host_comm.h), a Fortran host passes
// its integer communicator as it is. Tandem never frees or modifies it.
struct HostComm {
  int64_t fortran_handle = 0;
};

// Where this process sits in a host communicator.
struct HostCommShape {
  int size = 1;
  int rank = 0;
  int local_rank = 0;  // among its ranks on this node (MPI_Comm_split_type SHARED of that comm)
  int local_size = 1;
  int node_rank = 0;   // this node's index among the communicator's nodes, by lowest rank
};

// Collective over the host communicator (its ranks call together); what it creates to find the
// node it frees again. Throws ConfigError when MPI is not initialized (the host initializes and
// finalizes MPI; Tandem never does when given a communicator), when the handle is not a
// communicator of this process, or when Tandem was built without MPI.
HostCommShape describe_host_comm(HostComm comm);

// The backend's communicator over the host's communicator instead of the world: mpi duplicates
// it (MPI_Comm_dup; the duplicate is freed with the returned object, the host's never); nccl is
// bootstrapped over that duplicate; local is a world of one and only accepts a communicator of
// one process. Never initializes MPI and never uses MPI_COMM_WORLD. ConfigError as above.
std::shared_ptr<Communicator> make_communicator(CommBackend backend, HostComm comm, const CommOptions& options = {},
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
