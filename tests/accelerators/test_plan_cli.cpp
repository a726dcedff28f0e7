// `tandem plan` as a user runs it: the built binary, its stdout JSON, its stderr and its exit
// codes (0 success, 2 invalid input with nothing on stdout and one error line on stderr).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/cuda/device_query.h"
#include "tests/cli/tiny_idx_dataset.h"
#include "tests/support/run_command.h"

#if !defined(TANDEM_CLI_PATH) || !defined(TANDEM_XPU_PLUGIN_PATH) || !defined(TANDEM_XPU_CLI_PATH)
#error "TANDEM_CLI_PATH, TANDEM_XPU_PLUGIN_PATH and TANDEM_XPU_CLI_PATH must name the built programs"
#endif

namespace {

struct RunResult : CommandResult {
  nlohmann::json json() const { return nlohmann::json::parse(out); }
};

// Launcher and simulation variables of the test's own environment would change the answers.
const std::string kCleanEnv =
    "env -u TANDEM_SIMULATE_CUDA_DEVICES -u TANDEM_SIMULATE_BUSY_CUDA_DEVICES -u CUDA_VISIBLE_DEVICES "
    "-u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_LOCAL_RANK -u OMPI_COMM_WORLD_LOCAL_SIZE "
    "-u PMIX_RANK -u SLURM_PROCID -u SLURM_NTASKS -u SLURM_STEP_NUM_TASKS -u SLURM_LOCALID -u SLURM_NODEID "
    "-u RANK -u WORLD_SIZE -u LOCAL_RANK -u GROUP_RANK OMP_NUM_THREADS=1 ";

// Runs `env <env> <program> <args>` from a clean environment.
RunResult run_program(const std::string& program, const std::string& args, const std::string& env) {
  return RunResult{run_command(kCleanEnv + env + " " + program + " " + args)};
}

// `tandem plan args`, by default on a simulated machine with four GPUs.
RunResult run_plan(const std::string& args, const std::string& env = "TANDEM_SIMULATE_CUDA_DEVICES=4") {
  return run_program(std::string(TANDEM_CLI_PATH) + " plan", args, env);
}

void expect_invalid(const RunResult& r, const std::string& fragment) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
}

std::vector<std::string> devices_of(const RunResult& r) {
  return r.json()["devices"].get<std::vector<std::string>>();
}

}  // namespace

TEST(PlanCli, IssueExample) {
  auto r = run_plan("--trainer.accelerator=cuda --trainer.devices '1, 3'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = r.json();
  EXPECT_EQ(j["accelerator"], "cuda");
  EXPECT_EQ(devices_of(r), (std::vector<std::string>{"cuda:1", "cuda:3"}));
  EXPECT_EQ(j["num_devices"], 2);
  EXPECT_EQ(j["strategy"], "ddp");
  EXPECT_EQ(j["num_nodes"], 1);
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_EQ(j["precision"], "32-true");
  EXPECT_EQ(j["cluster_environment"], "local");
  EXPECT_EQ(j["launch"], std::string("mpirun -np 2 ") + TANDEM_CLI_PATH + " fit --trainer.accelerator=cuda --trainer.devices '1, 3'");
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1);  // exactly one line: one JSON object
}

// Every row of the seeds' devices table, through the binary.
TEST(PlanCli, DevicesTable) {
  using S = std::vector<std::string>;
  const std::vector<std::pair<std::string, S>> rows{
      {"3", {"cuda:0", "cuda:1", "cuda:2"}},
      {"-1", {"cuda:0", "cuda:1", "cuda:2", "cuda:3"}},
      {"[0]", {"cuda:0"}},
      {"[1,3]", {"cuda:1", "cuda:3"}},
      {"'\"3\"'", {"cuda:0", "cuda:1", "cuda:2"}},  // a YAML-quoted string "3" behaves like 3
      {"'1, 3'", {"cuda:1", "cuda:3"}},
      {"'\"-1\"'", {"cuda:0", "cuda:1", "cuda:2", "cuda:3"}},
      {"auto", {"cuda:0", "cuda:1", "cuda:2", "cuda:3"}},
  };
  for (const auto& [flag, expected] : rows) {
    auto r = run_plan("--trainer.accelerator=gpu --trainer.devices=" + flag);
    ASSERT_EQ(r.exit_code, 0) << flag << ": " << r.err;
    EXPECT_EQ(devices_of(r), expected) << flag;
  }
}

