#include "engine/strategies/cluster_environment.h"

#include <cstdlib>

#include "engine/accelerators/device_parsing.h"
#include "engine/core/error.h"

namespace tandem {

namespace {

// Reads an integer variable; `fallback` when unset, ConfigError when set but not an integer.
int read_int(const EnvLookup& env, const std::string& var, int fallback) {
  const auto value = env(var);
  if (!value) return fallback;
  int out = 0;
  if (!parse_int_strict(*value, &out) || out < 0) {
    throw ConfigError("environment variable " + var + "=" + *value + " is not a non-negative "
                      "integer; the launcher normally sets it, so check your job script");
  }
  return out;
}

bool is_set(const EnvLookup& env, const std::string& var) { return env(var).has_value(); }

// Open MPI exports no node index, only this rank's node-local size, the number of nodes with
// ranks (OMPI_MCA_orte_num_nodes) and, when the user chose one, the mapping policy. When every
// node runs the same number of ranks, the mapping decides: filled node by node (the default:
// by slot, core or socket; ppr) puts rank r on node r / local_size, round-robin over nodes
// (--map-by node) on node r % nodes. Anything else (uneven nodes, a rankfile, seq, span) is
// unknown (-1) here.
int open_mpi_node_rank(const EnvLookup& env, int rank) {
  const int local_size = read_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", -1);
  const int world_size = read_int(env, "OMPI_COMM_WORLD_SIZE", 1);
  const int nodes = read_int(env, "OMPI_MCA_orte_num_nodes", local_size > 0 ? world_size / local_size : -1);
  if (local_size <= 0 || nodes <= 0 || local_size * nodes != world_size) return -1;
  const std::string policy = env("OMPI_MCA_rmaps_base_mapping_policy").value_or("");
  const auto starts_with = [&](const char* prefix) { return policy.rfind(prefix, 0) == 0; };
  if (policy.find("span") != std::string::npos) return -1;  // objects counted across nodes
  if (policy.empty() || starts_with("slot") || starts_with("core") || starts_with("socket") ||
      starts_with("ppr") || starts_with("hwthread") || starts_with("numa") || starts_with("board") ||
      starts_with("l1cache") || starts_with("l2cache") || starts_with("l3cache")) {
    return rank / local_size;
  }
  if (starts_with("node")) return rank % nodes;
  return -1;
}

std::optional<ClusterEnvironment> open_mpi(const EnvLookup& env) {
  if (!is_set(env, "OMPI_COMM_WORLD_SIZE") || !is_set(env, "OMPI_COMM_WORLD_RANK")) return {};
  ClusterEnvironment c;
  c.name = "openmpi";
  c.world_size = read_int(env, "OMPI_COMM_WORLD_SIZE", 1);
  c.global_rank = read_int(env, "OMPI_COMM_WORLD_RANK", 0);
  c.local_rank = read_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", -1);
  c.node_rank = open_mpi_node_rank(env, c.global_rank);
  return c;
}

// A process started by ddp_spawn's first process (MPI_Comm_spawn): Open MPI's variables describe
// the spawned group (ranks 0..W-2); in the job the spawner is rank 0, so each is one higher.
std::optional<ClusterEnvironment> spawned(const EnvLookup& env) {
  if (!is_set(env, "TANDEM_SPAWN_WORLD_SIZE")) return {};
  ClusterEnvironment c;
  c.name = "spawn";
  c.world_size = read_int(env, "TANDEM_SPAWN_WORLD_SIZE", 1);
  c.global_rank = read_int(env, "OMPI_COMM_WORLD_RANK", 0) + 1;
  c.local_rank = c.global_rank;  // spawned on the spawner's node
  c.node_rank = 0;
  return c;
}

std::optional<ClusterEnvironment> slurm(const EnvLookup& env) {
  if (!is_set(env, "SLURM_PROCID") || !is_set(env, "SLURM_NTASKS")) return {};
  ClusterEnvironment c;
  c.name = "slurm";
  // Inside an srun step, the step's task count is the real world size; SLURM_NTASKS is the
  // allocation's, which differs when a batch script runs steps smaller than the allocation.
  c.world_size = read_int(env, "SLURM_STEP_NUM_TASKS", read_int(env, "SLURM_NTASKS", 1));
  c.global_rank = read_int(env, "SLURM_PROCID", 0);
  c.local_rank = read_int(env, "SLURM_LOCALID", -1);
  c.node_rank = read_int(env, "SLURM_NODEID", -1);
  return c;
}

std::optional<ClusterEnvironment> pmix(const EnvLookup& env) {
  if (!is_set(env, "PMIX_RANK")) return {};
  // PMIx passes only the rank through the environment; the job size comes from PMIx_Get once
  // MPI starts. srun --mpi=pmix also sets the SLURM variables, which fill in the rest.
  ClusterEnvironment c = slurm(env).value_or(ClusterEnvironment{"pmix", -1, 0, -1, -1});
  c.name = "pmix";
  c.global_rank = read_int(env, "PMIX_RANK", 0);
  return c;
}

std::optional<ClusterEnvironment> torchrun(const EnvLookup& env) {
  if (!is_set(env, "RANK") || !is_set(env, "WORLD_SIZE") || !is_set(env, "LOCAL_RANK")) return {};
  ClusterEnvironment c;
  c.name = "torchrun";
  c.world_size = read_int(env, "WORLD_SIZE", 1);
  c.global_rank = read_int(env, "RANK", 0);
  c.local_rank = read_int(env, "LOCAL_RANK", 0);
  c.node_rank = read_int(env, "GROUP_RANK", read_int(env, "NODE_RANK", 0));
  return c;
}

void check_consistent(const ClusterEnvironment& c) {
  if (c.world_size == 0) {
    throw ConfigError("the " + c.name + " launcher reports a world size of 0; check the job's "
                      "task count");
  }
  if (c.world_size > 0 && c.global_rank >= c.world_size) {
    throw ConfigError("the " + c.name + " launcher reports rank " + std::to_string(c.global_rank) +
                      " in a world of " + std::to_string(c.world_size) + " processes; ranks must "
                      "be below the world size (check the environment variables of the job)");
  }
}

}  // namespace

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

ClusterEnvironment detect_cluster_environment(const EnvLookup& env) {
  for (auto detect : {spawned, open_mpi, pmix, torchrun, slurm}) {
    if (auto c = detect(env)) {
      check_consistent(*c);
      return *c;
    }
  }
  return ClusterEnvironment{};
}

ClusterEnvironment host_comm_cluster(collectives::HostComm comm) {
  const collectives::HostCommShape shape = collectives::describe_host_comm(comm);
  ClusterEnvironment c;
  c.name = "host_comm";
  c.world_size = shape.size;
  c.global_rank = shape.rank;
  c.local_rank = shape.local_rank;
  c.node_rank = shape.node_rank;
  return c;
}

}  // namespace tandem
