#include "engine/strategies/cluster_environment.h"

#include <cstdlib>
#include <vector>

#include "base/error.h"
#include "engine/accelerators/device_parsing.h"

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

// SLURM_TASKS_PER_NODE's form, e.g. "2(x3),1": the count on every node when all are equal, else -1.
int equal_tasks_counted(const std::string& spec) {
  int common = -1;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = spec.find(',', start);
    const std::string group = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    int count = 0;
    if (!parse_int_strict(group.substr(0, group.find('(')), &count) || (common != -1 && count != common)) return -1;
    common = count;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return common;
}

std::optional<SlurmJob> slurm_job(const EnvLookup& env) {
  const auto job_id = env("SLURM_JOB_ID");
  if (!job_id) return {};
  SlurmJob job;
  job.job_id = *job_id;
  job.in_step = is_set(env, "SLURM_STEP_ID");
  job.mpi_type = env("SLURM_MPI_TYPE").value_or("unset");
  const int job_nodes = read_int(env, "SLURM_JOB_NUM_NODES", read_int(env, "SLURM_NNODES", -1));
  job.nodes = job.in_step ? read_int(env, "SLURM_STEP_NUM_NODES", job_nodes) : job_nodes;
  job.tasks = read_int(env, "SLURM_NTASKS", -1);
  if (job.in_step) job.tasks = read_int(env, "SLURM_STEP_NUM_TASKS", job.tasks);
  const auto step_tasks = env("SLURM_STEP_TASKS_PER_NODE");
  const auto job_tasks = env("SLURM_TASKS_PER_NODE");
  if (job.in_step && step_tasks) {
    job.tasks_per_node = equal_tasks_counted(*step_tasks);
  } else if (is_set(env, "SLURM_NTASKS_PER_NODE")) {
    job.tasks_per_node = read_int(env, "SLURM_NTASKS_PER_NODE", -1);
  } else if (job_tasks) {
    job.tasks_per_node = equal_tasks_counted(*job_tasks);
  }
  job.gpus_on_node = read_int(env, "SLURM_GPUS_ON_NODE", -1);
  if (const auto per_task = env("SLURM_GPUS_PER_TASK")) {
    const std::string count = per_task->substr(per_task->rfind(':') + 1);  // "a100:2" -> "2"
    if (!parse_int_strict(count, &job.gpus_per_task)) job.gpus_per_task = -1;
  }
  return job;
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
  ClusterEnvironment found;
  for (auto detect : {spawned, open_mpi, pmix, torchrun, slurm}) {
    if (auto c = detect(env)) {
      check_consistent(*c);
      found = *c;
      break;
    }
  }
  found.slurm = slurm_job(env);
  return found;
}

namespace {

// "1 node", "2 nodes", "2 processes".
std::string counted(int n, const std::string& what) {
  if (n == 1) return "1 " + what;
  return std::to_string(n) + " " + what + (what.back() == 's' ? "es" : "s");
}

// "--trainer.num_nodes=1 --trainer.devices=2 (2 processes per node)", or for a strategy that
// drives every device from one process, "... (strategy=ddp2: 1 process per node)".
std::string describe_flags(const RequestedProcesses& r) {
  std::string out = "--trainer.num_nodes=" + std::to_string(r.num_nodes) + " --trainer.devices=" + std::to_string(r.devices);
  if (r.processes_per_node == r.devices) return out + " (" + counted(r.processes_per_node, "process") + " per node)";
  return out + " (strategy=" + r.strategy + ": " + counted(r.processes_per_node, "process") + " per node)";
}

// The GPUs of an srun step against --trainer.devices (GPUs per node, each process driving
// the node's device of its local rank, or all of them for dp/ddp2).
void check_slurm_gpus(const std::string& job_name, const SlurmJob& job, const RequestedProcesses& r) {
  if (!r.on_gpus) return;
  const std::string flags = describe_flags(r);
  if (job.gpus_on_node >= 0 && job.gpus_on_node < r.devices) {
    throw ConfigError(job_name + " holds " + counted(job.gpus_on_node, "GPU") + " on this node (SLURM_GPUS_ON_NODE), but " +
                      flags + " uses " + counted(r.devices, "GPU") + " per node; pass --trainer.devices=" +
                      std::to_string(job.gpus_on_node) + ", or ask Slurm for #SBATCH --gpus-per-node=" +
                      std::to_string(r.devices));
  }
  if (job.gpus_per_task >= 0 && job.gpus_per_task < r.devices) {
    throw ConfigError(job_name + " gives each task " + counted(job.gpus_per_task, "GPU") +
                      " of its own (--gpus-per-task, SLURM_GPUS_PER_TASK), but " + flags +
                      " has each node's processes share the node's " + counted(r.devices, "GPU") +
                      " (process k drives device k), so every task must see them all; ask Slurm for #SBATCH "
                      "--gpus-per-node=" + std::to_string(r.devices) + " instead of --gpus-per-task");
  }
}

}  // namespace

