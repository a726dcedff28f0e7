// plan_execution and the cluster environments: what runs where, under no launcher and under
// Open MPI, PMIx, SLURM and torchrun variables (injected, not read from this process).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "engine/strategies/cluster_environment.h"
#include "engine/strategies/execution_plan.h"
#include "tests/accelerators/expect_error.h"
#include "tests/accelerators/scoped_env.h"

using tandem::ConfigError;
using tandem::HardwareOptions;
using V = std::vector<int>;

namespace {
tandem::EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}
HardwareOptions gpu(tandem::DevicesSpec devices, std::string strategy = "auto", int nodes = 1) {
  HardwareOptions o;
  o.accelerator = "gpu";
  o.devices = std::move(devices);
  o.strategy = std::move(strategy);
  o.num_nodes = nodes;
  return o;
}
tandem::ExecutionPlan plan(const HardwareOptions& o, std::map<std::string, std::string> vars = {}) {
  return tandem::plan_execution(o, "prog", env_of(std::move(vars)));
}
}  // namespace

// ---- cluster environments ----
TEST(ClusterEnvironment, LocalByDefault) {
  auto c = tandem::detect_cluster_environment(env_of({}));
  EXPECT_EQ(c.name, "local");
  EXPECT_FALSE(c.launched());
  EXPECT_EQ(c.world_size, 1);
}

// Processes ddp_spawn starts join its world through the spawner; others make theirs.
TEST(ClusterEnvironment, OnlyProcessesDdpSpawnStartedWereSpawnedByAParent) {
  auto spawned = tandem::detect_cluster_environment(env_of({{"TANDEM_SPAWN_WORLD_SIZE", "3"},
      {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}}));
  EXPECT_EQ(spawned.name, "spawn");
  EXPECT_TRUE(spawned.spawned_by_parent());
  EXPECT_EQ(spawned.world_size, 3);
  EXPECT_EQ(spawned.global_rank, 2);
  auto relaunched = tandem::detect_cluster_environment(env_of({{"OMPI_COMM_WORLD_SIZE", "2"},
      {"OMPI_COMM_WORLD_RANK", "1"}}));
  EXPECT_FALSE(relaunched.spawned_by_parent());
  EXPECT_FALSE(tandem::detect_cluster_environment(env_of({})).spawned_by_parent());
}

TEST(ClusterEnvironment, OpenMpi) {
  auto c = tandem::detect_cluster_environment(env_of({{"OMPI_COMM_WORLD_SIZE", "8"},
      {"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
      {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}));  // mpirun inside a SLURM allocation
  EXPECT_EQ(c.name, "openmpi");
  EXPECT_EQ(c.world_size, 8);
  EXPECT_EQ(c.global_rank, 5);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.node_rank, 1);
}

// Open MPI has no node variable: the node follows from the mapping when nodes are even
// (what mpirun -H a:2,b:2 exports, with and without --map-by node), else it is unknown.
TEST(ClusterEnvironment, OpenMpiNodeFollowsTheMappingPolicy) {
  const auto node_of = [](const std::string& rank, const std::string& local_size, const std::string& policy) {
    std::map<std::string, std::string> vars{{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", rank},
                                            {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                            {"OMPI_COMM_WORLD_LOCAL_SIZE", local_size}, {"OMPI_MCA_orte_num_nodes", "2"}};
    if (!policy.empty()) vars["OMPI_MCA_rmaps_base_mapping_policy"] = policy;
    return tandem::detect_cluster_environment(env_of(vars)).node_rank;
  };
  EXPECT_EQ(node_of("1", "2", ""), 0);           // default: filled node by node
  EXPECT_EQ(node_of("2", "2", ""), 1);
  EXPECT_EQ(node_of("1", "2", "slot"), 0);
  EXPECT_EQ(node_of("3", "2", "ppr:2:node"), 1);
  EXPECT_EQ(node_of("1", "2", "node"), 1);       // round-robin: 0 1 0 1
  EXPECT_EQ(node_of("2", "2", "node"), 0);
  EXPECT_EQ(node_of("2", "3", ""), -1);          // 3 + 1 ranks: uneven nodes
  EXPECT_EQ(node_of("2", "2", "seq"), -1);
  EXPECT_EQ(node_of("2", "2", "core:span"), -1);
}

TEST(ClusterEnvironment, Slurm) {
  auto c = tandem::detect_cluster_environment(env_of({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "16"},
      {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "1"}}));
  EXPECT_EQ(c.name, "slurm");
  EXPECT_EQ(c.world_size, 4);  // the step's tasks, not the allocation's
  EXPECT_EQ(c.global_rank, 3);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.node_rank, 1);
}

TEST(ClusterEnvironment, PmixWithAndWithoutSlurm) {
  auto alone = tandem::detect_cluster_environment(env_of({{"PMIX_RANK", "2"}}));
  EXPECT_EQ(alone.name, "pmix");
  EXPECT_EQ(alone.global_rank, 2);
  EXPECT_EQ(alone.world_size, -1);  // PMIx keeps the size out of the environment
  auto srun = tandem::detect_cluster_environment(env_of({{"PMIX_RANK", "2"}, {"SLURM_PROCID", "2"},
      {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "1"}}));
  EXPECT_EQ(srun.name, "pmix");
  EXPECT_EQ(srun.world_size, 4);
  EXPECT_EQ(srun.node_rank, 1);
}

TEST(ClusterEnvironment, Torchrun) {
  auto c = tandem::detect_cluster_environment(env_of({{"RANK", "3"}, {"WORLD_SIZE", "4"},
      {"LOCAL_RANK", "1"}, {"GROUP_RANK", "1"}}));
  EXPECT_EQ(c.name, "torchrun");
  EXPECT_EQ(c.world_size, 4);
  EXPECT_EQ(c.global_rank, 3);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.node_rank, 1);
}

