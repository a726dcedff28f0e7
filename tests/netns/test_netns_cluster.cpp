// `tandem` across "hosts" that are network namespaces (scripts/netns_cluster.sh), started by
// mpirun through our launcher agent, as a user runs it on two machines. Run by ctest under
// `scripts/netns_cluster.sh run N 50 --`, which brings N hosts up and down around each case.
//   - ddp on 2 and 3 hosts x 1 device (mpirun -H, by address and by name) and ddp2 on 2 hosts x 2 CPU devices
//     (mpirun --hostfile) end with the val_loss of one process at the same global batch, and the
//     gradients crossed the veth links (their byte counters);
//   - node_rank and local rank follow the hosts, with and without --map-by node;
//   - a killed host (every process in its namespace) and a cut-off host (its link down) end the
//     job with an error naming the host, in time.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/support/run_command.h"
#include "tiny_idx_dataset.h"

namespace fs = std::filesystem;

namespace {

const std::string cluster = NETNS_CLUSTER_SCRIPT;
const std::string env_prefix = "env OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ";

std::string trimmed(const std::string& s) { return s.substr(0, s.find_last_not_of(" \n") + 1); }
std::string cluster_says(const std::string& what) { return trimmed(run_command(cluster + " " + what).out); }

// Bytes through each host's link, read on the root namespace's end (tdm-h<i>).
int64_t link_bytes(int host, const std::string& direction) {
  std::ifstream in("/sys/class/net/tdm-h" + std::to_string(host) + "/statistics/" + direction + "_bytes");
  int64_t v = -1;
  in >> v;
  return v;
}

// The last val_loss row of a run's metrics.csv (full float precision).
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

class NetnsCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::path(::testing::TempDir()) / ("tandem_netns_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "data");
    write_tiny_fashion_mnist((dir / "data").string(), 96, 60);
    common = "--data.root=" + (dir / "data").string() + " --data.val_size=24 --trainer.accelerator=cpu" +
             " --trainer.enable_progress_bar=false --model.hidden=[16] --seed_everything=3" +
             " --trainer.enable_checkpointing=false";
    hosts = cluster_says("hosts");
    mpirun_args = cluster_says("mpirun-args");
    ASSERT_EQ(hosts.rfind("10.77.0.10,10.77.0.11", 0), 0u) << "run this test under scripts/netns_cluster.sh run N LIMIT --";
  }
  void TearDown() override { fs::remove_all(dir); }