TEST(PlanCli, DefaultsWithAndWithoutGpus) {
  auto cpu = run_plan("", "TANDEM_SIMULATE_CUDA_DEVICES=0");
  ASSERT_EQ(cpu.exit_code, 0);
  EXPECT_EQ(cpu.json()["accelerator"], "cpu");
  EXPECT_EQ(cpu.json()["strategy"], "single_device");
  EXPECT_NE(cpu.err.find("accelerator=auto picked cpu"), std::string::npos);  // the log line
  auto gpus = run_plan("", "TANDEM_SIMULATE_CUDA_DEVICES=2");
  EXPECT_EQ(gpus.json()["accelerator"], "cuda");
  EXPECT_EQ(gpus.json()["world_size"], 2);
  EXPECT_NE(gpus.err.find("accelerator=auto picked cuda"), std::string::npos);
}

TEST(PlanCli, CpuProcessesAndPrecisionFallback) {
  auto r = run_plan("--trainer.accelerator=cpu --trainer.devices=2 --trainer.precision=16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(devices_of(r), (std::vector<std::string>{"cpu", "cpu"}));
  EXPECT_EQ(r.json()["precision"], "bf16-mixed");
  EXPECT_NE(r.err.find("warning: precision=16-mixed is not supported on CPU"), std::string::npos);
  EXPECT_NE(r.err.find("warning:"), std::string::npos);  // GPUs present but unused
}

TEST(PlanCli, ConfigFileWithFlagOverride) {
  const std::string path = testing::TempDir() + "tandem_cli_run_" + std::to_string(getpid()) + ".yaml";
  std::ofstream(path) << "trainer:\n  accelerator: cuda\n  devices: [0, 2]\n  num_nodes: 2\n";
  auto r = run_plan("--config " + path + " --trainer.precision=bf16");
  std::remove(path.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(devices_of(r), (std::vector<std::string>{"cuda:0", "cuda:2"}));
  EXPECT_EQ(r.json()["world_size"], 4);
  EXPECT_EQ(r.json()["precision"], "bf16-mixed");
}

TEST(PlanCli, PrintConfig) {
  auto r = run_plan("--trainer.devices=2 --print_config");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("trainer:"), std::string::npos);
  EXPECT_NE(r.out.find("devices: 2"), std::string::npos);
  EXPECT_NE(r.out.find("num_nodes: 1"), std::string::npos);
}

TEST(PlanCli, Help) {
  auto r = run_plan("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(r.out_has("--trainer.devices")) << r.out;
  // The registries' names with their descriptions; a plugin's accelerator joins them.
  EXPECT_TRUE(r.out_has("  cuda  NVIDIA GPUs through the CUDA runtime")) << r.out;
  EXPECT_TRUE(r.out_has("  single_device  one process on one device")) << r.out;
  EXPECT_FALSE(r.out_has("  xpu  ")) << r.out;
  auto plugin = run_plan(std::string("--plugin=") + TANDEM_XPU_PLUGIN_PATH + " --help");
  EXPECT_EQ(plugin.exit_code, 0) << plugin.err;
  EXPECT_TRUE(plugin.out_has("  xpu  XPU Accelerator - optimized for large-scale machine learning")) << plugin.out;
}

// Every devices error in the issue, through the binary: exit 2, nothing on stdout, one line on
// stderr that says what was asked, what the machine has and which forms are accepted.
TEST(PlanCli, InvalidDevices) {
  struct Case {
    std::string flag, echoed, problem;
  };
  // A YAML-quoted number reaches Tandem as the number: devices="0" and devices=0 are one value.
  const std::vector<Case> cases{
      {"0", "devices=0 ", "0 selects no device"},
      {"'\"0\"'", "devices=0 ", "0 selects no device"},
      {"[]", "devices=[] ", "an empty list selects no device"},
      {"[1,1]", "devices=[1, 1] ", "index 1 appears more than once"},
      {"'2, 2'", "devices=\"2, 2\" ", "index 2 appears more than once"},
      {"[0,7]", "devices=[0, 7] ", "index 7 does not exist"},
      {"9", "devices=9 ", "asks for the first 9 devices"},
      {"-2", "devices=-2 ", "negative values other than -1"},
      {"'\"-3\"'", "devices=-3 ", "negative values other than -1"},
      {"[0,-1]", "devices=[0, -1] ", "index -1 is negative"},
      {"1.5", "devices=\"1.5\" ", "'1.5' is not an integer"},
      {"two", "devices=\"two\" ", "'two' is not an integer"},
      {"'1, x'", "devices=\"1, x\" ", "'x' is not an integer"},
      {"[0,x]", "devices=[0, x] ", "'x' is not an integer index"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.flag);
    auto r = run_plan("--trainer.accelerator=gpu --trainer.devices=" + c.flag);
    expect_invalid(r, c.echoed + "for accelerator=cuda: " + c.problem);
    EXPECT_TRUE(r.err_has("this machine has 4 cuda devices (indices 0..3)")) << r.err;
    EXPECT_TRUE(r.err_has("accepted forms:")) << r.err;
  }
}

// The other errors in the issue, through the binary.
TEST(PlanCli, InvalidInput) {
  expect_invalid(run_plan("--trainer.accelerator=cpu --trainer.devices=0"), "must be > 0");
  expect_invalid(run_plan("--trainer.accelerator=cuda", "TANDEM_SIMULATE_CUDA_DEVICES=0"), "accelerators available: cpu");
  expect_invalid(run_plan("--trainer.accelerator=tpu"), "unknown accelerator 'tpu'");
  expect_invalid(run_plan("--trainer.strategy=colossal"), "registered strategy: bagua, ddp, ddp2, ddp_sharded, ddp_spawn, dp, horovod, single_device");
  expect_invalid(run_plan("--trainer.num_nodes=0"), "positive integer");
  expect_invalid(run_plan("--trainer.num_nodes=two"), "expected an integer");
  expect_invalid(run_plan("--trainer.precision=8"), "allowed");
  expect_invalid(run_plan("--trainer.accelerator=cuda --trainer.precision=64"), "CPU only");
  expect_invalid(run_plan("--trainer.devics=2"), "did you mean --trainer.devices?");
  expect_invalid(run_plan("--trainer.strategy=dp --trainer.accelerator=cpu --trainer.num_nodes=2"), "use --trainer.strategy=ddp2");
  expect_invalid(run_plan("--trainer.strategy=single_device --trainer.devices=2"), "single_device");
  expect_invalid(run_plan("--config /nonexistent.yaml"), "cannot open");
  expect_invalid(run_plan("--plugin=/nonexistent/libx.so"), "cannot load");
  expect_invalid(run_plan("", "TANDEM_SIMULATE_CUDA_DEVICES=lots"), "TANDEM_SIMULATE_CUDA_DEVICES=lots");
}

TEST(PlanCli, BusyGpusAreARuntimeError) {
  auto r = run_plan("--trainer.devices=3 --trainer.auto_select_gpus=true",
                    "TANDEM_SIMULATE_CUDA_DEVICES=4 TANDEM_SIMULATE_BUSY_CUDA_DEVICES=1,3");
  EXPECT_EQ(r.exit_code, 1);  // the flags are fine; the machine is busy now
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("only 2 of 4"), std::string::npos) << r.err;
  auto ok = run_plan("--trainer.devices=2 --trainer.auto_select_gpus=true",
                     "TANDEM_SIMULATE_CUDA_DEVICES=4 TANDEM_SIMULATE_BUSY_CUDA_DEVICES=1,3");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(devices_of(ok), (std::vector<std::string>{"cuda:0", "cuda:2"}));
}

TEST(PlanCli, IndicesAreRelativeToCudaVisibleDevices) {
  // A simulated machine with 4 GPUs, of which this process sees the machine's 2 and 3.
  const std::string env = "TANDEM_SIMULATE_CUDA_DEVICES=4 CUDA_VISIBLE_DEVICES=2,3";
  auto all = run_plan("--trainer.accelerator=cuda --trainer.devices=-1", env);
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(devices_of(all), (std::vector<std::string>{"cuda:0", "cuda:1"}));
  EXPECT_TRUE(all.err_has("CUDA_VISIBLE_DEVICES=2,3: cuda:0 is the machine's GPU 2, cuda:1 is the machine's GPU 3"))
      << all.err;
  auto second = run_plan("--trainer.accelerator=cuda --trainer.devices=[1]", env);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(devices_of(second), (std::vector<std::string>{"cuda:1"}));
  auto beyond = run_plan("--trainer.accelerator=cuda --trainer.devices=[2]", env);
  expect_invalid(beyond, "index 2 does not exist");
  EXPECT_TRUE(beyond.err_has("this machine has 2 cuda devices (indices 0..1)")) << beyond.err;
  EXPECT_TRUE(beyond.err_has("indices are relative to CUDA_VISIBLE_DEVICES=2,3")) << beyond.err;
  // An empty CUDA_VISIBLE_DEVICES hides every GPU: auto falls back to the CPU.
  auto hidden = run_plan("", "TANDEM_SIMULATE_CUDA_DEVICES=4 CUDA_VISIBLE_DEVICES=");
  ASSERT_EQ(hidden.exit_code, 0) << hidden.err;
  EXPECT_EQ(hidden.json()["accelerator"], "cpu");
}

// Under each launcher the plan reads its variables: ranks, and the device the local rank picks.
TEST(PlanCli, UnderLaunchers) {
  struct Case {
    std::string flags, env, cluster;
    int global_rank, node_rank;
    std::string process_device;
  };
  const std::vector<Case> cases{
      {"--trainer.devices=2", "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_LOCAL_RANK=1 "
       "OMPI_COMM_WORLD_LOCAL_SIZE=2", "openmpi", 1, 0, "cuda:1"},
      {"--trainer.devices '1, 3'", "SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=1 SLURM_NODEID=0", "slurm", 1, 0, "cuda:3"},
      {"--trainer.devices=2 --trainer.num_nodes=2", "RANK=2 WORLD_SIZE=4 LOCAL_RANK=0 GROUP_RANK=1", "torchrun", 2, 1,
       "cuda:0"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.cluster);
    auto r = run_plan(c.flags, "TANDEM_SIMULATE_CUDA_DEVICES=4 " + c.env);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.json()["cluster_environment"], c.cluster);
    EXPECT_EQ(r.json()["global_rank"], c.global_rank);
    EXPECT_EQ(r.json()["node_rank"], c.node_rank);
    EXPECT_EQ(r.json()["process_device"], c.process_device);
    EXPECT_TRUE(r.json()["launch"].is_null());  // already launched
  }
  // The launcher's process count must be what the flags ask for; the error shows both.
  expect_invalid(run_plan("--trainer.devices=2", "TANDEM_SIMULATE_CUDA_DEVICES=4 OMPI_COMM_WORLD_SIZE=3 OMPI_COMM_WORLD_RANK=0"),
                 "openmpi launcher started 3 processes, but devices x num_nodes = 2 x 1 = 2");
  expect_invalid(run_plan("--trainer.devices=2", "TANDEM_SIMULATE_CUDA_DEVICES=2 RANK=0 WORLD_SIZE=4 LOCAL_RANK=0"),
                 "torchrun launcher started 4 processes, but devices x num_nodes = 2 x 1 = 2");
}

