// `tandem plan` as a user runs it: the built binary, its stdout JSON, its stderr and its exit
// codes (0 success, 2 invalid input with nothing on stdout and one error line on stderr).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#ifndef TANDEM_CLI_PATH
#error "TANDEM_CLI_PATH must name the built tandem binary"
#endif

namespace {

struct RunResult {
  int exit_code = -1;
  std::string out, err;
  nlohmann::json json() const { return nlohmann::json::parse(out); }
  int err_lines() const {
    int n = 0;
    for (char c : err) n += c == '\n';
    return n;
  }
};

// Runs `env tandem plan args` with stderr captured to a file.
RunResult run_plan(const std::string& args, const std::string& env = "TANDEM_SIMULATE_CUDA_DEVICES=4") {
  // Per-process file names: ctest -j runs each test case as its own process, concurrently.
  const std::string err_path = testing::TempDir() + "tandem_plan_stderr_" + std::to_string(getpid()) + ".txt";
  const std::string cmd = "env -u TANDEM_SIMULATE_BUSY_CUDA_DEVICES -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK "
                          "-u PMIX_RANK -u SLURM_PROCID -u SLURM_NTASKS -u RANK -u WORLD_SIZE -u LOCAL_RANK " +
                          env + " " + TANDEM_CLI_PATH + " plan " + args + " 2>" + err_path;
  RunResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::remove(err_path.c_str());
  return r;
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
  EXPECT_EQ(j["launch"].get<std::string>().rfind("mpirun -np 2 tandem fit", 0), 0u);
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

TEST(PlanCli, UnderMpirunVariables) {
  auto r = run_plan("--trainer.devices=2", "TANDEM_SIMULATE_CUDA_DEVICES=4 OMPI_COMM_WORLD_SIZE=2 "
                    "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_LOCAL_RANK=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json()["cluster_environment"], "openmpi");
  EXPECT_EQ(r.json()["process_device"], "cuda:1");
  EXPECT_TRUE(r.json()["launch"].is_null());
  expect_invalid(run_plan("--trainer.devices=2", "TANDEM_SIMULATE_CUDA_DEVICES=4 OMPI_COMM_WORLD_SIZE=3 "
                          "OMPI_COMM_WORLD_RANK=0"), "started 3 processes");
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
  EXPECT_NE(r.out.find("--trainer.devices"), std::string::npos);
}

// Every error in the issue, through the binary: exit 2, nothing on stdout, one line on stderr.
TEST(PlanCli, InvalidInput) {
  expect_invalid(run_plan("--trainer.accelerator=gpu --trainer.devices=0"), "selects no device");
  expect_invalid(run_plan("--trainer.accelerator=gpu --trainer.devices='\"0\"'"), "selects no device");
  expect_invalid(run_plan("--trainer.accelerator=gpu --trainer.devices=[]"), "empty list");
  expect_invalid(run_plan("--trainer.accelerator=gpu --trainer.devices=[1,1]"), "more than once");
  expect_invalid(run_plan("--trainer.accelerator=gpu --trainer.devices=[0,7]"), "index 7 does not exist");
  expect_invalid(run_plan("--trainer.accelerator=gpu --trainer.devices=9"), "this machine has 4 cuda devices");
  expect_invalid(run_plan("--trainer.accelerator=gpu --trainer.devices=-2"), "negative values other than -1");
  expect_invalid(run_plan("--trainer.accelerator=gpu --trainer.devices=1.5"), "not an integer");
  expect_invalid(run_plan("--trainer.accelerator=cpu --trainer.devices=0"), "must be > 0");
  expect_invalid(run_plan("--trainer.accelerator=cuda", "TANDEM_SIMULATE_CUDA_DEVICES=0"), "accelerators available: cpu");
  expect_invalid(run_plan("--trainer.accelerator=tpu"), "unknown accelerator 'tpu'");
  expect_invalid(run_plan("--trainer.strategy=horovod"), "registered strategy: ddp, ddp_spawn, dp, single_device");
  expect_invalid(run_plan("--trainer.num_nodes=0"), "positive integer");
  expect_invalid(run_plan("--trainer.num_nodes=two"), "expected an integer");
  expect_invalid(run_plan("--trainer.precision=8"), "allowed");
  expect_invalid(run_plan("--trainer.accelerator=cuda --trainer.precision=64"), "CPU only");
  expect_invalid(run_plan("--trainer.devics=2"), "did you mean --trainer.devices?");
  expect_invalid(run_plan("--trainer.strategy=dp --trainer.accelerator=cpu"), "needs accelerator=cuda");
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

#ifdef TANDEM_XPU_PLUGIN_PATH
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
#endif
