// `tandem` inside real Slurm jobs: scripts/slurm_cluster.sh's controller and 2 slurmd nodes on
// network-namespace hosts (Debian's slurm-wlm 22.05, munge). Run by ctest under
// `scripts/slurm_cluster.sh run 2 LIMIT --`, which brings the cluster up and down around each
// case and sets SLURM_CONF.
//   - srun -N 2 --ntasks-per-node=1 (--mpi=pmix, the cluster's default) trains ddp across the
//     two nodes and ends with the val_loss of one process at the same global batch;
//   - sbatch with --trainer.num_nodes / --trainer.devices that disagree with the allocation, and
//     tandem run by the batch script without srun, exit 2 on every task with the message;
//   - a job signalled as Slurm warns before a time limit (scancel --signal=USR1) checkpoints,
//     requeues itself (scontrol requeue), and the requeued run resumes and ends with exactly the
//     weights of a run never interrupted;
//   - a node killed during an srun step (every process in its namespace, slurmd included) ends
//     the step with Slurm's node-failure error naming it, in time.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <thread>

#include "engine/trainer/checkpoint.h"
#include "tests/support/run_command.h"
#include "tiny_idx_dataset.h"

namespace fs = std::filesystem;

namespace {

// The ranks' MPI traffic stays on the cluster's links (their byte counters show it crossed).
const std::string task_env = "env OMP_NUM_THREADS=1 OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include=10.77.0.0/24 ";

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The last val_loss of a run's metrics.csv (full float precision).
double val_loss(const fs::path& version_dir) {
  std::ifstream in(version_dir / "metrics.csv");
  std::string header, line, last;
  std::getline(in, header);
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  std::vector<std::string> names, values;
  for (auto [text, out] : {std::pair{header, &names}, std::pair{last, &values}}) {
    std::stringstream ss(text);
    std::string cell;
    while (std::getline(ss, cell, ',')) out->push_back(cell);
  }
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    if (names[i] == "val_loss" && !values[i].empty()) return std::stod(values[i]);
  }
  return std::nan("");
}

int64_t link_bytes(int host, const std::string& direction) {
  std::ifstream in("/sys/class/net/tdm-h" + std::to_string(host) + "/statistics/" + direction + "_bytes");
  int64_t v = -1;
  in >> v;
  return v;
}

// The only .safetensors file under `dir` (recursively); empty when there is not exactly one.
fs::path only_checkpoint(const fs::path& dir) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (e.path().extension() == ".safetensors") found.push_back(e.path());
  }
  return found.size() == 1 ? found[0] : fs::path();
}

// The lines of the controller's and the nodes' logs that name `job` (JobId=N, StepId=N.x), for
// a failure message: the cluster's files are removed when the test ends.
std::string cluster_log_lines(const std::string& job) {
  const fs::path logs = fs::path(std::getenv("SLURM_CONF")).parent_path() / "log";
  const std::regex names_job("(JobId=|StepId=)" + job + "\\b");
  std::string out = "the cluster's log lines for job " + job + ":\n";
  for (const char* name : {"slurmctld.log", "tandem-node0.log", "tandem-node1.log"}) {
    std::ifstream in(logs / name);
    for (std::string line; std::getline(in, line);)
      if (std::regex_search(line, names_job)) out += std::string(name) + ": " + line + "\n";
  }
  return out;
}

// The `tandem` processes running in the nodes' network namespaces (the job's tasks).
std::vector<int> tandem_pids() {
  std::vector<int> pids;
  for (const char* node : {"tandem-node0", "tandem-node1"}) {
    std::stringstream list(run_command(std::string("ip netns pids ") + node).out);
    int pid = 0;
    while (list >> pid) {
      if (read_text("/proc/" + std::to_string(pid) + "/comm") == "tandem\n") pids.push_back(pid);
    }
  }
  return pids;
}

// Whether SIGUSR1 waits for process `pid` (a set bit 10 in /proc/<pid>/status's ShdPnd or SigPnd).
bool usr1_pending(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("ShdPnd:", 0) == 0 || line.rfind("SigPnd:", 0) == 0) {
      if (std::stoull(line.substr(7), nullptr, 16) & (1ull << (SIGUSR1 - 1))) return true;
    }
  }
  return false;
}

class SlurmCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(std::getenv("SLURM_CONF"), nullptr) << "run this test under scripts/slurm_cluster.sh run 2 LIMIT --";
    dir = fs::path(::testing::TempDir()) / ("tandem_slurm_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "data");
    write_tiny_fashion_mnist((dir / "data").string(), 96, 60);
    common = "--data.root=" + (dir / "data").string() + " --data.val_size=24 --trainer.accelerator=cpu" +
             " --trainer.enable_progress_bar=false --model.hidden=[16] --seed_everything=3";
  }
  void TearDown() override { fs::remove_all(dir); }

  std::string fit_command(const std::string& root, const std::string& flags) const {
    return task_env + TANDEM_CLI_PATH + " fit " + common + " --trainer.default_root_dir=" + (dir / root).string() + " " + flags;
  }
  // Submits `script` (its body after #!/bin/sh) with `sbatch_flags`; returns the job id.
  std::string submit(const std::string& name, const std::string& sbatch_flags, const std::string& script) {
    std::ofstream(dir / (name + ".sh")) << "#!/bin/sh\n" << script << "\n";
    const CommandResult r = run_command("cd '" + dir.string() + "' && sbatch --parsable -o '" + (dir / name).string() +
                                        ".out' --open-mode=append " + sbatch_flags + " '" + (dir / name).string() + ".sh'");
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return r.out.substr(0, r.out.find_first_of(";\n"));
  }
  // A field of `scontrol show job` (JobState, Restarts, ExitCode).
  static std::string job_field(const std::string& job, const std::string& field) {
    const std::string out = run_command("scontrol -o show job " + job).out;
    const std::smatch m = [&] {
      std::smatch match;
      std::regex_search(out, match, std::regex("\\b" + field + "=(\\S+)"));
      return match;
    }();
    return m.empty() ? "" : m[1].str();
  }
  // Waits until the job has ended (COMPLETED, FAILED, ...) after `restarts` requeues; its state.
  static std::string wait_for_end(const std::string& job, int restarts, double limit_s) {
    const auto start = std::chrono::steady_clock::now();
    std::string state;
    while (seconds_since(start) < limit_s) {
      state = job_field(job, "JobState");
      if ((state == "COMPLETED" || state == "FAILED" || state == "CANCELLED" || state == "TIMEOUT" ||
           state == "NODE_FAIL") && job_field(job, "Restarts") == std::to_string(restarts)) {
        return state;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return "still " + state + " after " + std::to_string(int(limit_s)) + " s";
  }

  fs::path dir;
  std::string common;
};

TEST_F(SlurmCluster, SrunDdpOnTwoNodesMatchesOneProcessAtTheSameGlobalBatch) {
  const std::string flags = "--trainer.max_epochs=2 --trainer.enable_checkpointing=false --trainer.devices=1 ";
  const CommandResult one = run_command(fit_command("one", flags + "--data.batch_size=12"));
  ASSERT_EQ(one.exit_code, 0) << one.out << one.err;
  const CommandResult small = run_command(fit_command("small", flags + "--data.batch_size=6"));
  ASSERT_EQ(small.exit_code, 0) << small.out << small.err;
  const int64_t tx0 = link_bytes(0, "tx"), tx1 = link_bytes(1, "tx");
  const CommandResult ddp = run_command("cd '" + dir.string() + "' && srun -N 2 --ntasks-per-node=1 " +
                                        fit_command("ddp", flags + "--data.batch_size=6 --trainer.num_nodes=2"));
  ASSERT_EQ(ddp.exit_code, 0) << ddp.out << ddp.err;
  EXPECT_NE(ddp.out.find("ddp: 2 processes x batch 6 = effective batch 12"), std::string::npos) << ddp.out;
  const double ref = val_loss(dir / "one/lightning_logs/version_0");
  const double got = val_loss(dir / "ddp/lightning_logs/version_0");
  const double per_rank = val_loss(dir / "small/lightning_logs/version_0");
  ASSERT_FALSE(std::isnan(ref) || std::isnan(got) || std::isnan(per_rank));
  EXPECT_NEAR(got, ref, 1e-5 * std::abs(ref));
  EXPECT_GT(std::abs(per_rank - ref), 1e-4) << "the reference must be able to tell the batch sizes apart";
  // 12 steps x 12730 float32 gradients, at least half of each allreduce out of each node.
  EXPECT_GT(link_bytes(0, "tx") - tx0, 12 * 12730 * 4 / 2);
  EXPECT_GT(link_bytes(1, "tx") - tx1, 12 * 12730 * 4 / 2);
}

TEST_F(SlurmCluster, SbatchWithFlagsThatDisagreeWithTheAllocationExitsTwo) {
  const std::string mismatch = submit("mismatch", "-N 2 --ntasks-per-node=1",
                                      "srun " + fit_command("m", "--trainer.num_nodes=1 --trainer.devices=2"));
  const std::string no_srun = submit("no_srun", "-N 2 --ntasks-per-node=1",
                                     fit_command("n", "--trainer.num_nodes=2 --trainer.devices=1"));
  EXPECT_EQ(wait_for_end(mismatch, 0, 30), "FAILED");
  EXPECT_EQ(job_field(mismatch, "ExitCode"), "2:0");
  const std::string out = read_text(dir / "mismatch.out");
  // Both tasks say it (each plans before any MPI), naming both sides and the fix.
  const std::string said = "Slurm job " + mismatch + " runs this step on 2 nodes x 1 task per node";
  EXPECT_NE(out.find(said), std::string::npos) << out;
  EXPECT_NE(out.find(said, out.find(said) + 1), std::string::npos) << "from both tasks:\n" << out;
  EXPECT_NE(out.find("--trainer.num_nodes=1 --trainer.devices=2 (2 processes per node)"), std::string::npos) << out;
  EXPECT_NE(out.find("pass --trainer.num_nodes=2 --trainer.devices=1, or ask Slurm for #SBATCH --nodes=1 "
                     "--ntasks-per-node=2"), std::string::npos) << out;

  EXPECT_EQ(wait_for_end(no_srun, 0, 30), "FAILED");
  EXPECT_EQ(job_field(no_srun, "ExitCode"), "2:0");
  const std::string out2 = read_text(dir / "no_srun.out");
  EXPECT_NE(out2.find("batch script of Slurm job " + no_srun), std::string::npos) << out2;
  EXPECT_NE(out2.find("the job has 2 tasks (--nodes=2 x --ntasks-per-node=1)"), std::string::npos) << out2;
}

// The same 2-node training twice: once never interrupted (srun), once as a batch job that gets
// SIGUSR1 mid-training (scancel --signal=USR1, as --signal=USR1@90 delivers it before a time
// limit), with its tasks stopped around the delivery so that it lands before training ends
// however fast the machine is.
TEST_F(SlurmCluster, ASignalledJobCheckpointsRequeuesItselfAndResumesExactly) {
  const std::string flags = "--trainer.max_epochs=6 --data.batch_size=6 --trainer.num_nodes=2 --trainer.devices=1 "
                            "--trainer.log_every_n_steps=1 --trainer.limit_val_batches=1";
  const CommandResult ref = run_command("cd '" + dir.string() + "' && srun -N 2 --ntasks-per-node=1 " +
                                        fit_command("ref", flags));
  ASSERT_EQ(ref.exit_code, 0) << ref.out << ref.err;
  const std::string job = submit("requeue", "-N 2 --ntasks-per-node=1 --requeue", "srun " + fit_command("req", flags));
  const fs::path first_metrics = dir / "req/lightning_logs/version_0/metrics.csv";
  // The tasks are found while they start up, and stopped (SIGSTOP) the moment the first step is
  // logged: looked for only after that, an -O3 build had finished all 36 steps before they were
  // found. Stopped, Slurm's signal is pending in both before either trains on: however fast the
  // machine, it lands mid-training.
  const auto start = std::chrono::steady_clock::now();
  std::vector<int> tasks;
  while (!(tasks.size() == 2 && fs::exists(first_metrics)) && seconds_since(start) < 30) {
    if (tasks.size() != 2) tasks = tandem_pids();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(fs::exists(first_metrics)) << "the job did not start training:\n" << read_text(dir / "requeue.out");
  ASSERT_EQ(tasks.size(), 2u) << "the job's tandem processes in the nodes: " << run_command("ip netns pids tandem-node0; "
                                 "ip netns pids tandem-node1 | xargs -r ps -o pid=,comm= -p").out;
  for (int pid : tasks) kill(pid, SIGSTOP);
  const CommandResult signalled = run_command("scancel --signal=USR1 " + job);
  EXPECT_EQ(signalled.exit_code, 0) << signalled.err;
  const auto sent = std::chrono::steady_clock::now();
  bool pending = false;
  while (!pending && seconds_since(sent) < 10) {
    pending = std::all_of(tasks.begin(), tasks.end(), usr1_pending);
    if (!pending) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (int pid : tasks) kill(pid, SIGCONT);
  ASSERT_TRUE(pending) << "Slurm did not deliver SIGUSR1 to both tasks within 10 s";

  // Requeued, Slurm holds the job for 121 s (EligibleTime) before it may start again; the
  // test lets it start at once.
  const auto requeued = std::chrono::steady_clock::now();
  const auto pending_again = [&] { return job_field(job, "Restarts") == "1" && job_field(job, "JobState") == "PENDING"; };
  while (!pending_again() && seconds_since(requeued) < 30) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(pending_again()) << "not requeued: " << run_command("scontrol -o show job " + job).out << "\n"
                               << read_text(dir / "requeue.out");
  const CommandResult now = run_command("scontrol update jobid=" + job + " StartTime=now");
  EXPECT_EQ(now.exit_code, 0) << now.out << now.err;
  EXPECT_EQ(wait_for_end(job, 1, 60), "COMPLETED") << read_text(dir / "requeue.out") << cluster_log_lines(job);
  const std::string out = read_text(dir / "requeue.out");
  const fs::path hpc = dir / "req/hpc_ckpt_0.safetensors";
  ASSERT_TRUE(fs::exists(hpc)) << out;
  EXPECT_NE(out.find("saved " + hpc.string()), std::string::npos) << out;
  EXPECT_NE(out.find("requeueing job " + job), std::string::npos) << out;
  EXPECT_NE(out.find("resuming the requeued Slurm job from " + hpc.string()), std::string::npos) << out;
  // Stopped mid-training: 6 epochs of 6 steps.
  const int64_t stopped_at = tandem::trainer::load_checkpoint(hpc.string()).trainer_state["global_step"].get<int64_t>();
  EXPECT_GT(stopped_at, 0);
  EXPECT_LT(stopped_at, 36);

  const fs::path want = only_checkpoint(dir / "ref/lightning_logs");
  const fs::path got = only_checkpoint(dir / "req/lightning_logs/version_1");
  ASSERT_FALSE(want.empty() || got.empty()) << out;
  EXPECT_EQ(want.filename(), got.filename());
  const auto a = tandem::trainer::load_checkpoint(want.string()), b = tandem::trainer::load_checkpoint(got.string());
  EXPECT_EQ(b.trainer_state["global_step"], a.trainer_state["global_step"]);
  ASSERT_EQ(a.model.size(), b.model.size());
  for (const auto& [name, tensor] : a.model) {
    ASSERT_TRUE(b.model.contains(name)) << name;
    EXPECT_EQ(tensor.to_vector<double>(), b.model.at(name).to_vector<double>())
        << name << ": the requeued run's weights differ from the uninterrupted run's";
  }
}



// `tandem fit --trainer.max_restarts=2 --trainer.min_processes=1` run by the batch script itself
// (no srun), in a job submitted with --no-kill: it stays as the restart agent and runs the job as
// srun steps on the allocation's nodes.
//   1. Rank 1 killed (kill -9 of its process in tandem-node1, nothing else) once a checkpoint
//      exists: the step ends and the agent runs it again on both nodes from that checkpoint.
//   2. Then node 1 killed outright (every process in tandem-node1: slurmd, slurmstepd, rank 1):
//      slurmctld marks the node down once it misses SlurmdTimeout (10 s here), srun ends the step
//      with an error naming the node (as does rank 0 where it reports first), and Slurm keeps
//      the job on the node left; the agent sees 1 node held and restarts there,
//      --trainer.num_nodes=1, within 40 s of the kill, and the run trains to the end.
TEST_F(SlurmCluster, AKilledRankAndThenAKilledNodeAreRestartedWithinTheAllocation) {
  const std::string job = submit("restart", "-N 2 --ntasks-per-node=1 --no-kill",
                                 fit_command("run", "--trainer.num_nodes=2 --trainer.devices=1 --trainer.max_restarts=2 "
                                                    "--trainer.min_processes=1 --trainer.max_epochs=40 "
                                                    "--data.batch_size=6 --trainer.limit_val_batches=1"));
  const fs::path log = dir / "restart.out";
  const auto checkpoint_in = [&](int version) {
    std::error_code ec;
    const fs::path d = dir / ("run/lightning_logs/version_" + std::to_string(version)) / "checkpoints";
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.path().extension() == ".safetensors") return true;
    return false;
  };
  const auto wait_for = [](const std::function<bool()>& done, double limit_s) {
    const auto start = std::chrono::steady_clock::now();
    while (!done() && seconds_since(start) < limit_s) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return done();
  };
  ASSERT_TRUE(wait_for([&] { return checkpoint_in(0); }, 40)) << "no checkpoint within 40 s:\n" << read_text(log);
  std::vector<int> rank1;
  std::stringstream list(run_command("ip netns pids tandem-node1").out);
  for (int pid = 0; list >> pid;) {
    if (read_text("/proc/" + std::to_string(pid) + "/comm") == "tandem\n") rank1.push_back(pid);
  }
  ASSERT_EQ(rank1.size(), 1u) << "tandem processes in tandem-node1 (rank 1 only expected)";
  ASSERT_EQ(kill(rank1[0], SIGKILL), 0);
  ASSERT_TRUE(wait_for([&] { return checkpoint_in(1); }, 40)) << "the first restart saved no checkpoint:\n" << read_text(log);
  EXPECT_EQ(run_command("ip netns pids tandem-node1 | xargs -r kill -9").exit_code, 0);
  const auto node_killed = std::chrono::steady_clock::now();
  const std::string second = "tandem: restarting the job (restart 2 of at most 2): srun --nodes=1 --ntasks=1 "
                             "--ntasks-per-node=1 --mpi=pmix --kill-on-bad-exit=1 ";
  EXPECT_TRUE(wait_for([&] { return read_text(log).find(second) != std::string::npos; }, 40))
      << "no restart on the node left within 40 s of the node's death:\n" << read_text(log);
  EXPECT_LT(seconds_since(node_killed), 40.0);

  EXPECT_EQ(wait_for_end(job, 0, 90), "COMPLETED") << read_text(log) << cluster_log_lines(job);
  const std::string out = read_text(log);
  const std::string both = "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --mpi=pmix --kill-on-bad-exit=1 ";
  EXPECT_NE(out.find("tandem: starting the job (restart 0 of at most 2): " + both), std::string::npos) << out;
  const size_t first = out.find("tandem: restarting the job (restart 1 of at most 2): " + both);
  ASSERT_NE(first, std::string::npos) << out;
  const fs::path v0 = dir / "run/lightning_logs/version_0/checkpoints", v1 = dir / "run/lightning_logs/version_1/checkpoints";
  EXPECT_NE(out.find("--ckpt_path=" + v0.string(), first), std::string::npos) << "restart 1 resumes from version_0:\n" << out;
  const size_t shrunk = out.find(second);
  ASSERT_NE(shrunk, std::string::npos) << out;
  EXPECT_NE(out.find("--trainer.num_nodes=1 --ckpt_path=" + v1.string(), shrunk), std::string::npos) << out;
  EXPECT_NE(out.find("srun: error: Node failure on tandem-node1"), std::string::npos) << out;
  // Rank 0's Open MPI names its lost peer when it gets to print before srun ends it (under load,
  // srun may be first): where it does, it names the dead node.
  for (size_t at = out.find("Peer host:"); at != std::string::npos; at = out.find("Peer host:", at + 1)) {
    EXPECT_EQ(out.compare(at, 24, "Peer host:  tandem-node1"), 0) << "rank 0 names its lost peer:\n" << out.substr(at, 80);
  }
  // One process at the same per-rank batch takes 12 steps an epoch where two took 6.
  int64_t last_step = -1;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir / "run/lightning_logs", ec)) {
    if (e.path().extension() != ".safetensors") continue;
    last_step = std::max(last_step, tandem::trainer::load_checkpoint(e.path().string()).trainer_state["global_step"].get<int64_t>());
  }
  EXPECT_GT(last_step, 40 * 6) << out;
  EXPECT_LE(last_step, 40 * 12) << out;
  for (const auto& e : fs::directory_iterator(dir / "run", ec)) {
    EXPECT_NE(e.path().filename().string().rfind(".tandem_failures_", 0), 0u) << "the agent removes " << e.path();
  }
}

}  // namespace