  // One `tandem fit`; returns its version directory. `launcher` empty: one process.
  fs::path fit(const std::string& name, const std::string& launcher, const std::string& flags) {
    const fs::path root = dir / name;
    const CommandResult r = run_command("cd '" + dir.string() + "' && " + env_prefix + launcher + " " + TANDEM_CLI_PATH +
                                        " fit " + common + " --trainer.default_root_dir=" + root.string() + " " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    last_output = r.out + r.err;
    return root / "lightning_logs/version_0";
  }
  int host_count() const { return static_cast<int>(std::count(hosts.begin(), hosts.end(), ',')) + 1; }
  // A job that hangs is ended after 25 s, so the case fails with its output instead of being
  // killed silently at the 50 s limit.
  std::string mpirun(const std::string& placement) const {
    return "timeout --kill-after=3 25 " + std::string(TANDEM_MPIEXEC_PATH) + " -np " + std::to_string(host_count()) +
           " " + placement + " " + mpirun_args + " -x OMP_NUM_THREADS";
  }

  // ddp at one rank per host placed by `host_list` (mpirun -H), batch 12 / hosts each, against
  // one process at batch 12 and, to show that the comparison can tell, at the per-rank batch.
  void expect_ddp_matches_one_process(const std::string& host_list);
  void expect_fault_ends_the_job(const std::string& fault);

  fs::path dir;
  std::string common, hosts, mpirun_args, last_output;
};

// 2 epochs of 72 examples at a global batch of 12 (12 optimizer steps) for the model
// 784-16-10: 12730 float32 gradients = 50920 bytes per allreduce.
constexpr int64_t kGradientBytes = 12730 * 4;
constexpr int64_t kSteps = 12;

void NetnsCluster::expect_ddp_matches_one_process(const std::string& host_list) {
  const std::string flags = " --trainer.max_epochs=2 ";
  const int n = host_count();
  const std::string per_rank = std::to_string(12 / n);
  const double one = val_loss(fit("one", "", flags + "--data.batch_size=12 --trainer.devices=1"));
  const double small = val_loss(fit("small", "", flags + "--data.batch_size=" + per_rank + " --trainer.devices=1"));
  std::vector<std::pair<int64_t, int64_t>> before;
  for (int h = 0; h < n; ++h) before.emplace_back(link_bytes(h, "tx"), link_bytes(h, "rx"));
  const double ddp = val_loss(fit("ddp", mpirun("-H " + host_list), flags + "--data.batch_size=" + per_rank +
                                  " --trainer.devices=1 --trainer.num_nodes=" + std::to_string(n)));
  ASSERT_FALSE(std::isnan(one) || std::isnan(small) || std::isnan(ddp));
  EXPECT_NEAR(ddp, one, 1e-5 * std::abs(one));
  EXPECT_GT(std::abs(small - one), 1e-4) << "the reference must be able to tell the batch sizes apart";
  // Each rank's share of every allreduce (at least half the gradient each way) went through its
  // host's link: Open MPI used TCP between the namespaces, not shared memory.
  for (int h = 0; h < n; ++h) {
    EXPECT_GT(link_bytes(h, "tx") - before[h].first, kSteps * kGradientBytes / 2) << "host " << h << " tx";
    EXPECT_GT(link_bytes(h, "rx") - before[h].second, kSteps * kGradientBytes / 2) << "host " << h << " rx";
  }
}

TEST_F(NetnsCluster, DdpOnTwoHostsMatchesOneProcessAtTheSameGlobalBatch) {
  ASSERT_EQ(host_count(), 2);
  expect_ddp_matches_one_process(hosts);  // by address
  EXPECT_NE(last_output.find("ddp: 2 processes x batch 6 = effective batch 12"), std::string::npos) << last_output;
}

TEST_F(NetnsCluster, DdpOnThreeHostsMatchesOneProcessAtTheSameGlobalBatch) {
  ASSERT_EQ(host_count(), 3);
  expect_ddp_matches_one_process("tandem-node0,tandem-node1,tandem-node2");  // by namespace name
  EXPECT_NE(last_output.find("ddp: 3 processes x batch 4 = effective batch 12"), std::string::npos) << last_output;
}

TEST_F(NetnsCluster, Ddp2OnTwoHostsFromAHostfileMatchesOneProcessAtTheSameGlobalBatch) {
  const std::string flags = " --trainer.max_epochs=2 ";
  const double one = val_loss(fit("one", "", flags + "--data.batch_size=12 --trainer.devices=1"));
  const int64_t tx1 = link_bytes(1, "tx");
  const std::string hostfile = cluster_says("hostfile");
  const double ddp2 = val_loss(fit("ddp2", mpirun("--hostfile " + hostfile),
                                   flags + "--data.batch_size=6 --trainer.strategy=ddp2 --trainer.devices=2 "
                                   "--trainer.num_nodes=2"));
  EXPECT_NE(last_output.find("ddp2: 2 processes x batch 6 = effective batch 12; each process splits its batch over 2 "
                             "devices"), std::string::npos) << last_output;
  ASSERT_FALSE(std::isnan(one) || std::isnan(ddp2));
  EXPECT_NEAR(ddp2, one, 1e-5 * std::abs(one));
  EXPECT_GT(link_bytes(1, "tx") - tx1, kSteps * kGradientBytes / 2);
}

// Each rank reports its plan and the address of the host it runs on; the node rank must be the
// host's index (10.77.0.10 -> 0, .11 -> 1) and local ranks count within the host.
TEST_F(NetnsCluster, NodeRankAndLocalRankFollowTheHosts) {
  for (const std::string mapping : {"", "--map-by node"}) {
    SCOPED_TRACE("mapping '" + mapping + "'");
    const std::string out = (dir / "plans").string();
    fs::remove_all(out);
    fs::create_directories(out);
    const std::string rank_cmd = std::string(TANDEM_CLI_PATH) + " plan --trainer.accelerator=cpu --trainer.devices=2 "
                                 "--trainer.num_nodes=2 > " + out + "/$OMPI_COMM_WORLD_RANK.json && ip -4 -o addr show | "
                                 "grep -o '10\\.77\\.0\\.1[0-9]' > " + out + "/$OMPI_COMM_WORLD_RANK.host";
    const CommandResult r = run_command(env_prefix + TANDEM_MPIEXEC_PATH + " -np 4 -H 10.77.0.10:2,10.77.0.11:2 " +
                                        mapping + " " + mpirun_args + " sh -c '" + rank_cmd + "'");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    std::map<int, int> ranks_per_node;
    for (int rank = 0; rank < 4; ++rank) {
      std::ifstream host_in(out + "/" + std::to_string(rank) + ".host"), plan_in(out + "/" + std::to_string(rank) + ".json");
      std::string host, plan((std::istreambuf_iterator<char>(plan_in)), std::istreambuf_iterator<char>());
      host_in >> host;
      ASSERT_FALSE(host.empty()) << "rank " << rank;
      const int node = host.back() - '0';
      EXPECT_NE(plan.find("\"node_rank\":" + std::to_string(node)), std::string::npos) << "rank " << rank << ": " << plan;
      EXPECT_NE(plan.find("\"global_rank\":" + std::to_string(rank)), std::string::npos) << plan;
      EXPECT_NE(plan.find("\"local_rank\":" + std::to_string(ranks_per_node[node]++)), std::string::npos)
          << "rank " << rank << ": " << plan;
    }
  }
}

// Starts a long 2-host training, runs `fault` (a shell command) once it trains, and expects the
// whole job to end with an error naming the lost host within 20 s: well before the collective
// timeout (60 s), so Open MPI, not Tandem, is what ends it.
void NetnsCluster::expect_fault_ends_the_job(const std::string& fault) {
  const fs::path log = dir / "fault.log";
  const std::string cmd = "cd '" + dir.string() + "' && exec " + env_prefix + mpirun("-H " + hosts) + " " +
                          TANDEM_CLI_PATH + " fit " + common + " --trainer.default_root_dir=" + (dir / "fault").string() +
                          " --data.batch_size=6 --trainer.devices=1 --trainer.num_nodes=2 --trainer.max_epochs=100000"
                          " --trainer.collective_timeout=60 > '" + log.string() + "' 2>&1";
  const auto start = std::chrono::steady_clock::now();
  const pid_t job = fork();
  ASSERT_GE(job, 0);
  if (job == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const auto output = [&] {
    std::ifstream in(log);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  while (output().find("effective batch") == std::string::npos && seconds() < 15) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const bool started = output().find("effective batch") != std::string::npos;
  if (started) {
    std::this_thread::sleep_for(std::chrono::seconds(1));  // in the middle of the epochs
    EXPECT_EQ(run_command(fault).exit_code, 0) << fault;
  }
  const double fault_at = seconds();
  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(job, &status, WNOHANG)) == 0 && seconds() - fault_at < 25) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (done == 0) {
    kill(job, SIGKILL);
    waitpid(job, &status, 0);
  }
  ASSERT_TRUE(started) << "training did not start:\n" << output();
  EXPECT_EQ(done, job) << "the job was still running 25 s after the fault:\n" << output();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << output();
  EXPECT_LT(seconds() - fault_at, 20.0) << output();
  EXPECT_NE(output().find("lost communication with a remote daemon"), std::string::npos) << output();
  EXPECT_NE(output().find("on node 10.77.0.11"), std::string::npos) << "the lost host is named:\n" << output();
}

// Every process of host 1 (its Open MPI daemon and its rank) killed: mpirun sees the daemon's
// connection close.
TEST_F(NetnsCluster, AKilledHostEndsTheJobWithAClearError) {
  expect_fault_ends_the_job("ip netns pids tandem-node1 | xargs -r kill -9");
}

// Host 1's link taken down, its processes alive: no connection closes, so only TCP keepalive
// (mpirun-args sets it to a few seconds; Open MPI's default takes 8 minutes) tells mpirun the
// daemon is gone. Host 1's daemon loses mpirun the same way and ends its rank.
TEST_F(NetnsCluster, ACutOffHostEndsTheJobWithAClearError) {
  expect_fault_ends_the_job("ip link set tdm-h1 down");
  bool host_empty = false;
  for (int i = 0; i < 100 && !host_empty; ++i) {
    host_empty = run_command("ip netns pids tandem-node1").out.empty();
    if (!host_empty) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(host_empty) << "processes left on the cut-off host: " << run_command("ip netns pids tandem-node1 | "
                                                                                    "xargs -r ps -o pid=,comm= -p").out;
}

}  // namespace