TEST(ClusterEnvironment, BadValues) {
  expect_error<ConfigError>([] { tandem::detect_cluster_environment(env_of({{"RANK", "x"},
      {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}})); }, {"RANK=x", "not a non-negative integer"});
  expect_error<ConfigError>([] { tandem::detect_cluster_environment(env_of({{"OMPI_COMM_WORLD_SIZE", "2"},
      {"OMPI_COMM_WORLD_RANK", "2"}})); }, {"rank 2 in a world of 2"});
}

// ---- plans without a launcher ----
TEST(Plan, IssueExample) {
  auto env = simulated_gpus(4);
  auto p = plan(gpu("1, 3"));
  auto j = nlohmann::json::parse(p.to_json());
  EXPECT_EQ(j["accelerator"], "cuda");
  EXPECT_EQ(j["devices"], (nlohmann::json{"cuda:1", "cuda:3"}));
  EXPECT_EQ(j["num_devices"], 2);
  EXPECT_EQ(j["strategy"], "ddp");
  EXPECT_EQ(j["num_nodes"], 1);
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_EQ(j["precision"], "32-true");
  EXPECT_EQ(j["cluster_environment"], "local");
  EXPECT_EQ(j["launch"], "mpirun -np 2 prog");
  EXPECT_EQ(j["launcher"], "mpirun relaunch");
  EXPECT_EQ(j["devices_per_process"], 1);
  // The plan carries the objects that train: the same classes the registries name.
  EXPECT_EQ(p.live_strategy->name(), "ddp");
  EXPECT_EQ(p.live_accelerator->name(), "cuda");
}

TEST(Plan, DataParallelIsOneProcessOverEveryDevice) {
  auto env = simulated_gpus(4);
  auto p = plan(gpu(3, "dp"));
  EXPECT_EQ(p.world_size, 1);
  EXPECT_EQ(p.processes_per_node, 1);
  EXPECT_FALSE(p.launch.has_value());
  auto j = nlohmann::json::parse(p.to_json());
  EXPECT_EQ(j["devices_per_process"], 3);
  EXPECT_EQ(j["launcher"], "none");
  EXPECT_EQ(j["process_device"], "cuda:0");  // the root device
  // The seeds' table: 16-bit with dp is refused, with the reason; bf16 is allowed.
  HardwareOptions sixteen = gpu(2, "dp");
  sixteen.precision = "16-mixed";
  expect_error<ConfigError>([&] { plan(sixteen); }, {"strategy=dp does not train with precision=16-mixed", "bf16-mixed"});
  sixteen.precision = "bf16-mixed";
  EXPECT_EQ(plan(sixteen).precision, tandem::Precision::BFloat16Mixed);
}

TEST(Plan, CpuListsCpuOncePerProcess) {
  auto env = simulated_gpus(0);
  HardwareOptions o;
  o.devices = 3;
  auto p = plan(o);
  EXPECT_EQ(p.accelerator, "cpu");
  ASSERT_EQ(p.devices.size(), 3u);
  for (const auto& d : p.devices) EXPECT_EQ(d.str(), "cpu");
  EXPECT_EQ(p.strategy, "ddp");
  EXPECT_EQ(p.world_size, 3);
}