// `tandem plan` takes what `tandem fit` takes: model, data and optimizer flags, and a run's
// saved config.yaml (which holds every section).
TEST(PlanCli, AcceptsFitFlagsAndConfigs) {
  auto flags = run_plan("--model=cnn --optimizer=SGD --optimizer.lr=0.1 --data.batch_size=64 --trainer.devices=2 "
                        "--trainer.accelerator=cpu");
  ASSERT_EQ(flags.exit_code, 0) << flags.err;
  EXPECT_EQ(flags.json()["world_size"], 2);
  expect_invalid(run_plan("--model=cnn --optimizer.lr=-1"), "--optimizer.lr=-1");
  auto saved = run_plan("--model=cnn --trainer.devices=3 --trainer.accelerator=cpu --print_config");
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  EXPECT_TRUE(saved.out_has("model:")) << saved.out;
  const std::string path = testing::TempDir() + "tandem_plan_saved_" + std::to_string(getpid()) + ".yaml";
  std::ofstream(path) << saved.out;
  auto replanned = run_plan("--config " + path);
  std::remove(path.c_str());
  ASSERT_EQ(replanned.exit_code, 0) << replanned.err;
  EXPECT_EQ(devices_of(replanned), (std::vector<std::string>{"cpu", "cpu", "cpu"}));
}

