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
//
// Inside a Slurm job (SLURM_JOB_ID set), whatever the launcher, `slurm` also describes the
// allocation, so the plan can say which #SBATCH line disagrees with --trainer.num_nodes and
// --trainer.devices (check_slurm_allocation).
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "collectives/communicator_factory.h"

namespace tandem {

// The Slurm job around this process, from the variables sbatch/salloc and srun export.
struct SlurmJob {
  std::string job_id;        // SLURM_JOB_ID
  int nodes = -1;            // SLURM_STEP_NUM_NODES under srun, else SLURM_JOB_NUM_NODES (SLURM_NNODES)
  // SLURM_STEP_TASKS_PER_NODE under srun, else SLURM_NTASKS_PER_NODE, else SLURM_TASKS_PER_NODE
  // ("2(x3),1"): the tasks on every node when they are all equal, -1 when uneven or unknown.
  int tasks_per_node = -1;
  int tasks = -1;            // SLURM_STEP_NUM_TASKS under srun, else SLURM_NTASKS; -1 when unset
  bool in_step = false;      // started by srun (SLURM_STEP_ID set), not by the batch script itself
  std::string mpi_type;      // srun's --mpi (SLURM_MPI_TYPE), "unset" when not exported
  int gpus_on_node = -1;     // SLURM_GPUS_ON_NODE: GPUs the job holds on this node; -1 when unset
  int gpus_per_task = -1;    // SLURM_GPUS_PER_TASK ("2" or "a100:2"); -1 when unset
};

struct ClusterEnvironment {
  std::string name = "local";   // spawn, openmpi, pmix, torchrun, slurm, local, host_comm
  int world_size = 1;           // -1 when the variables do not say (pmix without slurm)
  int global_rank = 0;
  int local_rank = 0;           // -1 when unknown
  int node_rank = 0;            // -1 when unknown
  std::optional<SlurmJob> slurm = std::nullopt;  // inside a Slurm job
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

// The processes the trainer flags ask for, as check_slurm_allocation compares them.
struct RequestedProcesses {
  int num_nodes = 1;
  int devices = 1;             // devices per node
  int processes_per_node = 1;  // devices, or 1 for a strategy driving all of them (dp, ddp2)
  std::string strategy;
  bool on_gpus = false;        // the devices are GPUs (accelerator cuda), which Slurm allocates
};

// ConfigError when a Slurm job cannot run the processes the flags ask for: started by the
// batch script instead of srun while the job or the flags have several processes, a step
// whose node count or tasks per node differ from num_nodes x processes_per_node, or (on GPUs)
// fewer GPUs on the node than --trainer.devices, or --gpus-per-task giving each task fewer
// GPUs than the node's devices (Tandem's process k of a node drives the node's device k, so
// every task must see them all: --gpus-per-node, not --gpus-per-task). The message
// names the Slurm values, the flags' values, and what to change on either side. Nothing to
// check outside Slurm, or under mpirun inside an allocation (the openmpi environment).
void check_slurm_allocation(const ClusterEnvironment& cluster, const RequestedProcesses& requested);

// The job a host MPI communicator describes (collectives::describe_host_comm: collective over
// it). Launched, so nothing relaunches it, whatever launcher variables the process also has.
ClusterEnvironment host_comm_cluster(collectives::HostComm comm);

}  // namespace tandem