TEST(Plan, DefaultsOnMachineWithoutGpu) {
  auto env = simulated_gpus(0);
  auto p = plan(HardwareOptions{});
  EXPECT_EQ(p.accelerator, "cpu");
  EXPECT_EQ(p.strategy, "single_device");
  EXPECT_EQ(p.world_size, 1);
  EXPECT_FALSE(p.launch.has_value());
  ASSERT_TRUE(p.process_device.has_value());
  EXPECT_EQ(p.process_device->str(), "cpu");
}

TEST(Plan, DefaultsOnMachineWithGpusUseThemAll) {
  auto env = simulated_gpus(8);
  auto p = plan(HardwareOptions{});
  EXPECT_EQ(p.accelerator, "cuda");
  EXPECT_EQ(p.devices.size(), 8u);
  EXPECT_EQ(p.strategy, "ddp");
  EXPECT_EQ(p.world_size, 8);
}

TEST(Plan, MultiNode) {
  auto env = simulated_gpus(8);
  auto p = plan(gpu(8, "ddp", 4));
  EXPECT_EQ(p.world_size, 32);
  EXPECT_EQ(p.launch, "mpirun -np 32 -H <node0>:8,<node1>:8,<node2>:8,<node3>:8 prog");
  auto one_gpu = plan(gpu(1, "auto", 2));
  EXPECT_EQ(one_gpu.strategy, "ddp");
  EXPECT_EQ(one_gpu.world_size, 2);
}

TEST(Plan, DataParallelIsOneProcess) {
  auto env = simulated_gpus(4);
  auto p = plan(gpu(-1, "dp"));
  EXPECT_EQ(p.strategy, "dp");
  EXPECT_EQ(p.world_size, 1);
  EXPECT_FALSE(p.launch.has_value());
  EXPECT_EQ(p.process_device->str(), "cuda:0");  // the root device
}

