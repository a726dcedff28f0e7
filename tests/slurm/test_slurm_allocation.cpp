// The Slurm side of planning, without a cluster: the SLURM_* variables of an sbatch allocation
// and of an srun step (as Slurm 22.05 exports them, injected), the check that the allocation
// runs the processes --trainer.num_nodes / --trainer.devices ask for (check_slurm_allocation),
// the requeue signal's parsing and the hpc checkpoint lookup of a requeued job; and the same
// check through `tandem fit` with the variables set (exit 2, message on stderr).
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>

#include "base/error.h"
#include "engine/strategies/cluster_environment.h"
#include "engine/strategies/execution_plan.h"
#include "engine/trainer/callbacks/slurm_requeue.h"
#include "tests/accelerators/expect_error.h"
#include "tests/support/run_command.h"

using tandem::ConfigError;
using Vars = std::map<std::string, std::string>;
namespace fs = std::filesystem;

namespace {

tandem::EnvLookup env_of(Vars vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// What sbatch -N <nodes> --ntasks-per-node=<per_node> exports to the batch script.
Vars batch_script(int nodes, int per_node) {
  const std::string n = std::to_string(nodes), k = std::to_string(per_node), tasks = std::to_string(nodes * per_node);
  return {{"SLURM_JOB_ID", "41"}, {"SLURM_JOB_NUM_NODES", n}, {"SLURM_NNODES", n}, {"SLURM_NTASKS", tasks},
          {"SLURM_NTASKS_PER_NODE", k}, {"SLURM_TASKS_PER_NODE", k + "(x" + n + ")"}, {"SLURM_PROCID", "0"},
          {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "0"}};
}

// What `srun --mpi=pmix` in that script exports to task `rank` (placed node by node).
Vars srun_task(int nodes, int per_node, int rank) {
  Vars v = batch_script(nodes, per_node);
  const std::string n = std::to_string(nodes), k = std::to_string(per_node);
  v["SLURM_STEP_ID"] = "0";
  v["SLURM_STEP_NUM_NODES"] = n;
  v["SLURM_STEP_NUM_TASKS"] = std::to_string(nodes * per_node);
  v["SLURM_STEP_TASKS_PER_NODE"] = k + "(x" + n + ")";
  v["SLURM_MPI_TYPE"] = "pmix";
  v["SLURM_PROCID"] = v["PMIX_RANK"] = std::to_string(rank);
  v["SLURM_LOCALID"] = std::to_string(rank % per_node);
  v["SLURM_NODEID"] = std::to_string(rank / per_node);
  return v;
}

tandem::ExecutionPlan cpu_plan(int num_nodes, int devices, const Vars& vars, const std::string& strategy = "ddp") {
  tandem::HardwareOptions o;
  o.accelerator = "cpu";
  o.devices = devices;
  o.strategy = strategy;
  o.num_nodes = num_nodes;
  return tandem::plan_execution(o, "prog", env_of(vars));
}

// In the batch script itself with max_restarts, `tandem fit` becomes the restart agent that runs
// srun steps (restart_agent.h); the flags must fit the allocation before anything starts.
TEST(SlurmAllocationCli, RestartAgentFlagsThatDoNotFitTheAllocationExitTwo) {
  std::string env = "env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u RANK -u TANDEM_SPAWN_WORLD_SIZE -u SLURM_STEP_ID";
  for (const auto& [k, v] : batch_script(2, 2)) env += " " + k + "='" + v + "'";
  const std::string fit = env + " " + TANDEM_CLI_PATH + " fit --data.root=/nonexistent --trainer.accelerator=cpu "
                          "--trainer.strategy=ddp --trainer.max_restarts=1 ";
  const CommandResult more_nodes = run_command(fit + "--trainer.num_nodes=3 --trainer.devices=2");
  EXPECT_EQ(more_nodes.exit_code, 2) << more_nodes.out << more_nodes.err;
  EXPECT_TRUE(more_nodes.err_has("runs the job as srun steps on the nodes of Slurm job 41, which holds 2 node(s), but "
                                 "num_nodes=3; pass --trainer.num_nodes=2, or ask Slurm for #SBATCH --nodes=3"))
      << more_nodes.err;
  const CommandResult part_node = run_command(fit + "--trainer.num_nodes=2 --trainer.devices=2 --trainer.min_processes=3");
  EXPECT_EQ(part_node.exit_code, 2) << part_node.out << part_node.err;
  EXPECT_TRUE(part_node.err_has("under Slurm a restart runs on whole nodes of 2 process(es), so min_processes must be a "
                                "multiple of 2"))
      << part_node.err;
  // Without max_restarts the batch script is one process, as before.
  const CommandResult no_agent = run_command(env + " " + TANDEM_CLI_PATH + " fit --data.root=/nonexistent "
                                             "--trainer.accelerator=cpu --trainer.num_nodes=2 --trainer.devices=2");
  EXPECT_EQ(no_agent.exit_code, 2) << no_agent.out << no_agent.err;
  EXPECT_TRUE(no_agent.err_has("start it with srun in the script")) << no_agent.err;
}

}  // namespace

TEST(SlurmEnvironment, ReadsTheAllocationOfAStep) {
  const auto c = tandem::detect_cluster_environment(env_of(srun_task(2, 3, 4)));
  EXPECT_EQ(c.name, "pmix");
  EXPECT_EQ(c.global_rank, 4);
  EXPECT_EQ(c.node_rank, 1);
  ASSERT_TRUE(c.slurm.has_value());
  EXPECT_EQ(c.slurm->job_id, "41");
  EXPECT_TRUE(c.slurm->in_step);
  EXPECT_EQ(c.slurm->nodes, 2);
  EXPECT_EQ(c.slurm->tasks_per_node, 3);
  EXPECT_EQ(c.slurm->tasks, 6);
  EXPECT_EQ(c.slurm->mpi_type, "pmix");
  EXPECT_FALSE(tandem::detect_cluster_environment(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}})).slurm)
      << "no SLURM_JOB_ID: not a Slurm job";
}

