// Cluster environments: who launched this process and where it sits in the job, read from
// the launcher's environment variables before MPI starts (so planning and device selection
// can happen before MPI_Init, and without MPI at all).
//
//   name       detected by                          world size / rank / local rank / node rank
//   openmpi    OMPI_COMM_WORLD_SIZE + _RANK         OMPI_COMM_WORLD_{SIZE,RANK,LOCAL_RANK};
//                                                   node from the rank and the mapping policy
//   pmix       PMIX_RANK                            rank from PMIX_RANK; the rest from SLURM_*
//                                                   when srun set them, else unknown until MPI
//   torchrun   RANK + WORLD_SIZE + LOCAL_RANK       RANK, WORLD_SIZE, LOCAL_RANK, GROUP_RANK
//   slurm      SLURM_PROCID + SLURM_NTASKS          SLURM_PROCID, SLURM_STEP_NUM_TASKS (else
//                                                   SLURM_NTASKS), SLURM_LOCALID, SLURM_NODEID
//   spawn      TANDEM_SPAWN_WORLD_SIZE              set by ddp_spawn for the processes it spawns:
//                                                   that size / OMPI_COMM_WORLD_RANK + 1 / the
//                                                   same / 0 (the spawner is rank 0)
//   local      none of the above                    1 / 0 / 0 / 0
//   host_comm  not detected: host_comm_cluster()    a host MPI communicator's size / rank / rank
//              for a Trainer given a communicator   on its node / its node's index (embedding)
//
// The first match in that order wins: mpirun under SLURM still sets OMPI_*, and torchrun
// under srun sets RANK for its own children.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "collectives/communicator_factory.h"

namespace tandem {

struct ClusterEnvironment {
  std::string name = "local";   // spawn, openmpi, pmix, torchrun, slurm, local, host_comm
  int world_size = 1;           // -1 when the variables do not say (pmix without slurm)
  int global_rank = 0;
  int local_rank = 0;           // -1 when unknown
  int node_rank = 0;            // -1 when unknown
  bool launched() const { return name != "local"; }
  // Started by a ddp_spawn parent (MPI_Comm_spawn): its world is joined through the parent's
  // intercommunicator, not made from MPI_COMM_WORLD.
  bool spawned_by_parent() const { return name == "spawn"; }
};

// Reads one environment variable; std::nullopt when unset. Injectable for tests.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// The real process environment (getenv).
EnvLookup process_environment();

// Detects the environment. Throws ConfigError naming the variable when a value is not an
// integer or ranks are inconsistent (rank >= world size).
ClusterEnvironment detect_cluster_environment(const EnvLookup& env = process_environment());

// The job a host MPI communicator describes (collectives::describe_host_comm: collective over
// it). Launched, so nothing relaunches it, whatever launcher variables the process also has.
ClusterEnvironment host_comm_cluster(collectives::HostComm comm);

}  // namespace tandem