TEST(Plan, PrecisionFallbackNoteOnCpu) {
  auto env = simulated_gpus(0);
  HardwareOptions o;
  o.precision = "16";
  auto p = plan(o);
  EXPECT_EQ(p.precision, tandem::Precision::BFloat16Mixed);
  bool warned = false;
  for (const auto& n : p.notes) warned = warned || n.find("bf16-mixed instead") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST(Plan, PrecisionAsAnInt) {
  auto env = simulated_gpus(2);
  auto o = gpu(1);
  o.precision = 16;
  EXPECT_EQ(plan(o).precision, tandem::Precision::Float16Mixed);  // kept on CUDA
}

TEST(Plan, NotesMapCudaVisibleDevices) {
  auto env = simulated_gpus(4);
  env.set("CUDA_VISIBLE_DEVICES", "1,3");
  auto p = plan(gpu("auto"));
  ASSERT_EQ(p.devices.size(), 2u);
  EXPECT_NE(std::find(p.notes.begin(), p.notes.end(),
                      "CUDA_VISIBLE_DEVICES=1,3: cuda:0 is the machine's GPU 1, cuda:1 is the machine's GPU 3"),
            p.notes.end());
}

TEST(Plan, AutoSelectGpusTakesFreeOnes) {
  auto env = simulated_gpus(4, "0,2");
  auto o = gpu(2);
  o.auto_select_gpus = true;
  auto p = plan(o);
  ASSERT_EQ(p.devices.size(), 2u);
  EXPECT_EQ(p.devices[0].str(), "cuda:1");
  EXPECT_EQ(p.devices[1].str(), "cuda:3");
  o.devices = 3;
  expect_error<tandem::DeviceError>([&] { plan(o); }, {"only 2 of 4", "occupied: 0"});
}

TEST(Plan, ErrorsSurfaceFromEveryStage) {
  auto env = simulated_gpus(2);
  HardwareOptions bad_nodes;
  bad_nodes.num_nodes = 0;
  expect_error<ConfigError>([&] { plan(bad_nodes); }, {"num_nodes=0"});
  HardwareOptions bad_precision;
  bad_precision.precision = "half";
  expect_error<ConfigError>([&] { plan(bad_precision); }, {"precision='half'"});
  expect_error<ConfigError>([&] { plan(gpu(std::vector<int>{0, 2})); }, {"index 2 does not exist"});
  expect_error<ConfigError>([&] { plan(gpu(2, "single_device")); }, {"single_device"});
}

// ---- plans under a launcher: devices x num_nodes must equal the world size ----
TEST(PlanUnderLauncher, LocalRankPicksTheDevice) {
  auto env = simulated_gpus(4);
  auto p = plan(gpu("1, 3"), {{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"},
                              {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(p.cluster.name, "openmpi");
  EXPECT_FALSE(p.launch.has_value());
  ASSERT_TRUE(p.process_device.has_value());
  EXPECT_EQ(p.process_device->str(), "cuda:3");
  EXPECT_EQ(p.cluster.global_rank, 1);
}

TEST(PlanUnderLauncher, WorldSizeMismatchShowsBothNumbers) {
  auto env = simulated_gpus(4);
  expect_error<ConfigError>([] {
    plan(gpu(2), {{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  }, {"openmpi launcher started 4 processes", "devices x num_nodes = 2 x 1 = 2", "-np 2"});
  expect_error<ConfigError>([] {
    plan(gpu(4, "ddp", 2), {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "0"}});
  }, {"slurm launcher started 4 processes", "4 x 2 = 8"});
}

TEST(PlanUnderLauncher, MultiNodeMatches) {
  auto env = simulated_gpus(2);
  auto p = plan(gpu(2, "ddp", 2), {{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"GROUP_RANK", "1"}});
  EXPECT_EQ(p.world_size, 4);
  EXPECT_EQ(p.process_device->str(), "cuda:1");
  expect_error<ConfigError>([] {
    plan(gpu(2, "ddp", 2), {{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"GROUP_RANK", "2"}});
  }, {"node 2", "num_nodes=2"});
}

TEST(PlanUnderLauncher, SlurmLocalRankPicksTheDevice) {
  auto env = simulated_gpus(4);
  const std::map<std::string, std::string> vars{{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"},
      {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "1"}};
  auto p = plan(gpu(V{2, 0}, "ddp", 2), vars);
  EXPECT_EQ(p.cluster.name, "slurm");
  EXPECT_EQ(p.cluster.global_rank, 3);
  EXPECT_EQ(p.cluster.node_rank, 1);
  EXPECT_EQ(p.process_device->str(), "cuda:0");  // local rank 1 -> the second listed device
  // srun --mpi=pmix: PMIx names the rank, SLURM the rest.
  auto pmix = plan(gpu(V{2, 0}, "ddp", 2), {{"PMIX_RANK", "2"}, {"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"},
                                             {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "1"}});
  EXPECT_EQ(pmix.cluster.name, "pmix");
  EXPECT_EQ(pmix.process_device->str(), "cuda:2");
}

TEST(PlanUnderLauncher, LocalRankBeyondTheDevices) {
  auto env = simulated_gpus(4);
  expect_error<ConfigError>([] {
    plan(gpu(2, "ddp", 2), {{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"GROUP_RANK", "0"}});
  }, {"local rank 2", "runs only 2 process(es) per node"});
}

TEST(PlanUnderLauncher, CpuProcessesUnderMpirun) {
  auto env = simulated_gpus(0);
  HardwareOptions o;
  o.accelerator = "cpu";
  o.devices = 3;
  auto p = plan(o, {{"OMPI_COMM_WORLD_SIZE", "3"}, {"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}});
  EXPECT_EQ(p.world_size, 3);
  EXPECT_EQ(p.process_device->str(), "cpu");
}

TEST(PlanUnderLauncher, CpuDevicesAutoTakesTheLaunchedProcesses) {
  // `mpirun -np 4 tandem fit --trainer.strategy=ddp` on CPUs: devices=auto means 4 processes
  // (2 per node with num_nodes=2), not 1; an explicit count must still match.
  auto env = simulated_gpus(0);
  HardwareOptions o;
  o.accelerator = "cpu";
  o.strategy = "ddp";
  auto p = plan(o, {{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_EQ(p.world_size, 4);
  EXPECT_EQ(p.devices.size(), 4u);
  EXPECT_FALSE(p.launch.has_value());
  o.num_nodes = 2;
  p = plan(o, {{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "1"}});
  EXPECT_EQ(p.devices.size(), 2u);
  EXPECT_EQ(p.world_size, 4);
  o.num_nodes = 1;
  o.devices = 2;
  expect_error<ConfigError>([&] {
    plan(o, {{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  }, {"started 4 processes", "-np 2"});
  // Without a launcher, devices=auto on CPU stays one process.
  o.devices = "auto";
  EXPECT_EQ(plan(o).world_size, 1);
}

TEST(PlanUnderLauncher, DataParallelNeedsOneProcessPerNode) {
  auto env = simulated_gpus(2);
  expect_error<ConfigError>([] {
    plan(gpu(2, "dp"), {{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  }, {"started 2 processes", "strategy=dp runs 1 process per node"});
}

TEST(PlanUnderLauncher, PmixWithoutSizeIsCheckedLater) {
  auto env = simulated_gpus(2);
  auto p = plan(gpu(2), {{"PMIX_RANK", "1"}});
  EXPECT_EQ(p.cluster.name, "pmix");
  bool noted = false;
  for (const auto& n : p.notes) noted = noted || n.find("when MPI starts") != std::string::npos;
  EXPECT_TRUE(noted);
}