TEST(SlurmEnvironment, UnevenTasksPerNodeAreUnknown) {
  Vars v = srun_task(2, 2, 0);
  v["SLURM_STEP_TASKS_PER_NODE"] = "2(x3),1";
  EXPECT_EQ(tandem::detect_cluster_environment(env_of(v)).slurm->tasks_per_node, -1);
  v["SLURM_STEP_TASKS_PER_NODE"] = "2,2(x2)";
  EXPECT_EQ(tandem::detect_cluster_environment(env_of(v)).slurm->tasks_per_node, 2);
  // 3 nodes with 2, 2 and 1 tasks against flags for 2 nodes: the node count is what can be said.
  v["SLURM_STEP_NUM_NODES"] = "3";
  v["SLURM_STEP_NUM_TASKS"] = "5";
  v["SLURM_STEP_TASKS_PER_NODE"] = "2(x2),1";
  expect_error<ConfigError>([&] { cpu_plan(2, 2, v); }, {"on 3 nodes x uneven tasks per node", "pass --trainer.num_nodes=3",
                                                         "#SBATCH --nodes=2"});
}

TEST(SlurmAllocation, MatchingFlagsPlan) {
  const auto p = cpu_plan(2, 1, srun_task(2, 1, 1));
  EXPECT_EQ(p.world_size, 2);
  EXPECT_EQ(p.cluster.node_rank, 1);
  const auto q = cpu_plan(2, 2, srun_task(2, 2, 3));
  EXPECT_EQ(q.world_size, 4);
  EXPECT_EQ(q.cluster.local_rank, 1);
}

// Lightning's most reported SLURM confusion: the same 2 processes, as 2 nodes x 1 task in Slurm
// and as 1 node x 2 devices in the flags.
TEST(SlurmAllocation, NodesAndDevicesThatDisagreeNameBothSides) {
  expect_error<ConfigError>([] { cpu_plan(1, 2, srun_task(2, 1, 0)); },
                            {"Slurm job 41 runs this step on 2 nodes x 1 task per node",
                             "--trainer.num_nodes=1 --trainer.devices=2 (2 processes per node)",
                             "asks for 1 node x 2 processes per node",
                             "pass --trainer.num_nodes=2 --trainer.devices=1",
                             "#SBATCH --nodes=1 --ntasks-per-node=2", "one task per device"});
  expect_error<ConfigError>([] { cpu_plan(2, 2, srun_task(2, 1, 0)); },
                            {"2 nodes x 1 task per node", "pass --trainer.devices=1", "#SBATCH --ntasks-per-node=2"});
  expect_error<ConfigError>([] { cpu_plan(3, 1, srun_task(2, 1, 0)); },
                            {"pass --trainer.num_nodes=2", "#SBATCH --nodes=3"});
  // ddp2 runs one process per node, whatever the devices: only the tasks per node can change.
  expect_error<ConfigError>([] { cpu_plan(2, 2, srun_task(2, 2, 0), "ddp2"); },
                            {"(strategy=ddp2: 1 process per node)", "#SBATCH --ntasks-per-node=1",
                             "one task per node for strategy=ddp2"});
}