// Without simulation the machine answers: this one's GPUs, or an error that lists what is
// available (a build without CUDA says so).
TEST(PlanCli, CudaOnTheRealMachine) {
  auto r = run_plan("--trainer.accelerator=cuda --trainer.devices=1", "");
  if (tandem::cuda::visible_device_count() > 0) {
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(devices_of(r), (std::vector<std::string>{"cuda:0"}));
    return;
  }
  expect_invalid(r, "accelerator=cuda is not available here: ");
  EXPECT_TRUE(r.err_has("accelerators available: cpu")) << r.err;
  EXPECT_TRUE(r.err_has(tandem::cuda::built_with_cuda() ? "the CUDA runtime found no usable device"
                                                        : "Tandem was built without CUDA")) << r.err;
}

// Training refuses the simulation variables (planning is all they are for), whatever the
// accelerator; the refusal comes before any data is read.
TEST(FitCli, RefusesSimulatedGpus) {
  for (const std::string env : {"TANDEM_SIMULATE_CUDA_DEVICES=2", "TANDEM_SIMULATE_BUSY_CUDA_DEVICES=0"}) {
    SCOPED_TRACE(env);
    auto r = run_program(TANDEM_CLI_PATH, "fit --trainer.accelerator=cpu --trainer.devices=1 --data.root=/nonexistent",
                         env);
    expect_invalid(r, "refusing to start a Trainer: " + env + " is set");
  }
}