void check_slurm_allocation(const ClusterEnvironment& c, const RequestedProcesses& r) {
  if (!c.slurm || (c.name != "slurm" && c.name != "pmix")) return;
  const SlurmJob& job = *c.slurm;
  const int wanted = r.num_nodes * r.processes_per_node;
  const std::string job_name = "Slurm job " + job.job_id;
  const std::string allocation = job.tasks_per_node > 0 && job.nodes > 0
      ? " (--nodes=" + std::to_string(job.nodes) + " x --ntasks-per-node=" + std::to_string(job.tasks_per_node) + ")"
      : "";
  if (!job.in_step) {
    if (wanted == 1 && job.tasks <= 1) return;
    throw ConfigError("tandem runs in the batch script of " + job_name + " itself (SLURM_STEP_ID is unset: not "
                      "started by srun), so it is one process, but " +
                      (job.tasks > 1 ? "the job has " + std::to_string(job.tasks) + " tasks" + allocation
                                     : describe_flags(r) + " asks for " + counted(wanted, "process")) +
                      "; start it with srun in the script (`srun tandem fit ...`), which runs one process per task");
  }
  if (c.name == "slurm" && wanted > 1) {
    // Open MPI started by srun learns its peers only through PMIx (Debian's Open MPI has no
    // PMI-1/PMI-2 client): srun --mpi=none or --mpi=pmi2 would leave every rank alone.
    throw ConfigError("srun started this process of " + job_name + " without PMIx (PMIX_RANK is unset; SLURM_MPI_TYPE=" +
                      job.mpi_type + "), so MPI cannot find the other " + std::to_string(wanted - 1) +
                      " process(es); launch with `srun --mpi=pmix tandem ...` (or MpiDefault=pmix in slurm.conf)");
  }
  std::vector<std::string> fixes_flags, fixes_sbatch;
  if (job.nodes > 0 && job.nodes != r.num_nodes) {
    fixes_flags.push_back("--trainer.num_nodes=" + std::to_string(job.nodes));
    fixes_sbatch.push_back("--nodes=" + std::to_string(r.num_nodes));
  }
  if (job.tasks_per_node > 0 && job.tasks_per_node != r.processes_per_node) {
    if (r.processes_per_node == r.devices) fixes_flags.push_back("--trainer.devices=" + std::to_string(job.tasks_per_node));
    fixes_sbatch.push_back("--ntasks-per-node=" + std::to_string(r.processes_per_node));
  }
  if (fixes_sbatch.empty()) {
    check_slurm_gpus(job_name, job, r);
    return;
  }
  const auto joined = [](const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : " ") + item;
    return out;
  };
  const std::string tasks = job.tasks_per_node > 0 ? counted(job.tasks_per_node, "task") + " per node"
                                                   : "uneven tasks per node";
  std::string msg = job_name + " runs this step on " + (job.nodes > 0 ? counted(job.nodes, "node") : "its nodes") + " x " +
                    tasks + " (SLURM_STEP_NUM_NODES, SLURM_STEP_TASKS_PER_NODE), but " + describe_flags(r) + " asks for " +
                    counted(r.num_nodes, "node") + " x " + counted(r.processes_per_node, "process") +
                    " per node; make them agree: ";
  if (!fixes_flags.empty()) msg += "pass " + joined(fixes_flags) + ", or ";
  msg += "ask Slurm for #SBATCH " + joined(fixes_sbatch) + " (srun starts one process per task: one task per " +
         (r.processes_per_node == r.devices ? std::string("device") : "node for strategy=" + r.strategy) + ")";
  throw ConfigError(msg);
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