// GPUs: Tandem's process k of a node drives the node's device k, so the node must hold
// --trainer.devices GPUs and every task must see them all (--gpus-per-node, not --gpus-per-task).
TEST(SlurmAllocation, GpusOnTheNodeAndPerTaskMustCoverTheDevices) {
  Vars v = srun_task(1, 2, 1);
  v["SLURM_GPUS_ON_NODE"] = "1";
  const auto check = [&](const tandem::RequestedProcesses& r) {
    tandem::check_slurm_allocation(tandem::detect_cluster_environment(env_of(v)), r);
  };
  const tandem::RequestedProcesses ddp_gpus{1, 2, 2, "ddp", true};
  expect_error<ConfigError>([&] { check(ddp_gpus); },
                            {"Slurm job 41 holds 1 GPU on this node (SLURM_GPUS_ON_NODE)",
                             "--trainer.num_nodes=1 --trainer.devices=2 (2 processes per node) uses 2 GPUs per node",
                             "pass --trainer.devices=1", "#SBATCH --gpus-per-node=2"});
  EXPECT_NO_THROW(check({1, 2, 2, "ddp", false})) << "CPU devices are not Slurm's GPUs";
  v["SLURM_GPUS_ON_NODE"] = "2";
  EXPECT_NO_THROW(check(ddp_gpus));
  v["SLURM_GPUS_PER_TASK"] = "1";
  expect_error<ConfigError>([&] { check(ddp_gpus); },
                            {"gives each task 1 GPU of its own (--gpus-per-task, SLURM_GPUS_PER_TASK)",
                             "share the node's 2 GPUs", "#SBATCH --gpus-per-node=2 instead of --gpus-per-task"});
  v["SLURM_GPUS_PER_TASK"] = "h100:2";  // typed: the count after the colon
  EXPECT_EQ(tandem::detect_cluster_environment(env_of(v)).slurm->gpus_per_task, 2);
  EXPECT_NO_THROW(check(ddp_gpus));
  // ddp2: one task per node drives both GPUs, so it needs both.
  v = srun_task(1, 1, 0);
  v["SLURM_GPUS_PER_TASK"] = "1";
  expect_error<ConfigError>([&] { check({1, 2, 1, "ddp2", true}); },
                            {"(strategy=ddp2: 1 process per node)", "--gpus-per-node=2"});
  v["SLURM_GPUS_PER_TASK"] = "2";
  EXPECT_NO_THROW(check({1, 2, 1, "ddp2", true}));
}

TEST(SlurmAllocation, BatchScriptWithoutSrunSaysToUseSrun) {
  expect_error<ConfigError>([] { cpu_plan(2, 1, batch_script(2, 1)); },
                            {"batch script of Slurm job 41", "SLURM_STEP_ID is unset",
                             "the job has 2 tasks (--nodes=2 x --ntasks-per-node=1)", "srun tandem fit"});
  Vars one_task = batch_script(1, 1);
  expect_error<ConfigError>([&] { cpu_plan(1, 2, one_task); }, {"asks for 2 processes", "srun tandem fit"});
  EXPECT_EQ(cpu_plan(1, 1, one_task).world_size, 1) << "one process in a one-task job needs no srun";
}

TEST(SlurmAllocation, SrunWithoutPmixSaysSo) {
  Vars v = srun_task(2, 1, 0);
  v.erase("PMIX_RANK");
  v["SLURM_MPI_TYPE"] = "none";
  expect_error<ConfigError>([&] { cpu_plan(2, 1, v); }, {"without PMIx", "SLURM_MPI_TYPE=none", "srun --mpi=pmix"});
}