TEST(PlanCli, XpuPluginEndToEnd) {
  auto r = run_plan(std::string("--plugin=") + TANDEM_XPU_PLUGIN_PATH + " --trainer.accelerator=xpu --trainer.devices=2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json()["accelerator"], "xpu");
  EXPECT_EQ(devices_of(r), (std::vector<std::string>{"xpu:0", "xpu:1"}));
  EXPECT_EQ(r.json()["strategy"], "ddp");
  // Without the plugin the name is unknown, and the error lists what is registered.
  expect_invalid(run_plan("--trainer.accelerator=xpu"), "registered accelerator: cpu, cuda");
  expect_invalid(run_plan(std::string("--plugin=") + TANDEM_XPU_PLUGIN_PATH + " --trainer.accelerator=xpu --trainer.devices=5"),
                 "4 xpu devices");
}

// The plugin works with every subcommand: fit accepts the accelerator and reaches the Trainer,
// which says it cannot train on it yet (its training strategies drive CPU and CUDA tensors).
TEST(FitCli, LoadsPlugins) {
  auto r = run_program(TANDEM_CLI_PATH, std::string("fit --plugin=") + TANDEM_XPU_PLUGIN_PATH +
                       " --trainer.accelerator=xpu --trainer.devices=1", "");
  expect_invalid(r, "accelerator=xpu cannot train: a registered accelerator needs a kernel backend");
  expect_invalid(run_program(TANDEM_CLI_PATH, "test --plugin=/nonexistent/libx.so", ""), "cannot load the shared library");
  expect_invalid(run_program(TANDEM_CLI_PATH, "fit --plugn=x.so", ""), "did you mean --plugin?");
}

// A user program that registers "xpu" and runs Tandem's command line: --trainer.accelerator=xpu
// works with no other change, with the same devices rules and errors as the built-ins.
TEST(XpuUserProgram, PlansThroughTheCli) {
  auto r = run_program(TANDEM_XPU_CLI_PATH, "plan --trainer.accelerator=XPU --trainer.devices '1, 3'",
                       "TANDEM_SIMULATE_CUDA_DEVICES=0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json()["accelerator"], "xpu");
  EXPECT_EQ(devices_of(r), (std::vector<std::string>{"xpu:1", "xpu:3"}));
  EXPECT_EQ(r.json()["strategy"], "ddp");
  // The launch command runs this program (which knows "xpu"), not the stock tandem.
  EXPECT_EQ(r.json()["launch"], std::string("mpirun -np 2 ") + TANDEM_XPU_CLI_PATH +
                                    " fit --trainer.accelerator=XPU --trainer.devices '1, 3'");
  auto one = run_program(TANDEM_XPU_CLI_PATH, "plan --trainer.accelerator=xpu --trainer.devices=1", "TANDEM_SIMULATE_CUDA_DEVICES=0");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.json()["strategy"], "single_device");
  EXPECT_EQ(one.json()["process_device"], "xpu:0");
  // GPUs left idle by another accelerator are worth a warning.
  auto idle = run_program(TANDEM_XPU_CLI_PATH, "plan --trainer.accelerator=xpu --trainer.devices=1", "TANDEM_SIMULATE_CUDA_DEVICES=2");
  ASSERT_EQ(idle.exit_code, 0) << idle.err;
  EXPECT_TRUE(idle.err_has("warning: 2 simulated CUDA devices")) << idle.err;
  EXPECT_TRUE(idle.err_has("accelerator=xpu does not use them")) << idle.err;
  auto bad = run_program(TANDEM_XPU_CLI_PATH, "plan --trainer.accelerator=xpu --trainer.devices=[4]", "");
  expect_invalid(bad, "devices=[4] for accelerator=xpu: index 4 does not exist");
  EXPECT_TRUE(bad.err_has("this machine has 4 xpu devices")) << bad.err;
  auto fit = run_program(TANDEM_XPU_CLI_PATH, "fit --trainer.accelerator=xpu --trainer.devices=1", "");
  expect_invalid(fit, "accelerator=xpu cannot train: a registered accelerator needs a kernel backend");
}

// --predict with the step given: the default MLP's two buckets (fc3 + fc2: 1,059,850 floats,
// then fc1: 803,840) and the scaling model's step at 2 nodes x 2 processes over 1 GB/s links with
// no latency. Ring at 4 ranks: 1.5 n / 1e9 s a bucket. Bucket 0 is ready at
// 10 + 20 * 4239400 / 7454760 ms and done 6.3591 ms later; bucket 1 is ready at 30 ms, when
// backward ends, and done 4.82304 ms later: that much is exposed.
TEST(PlanCli, PredictGivesTheScalingModelsStepForTheConfiguredModel) {
  auto r = run_plan("--trainer.accelerator=cpu --trainer.num_nodes=2 --trainer.devices=2 --predict_step_ms=10,20,2 "
                    "--predict_intra=0,1 --predict_inter=0,1",
                    "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto p = r.json()["prediction"];
  EXPECT_EQ(p["ranks"], 4);
  EXPECT_EQ(p["bucket_bytes"].get<std::vector<int64_t>>(), (std::vector<int64_t>{4'239'400, 3'215'360}));
  EXPECT_NEAR(p["exposed_communication_ms"].get<double>(), 4.82304, 1e-9);
  EXPECT_NEAR(p["step_ms"].get<double>(), 32 + 4.82304, 1e-9);
  EXPECT_NEAR(p["efficiency"].get<double>(), 32 / (32 + 4.82304), 1e-12);
  EXPECT_EQ(p["step_profile"]["source"], "given by --predict_step_ms");
  // Every other averaging and bucket cap is listed; with exposed time left, the advice names one.
  EXPECT_EQ(p["alternatives"].size(), 4u + 3u);
  EXPECT_NE(p["advice"].get<std::string>().find(" would take the step from 36.8 to "), std::string::npos) << p["advice"];
}

TEST(PlanCli, PredictMeasuresTheStepWhenNotGiven) {
  const std::filesystem::path data = std::filesystem::temp_directory_path() / ("tandem_predict_" + std::to_string(getpid()));
  std::filesystem::create_directories(data);
  write_tiny_fashion_mnist(data.string(), 80, 10);
  auto r = run_plan("--trainer.accelerator=cpu --trainer.devices=2 --predict --data.batch_size=8 --data.val_size=16 "
                    "--model.hidden=[16] --trainer.default_root_dir=" + data.string() + " --data.root=" + data.string(),
                    "");
  std::filesystem::remove_all(data);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto profile = r.json()["prediction"]["step_profile"];
  EXPECT_EQ(profile["source"], "measured here on one cpu device");
  EXPECT_GT(profile["forward_ms"].get<double>(), 0.0);
  EXPECT_GT(profile["backward_ms"].get<double>(), 0.0);
}

TEST(PlanCli, MalformedPredictValuesAreConfigErrors) {
  expect_invalid(run_plan("--trainer.accelerator=cpu --predict_step_ms=10,20", ""),
                 "--predict_step_ms=10,20 is not valid: expected F,B,O");
  expect_invalid(run_plan("--trainer.accelerator=cpu --predict_step_ms=1,2,3 --predict_intra=5,0", ""),
                 "--predict_intra: the bandwidth must be > 0 GB/s");
  expect_invalid(run_plan("--trainer.accelerator=cpu --predict_step_ms=1,2,3 --predict_averaging=ring", ""),
                 "averaging 'ring' is not known; choose one of allreduce");
  expect_invalid(run_plan("--trainer.accelerator=cpu --predict=yes", ""), "--predict takes no value");
  expect_invalid(run_plan("--trainer.accelerator=cpu --predict_step_ms=1,2,3 --predict_host_ns_per_byte=-1", ""),
                 "--predict_host_ns_per_byte=-1 is not valid: expected nanoseconds per byte >= 0");
}