TEST(SlurmAllocation, MpirunInsideAnAllocationIsNotChecked) {
  Vars v = batch_script(2, 1);
  v.insert({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
            {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  const auto p = cpu_plan(2, 2, v);
  EXPECT_EQ(p.cluster.name, "openmpi");
  EXPECT_EQ(p.world_size, 4);
}

TEST(SlurmRequeueSignal, ParsesNamesNumbersAndNone) {
  EXPECT_EQ(tandem::trainer::parse_requeue_signal("USR1"), SIGUSR1);
  EXPECT_EQ(tandem::trainer::parse_requeue_signal("SIGUSR2"), SIGUSR2);
  EXPECT_EQ(tandem::trainer::parse_requeue_signal("term"), SIGTERM);
  EXPECT_EQ(tandem::trainer::parse_requeue_signal("12"), 12);
  EXPECT_EQ(tandem::trainer::parse_requeue_signal("none"), std::nullopt);
  expect_error<ConfigError>([] { tandem::trainer::parse_requeue_signal("KILL9"); }, {"TANDEM_REQUEUE_SIGNAL=KILL9", "USR1"});
  expect_error<ConfigError>([] { tandem::trainer::parse_requeue_signal("65"); }, {"1..64"});
}

TEST(SlurmRequeueSignal, OnlyInsideAnSrunStep) {
  const auto step = tandem::detect_cluster_environment(env_of(srun_task(2, 1, 0)));
  EXPECT_NE(tandem::trainer::slurm_requeue_for(step, env_of({})), nullptr);
  EXPECT_EQ(tandem::trainer::slurm_requeue_for(step, env_of({{"TANDEM_REQUEUE_SIGNAL", "none"}})), nullptr);
  const auto batch = tandem::detect_cluster_environment(env_of(batch_script(1, 1)));
  EXPECT_EQ(tandem::trainer::slurm_requeue_for(batch, env_of({})), nullptr);
  EXPECT_EQ(tandem::trainer::slurm_requeue_for(tandem::ClusterEnvironment{}, env_of({})), nullptr);
}

TEST(SlurmRequeueSignal, ARequeuedJobResumesFromTheNewestHpcCheckpoint) {
  const fs::path dir = fs::path(testing::TempDir()) / ("tandem_hpc_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  EXPECT_EQ(tandem::trainer::newest_hpc_checkpoint(dir.string()), std::nullopt);
  for (const char* name : {"hpc_ckpt_2.safetensors", "hpc_ckpt_10.safetensors", "hpc_ckpt_11.safetensors.tmp-7",
                           "hpc_ckpt_x.safetensors", "last.safetensors"}) {
    std::ofstream(dir / name) << "x";
  }
  EXPECT_EQ(tandem::trainer::newest_hpc_checkpoint(dir.string()), (dir / "hpc_ckpt_10.safetensors").string());
  // Resumed from only in a job Slurm requeued, and only inside an srun step.
  const auto step = tandem::detect_cluster_environment(env_of(srun_task(2, 1, 0)));
  EXPECT_EQ(tandem::trainer::requeued_job_checkpoint(step, dir.string(), env_of({{"SLURM_RESTART_COUNT", "1"}})),
            (dir / "hpc_ckpt_10.safetensors").string());
  EXPECT_EQ(tandem::trainer::requeued_job_checkpoint(step, dir.string(), env_of({{"SLURM_RESTART_COUNT", "0"}})),
            std::nullopt) << "a new job with the same directory starts afresh";
  EXPECT_EQ(tandem::trainer::requeued_job_checkpoint(step, dir.string(), env_of({})), std::nullopt);
  const auto batch = tandem::detect_cluster_environment(env_of(batch_script(1, 1)));
  EXPECT_EQ(tandem::trainer::requeued_job_checkpoint(batch, dir.string(), env_of({{"SLURM_RESTART_COUNT", "1"}})),
            std::nullopt);
  fs::remove_all(dir);
}

// The check as a user meets it: `tandem fit` in an srun step of a 2-node x 1-task job, with flags
// for 1 node x 2 devices, exits 2 before reading any data.
TEST(SlurmAllocationCli, FitWithDisagreeingFlagsExitsTwo) {
  std::string env = "env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u RANK -u TANDEM_SPAWN_WORLD_SIZE";
  for (const auto& [k, v] : srun_task(2, 1, 0)) env += " " + k + "='" + v + "'";
  const CommandResult r = run_command(env + " " + TANDEM_CLI_PATH +
                                      " fit --data.root=/nonexistent --trainer.accelerator=cpu --trainer.num_nodes=1"
                                      " --trainer.devices=2 --trainer.strategy=ddp");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(r.err_has("2 nodes x 1 task per node")) << r.err;
  EXPECT_TRUE(r.err_has("pass --trainer.num_nodes=2 --trainer.devices=1, or ask Slurm for #SBATCH --nodes=1 "
                        "--ntasks-per-node=2"))
      << r.err;
}
