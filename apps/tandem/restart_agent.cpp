#include "apps/tandem/restart_agent.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <regex>
#include <tuple>

#include "base/error.h"
#include "base/join.h"
#include "engine/strategies/mpirun_launcher.h"
#include "engine/trainer/callbacks/model_checkpoint.h"
#include "engine/trainer/checkpoint.h"
#include "engine/trainer/job_failure.h"

namespace fs = std::filesystem;

namespace tandem::cli {

namespace {

// Every size from min to full - 1, a multiple of `unit` (the processes of a node under Slurm,
// else 1), that keeps the global batch (full x accumulate divisible by it).
std::vector<int> global_batch_sizes(int min, int full, int64_t accumulate, int unit) {
  std::vector<int> sizes;
  for (int w = min; w < full; ++w) {
    if (w % unit == 0 && (int64_t(full) * accumulate) % w == 0) sizes.push_back(w);
  }
  return sizes;
}

// Slurm: the nodes job `job_id` holds now (`scontrol show job`), -1 when scontrol does not say.
int slurm_nodes_held(const std::string& job_id) {
  // The id goes into a shell command: Slurm's are digits (and "_" for array tasks), nothing else.
  if (job_id.empty() || job_id.find_first_not_of("0123456789_") != std::string::npos) return -1;
  FILE* pipe = popen(("scontrol -o show job " + job_id + " 2>/dev/null").c_str(), "r");
  if (!pipe) return -1;
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  pclose(pipe);
  std::smatch m;
  return std::regex_search(out, m, std::regex(R"(\bNumNodes=(\d+))")) ? std::stoi(m[1].str()) : -1;
}

// An attempt of `world` processes as an srun step on the allocation's nodes (the header).
std::vector<std::string> srun_command(const ExecutionPlan& plan, int world, const std::vector<std::string>& argv) {
  const int per_node = plan.processes_per_node;
  std::vector<std::string> cmd{"srun", "--nodes=" + std::to_string(world / per_node), "--ntasks=" + std::to_string(world),
                               "--ntasks-per-node=" + std::to_string(per_node), "--mpi=pmix", "--kill-on-bad-exit=1"};
  const std::vector<std::string> self = job_command(plan, 1, argv);
  cmd.insert(cmd.end(), self.begin(), self.end());
  return cmd;
}

std::vector<fs::path> checkpoint_dirs(const trainer::TrainerOptions& options) {
  std::vector<fs::path> dirs;
  bool default_dir = options.enable_checkpointing;
  for (const auto& cb : options.callbacks) {
    if (auto* mc = dynamic_cast<trainer::ModelCheckpoint*>(cb.get())) {
      default_dir = mc->options().dirpath.empty();
      if (!default_dir) dirs.emplace_back(mc->options().dirpath);
    }
  }
  if (default_dir) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(fs::path(options.default_root_dir) / "lightning_logs", ec)) {
      if (entry.path().filename().string().rfind("version_", 0) == 0) dirs.push_back(entry.path() / "checkpoints");
    }
  }
  return dirs;
}

// The header comment's "newest complete checkpoint".
std::optional<std::string> newest_complete_checkpoint(const trainer::TrainerOptions& options, fs::file_time_type since) {
  std::optional<std::string> best;
  std::tuple<int64_t, int64_t, fs::file_time_type> best_key{-1, -1, {}};
  for (const fs::path& dir : checkpoint_dirs(options)) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.path().extension() != ".safetensors") continue;  // unfinished saves end in .tmp-<pid>
      const fs::file_time_type modified = fs::last_write_time(entry.path(), ec);
      if (ec || modified < since) continue;
      try {
        const trainer::Checkpoint ckpt = trainer::load_checkpoint(entry.path().string());
        const nlohmann::json& s = ckpt.trainer_state;
        if (!s.is_object() || !s.contains("global_step")) continue;  // weights only: nothing to resume
        const std::tuple<int64_t, int64_t, fs::file_time_type> key{
            s["global_step"].get<int64_t>(), s["loops"]["fit"].value("total_batch_idx", int64_t(0)), modified};
        if (key > best_key) {
          best_key = key;
          best = entry.path().string();
        }
      } catch (const std::exception& e) {
        std::printf("tandem: skipping %s for the restart: %s\n", entry.path().c_str(), e.what());
      }
    }
  }
  return best;
}

// The cause of a restartable failure, in words.
std::string describe_failure(const std::vector<trainer::JobFailure>& failures, int exit_code) {
  for (const auto& f : failures) {
    if (f.restartable) return f.error + " on rank " + std::to_string(f.rank) + ": " + f.message;
  }
  if (exit_code > 128) {
    return "a process of the job was killed by signal " + std::to_string(exit_code - 128) + " (" +
           strsignal(exit_code - 128) + ")";
  }
  return "the job exited with status " + std::to_string(exit_code);
}

struct Attempt {
  int world = 1;
  int64_t accumulate = 1;
  std::optional<std::string> resume_from;
};

// per_node: under Slurm, the processes of a node (a smaller attempt has fewer nodes); else 0.
std::vector<std::string> attempt_args(const std::vector<std::string>& fit_args, const Attempt& a, const Attempt& first,
                                      int per_node) {
  std::vector<std::string> args{"tandem", "fit"};
  args.insert(args.end(), fit_args.begin(), fit_args.end());
  // Flags given later override earlier ones (config_args.h).
  if (a.world != first.world) {
    args.push_back(per_node ? "--trainer.num_nodes=" + std::to_string(a.world / per_node)
                            : "--trainer.devices=" + std::to_string(a.world));
  }
  if (a.accumulate != first.accumulate) args.push_back("--trainer.accumulate_grad_batches=" + std::to_string(a.accumulate));
  if (a.resume_from) args.push_back("--ckpt_path=" + *a.resume_from);
  return args;
}

// A fresh directory under `parent` for the ranks' failure reports (job_failure.h).
fs::path make_failure_dir(const fs::path& parent) {
  std::error_code ec;
  fs::create_directories(parent, ec);
  std::string dir_template = (parent / ".tandem_failures_XXXXXX").string();
  if (!mkdtemp(dir_template.data())) {
    throw DataError("cannot create a directory under " + parent.string() + " for the job's failure reports: " +
                    std::strerror(errno));
  }
  return dir_template;
}

// The size of the attempt after `attempt` failed: the processes still there (one fewer on this
// machine; under Slurm, the nodes the job holds), shrunk by min_processes' rules. False, after
// saying why, when the run must end.
bool resize_after_failure(const trainer::TrainerOptions& o, const ExecutionPlan& plan, const Attempt& first,
                          const std::string& last_cause, Attempt& attempt) {
  const std::optional<SlurmJob>& slurm = plan.cluster.slurm;
  const int per_node = slurm ? plan.processes_per_node : 1;
  const bool elastic = o.min_processes && *o.min_processes < plan.world_size;
  int available = attempt.world - 1;  // the failed process's slot is lost
  if (slurm) {  // the nodes the job still holds
    const int held = slurm_nodes_held(slurm->job_id);
    available = held < 0 ? attempt.world : std::min(attempt.world, held * per_node);
    if (available < attempt.world && !elastic) {
      std::fprintf(stderr, "tandem fit: error: Slurm job %s holds %d node(s) after this failure, fewer than the %d the job "
                   "runs on; set --trainer.min_processes to restart on the nodes left; last failure: %s\n",
                   slurm->job_id.c_str(), held, attempt.world / per_node, last_cause.c_str());
      return false;
    }
  }
  if (!elastic) return true;
  const int min_world = int(*o.min_processes);
  int next = available;
  if (o.elastic_batch == "global" && available < plan.world_size) {
    next = 0;
    for (int w : global_batch_sizes(min_world, plan.world_size, first.accumulate, per_node)) {
      if (w <= available) next = w;
    }
  }
  if (next < min_world) {
    std::fprintf(stderr, "tandem fit: error: %d process(es) remain after this failure, fewer than min_processes=%d%s; "
                 "last failure: %s\n", available, min_world,
                 o.elastic_batch == "global" ? " at a size that keeps the global batch" : "", last_cause.c_str());
    return false;
  }
  if (o.elastic_batch == "global") attempt.accumulate = int64_t(plan.world_size) * first.accumulate / next;
  attempt.world = next;
  return true;
}

}  // namespace

std::optional<ClusterEnvironment> restart_agent_cluster(const trainer::TrainerOptions& o) {
  if (o.max_restarts == 0 || trainer::supervised_by_restart_agent()) return std::nullopt;
  const ClusterEnvironment found = detect_cluster_environment();
  // mpirun inside an allocation is Open MPI's launcher (name "openmpi"): not the batch script's process.
  if (!found.slurm || found.slurm->in_step || (found.name != "slurm" && found.name != "local")) return std::nullopt;
  ClusterEnvironment agent;
  agent.slurm = found.slurm;
  return agent;
}

bool needs_restart_agent(const trainer::TrainerOptions& o, const ExecutionPlan& plan) {
  if (trainer::supervised_by_restart_agent()) return false;
  if (o.min_processes && o.max_restarts == 0) {
    throw ConfigError("trainer option min_processes=" + std::to_string(*o.min_processes) +
                      " only matters when a failed job is restarted; set --trainer.max_restarts=K as well");
  }
  if (o.max_restarts == 0) return false;
  const std::string restarts = "max_restarts=" + std::to_string(o.max_restarts);
  if (plan.cluster.launched()) {
    throw ConfigError(restarts + " is carried out by the `tandem fit` process that launches the job, but this process "
                      "was started by " + plan.cluster.name + "; run `tandem fit ...` without a launcher (it starts "
                      "mpirun itself), or drop --trainer.max_restarts and let your scheduler restart the job");
  }
  const LaunchKind kind = plan.live_strategy->launch_kind();
  if (kind != LaunchKind::Relaunch && kind != LaunchKind::None) {
    throw ConfigError(restarts + " needs a job that tandem starts through mpirun (strategy ddp or ddp2) or a single "
                      "process; strategy=" + plan.strategy + " is started another way");
  }
  const std::optional<SlurmJob>& slurm = plan.cluster.slurm;
  if (plan.num_nodes > 1 && !slurm) {
    throw ConfigError(restarts + " relaunches the job on this machine, but num_nodes=" + std::to_string(plan.num_nodes) +
                      "; restarts across nodes need a Slurm allocation (run `tandem fit` in the sbatch script, without "
                      "srun) or are left to the scheduler");
  }
  if (slurm && slurm->nodes > 0 && plan.num_nodes > slurm->nodes) {
    throw ConfigError(restarts + " runs the job as srun steps on the nodes of Slurm job " + slurm->job_id + ", which holds " +
                      std::to_string(slurm->nodes) + " node(s), but num_nodes=" + std::to_string(plan.num_nodes) +
                      "; pass --trainer.num_nodes=" + std::to_string(slurm->nodes) + ", or ask Slurm for #SBATCH --nodes=" +
                      std::to_string(plan.num_nodes));
  }
  const int unit = slurm ? plan.processes_per_node : 1;
  if (o.min_processes) {
    const int full = plan.world_size;
    const std::string min = "min_processes=" + std::to_string(*o.min_processes);
    if (*o.min_processes > full) {
      throw ConfigError("trainer option " + min + " is more than the " + std::to_string(full) +
                        " processes the job starts with; expected 1 to " + std::to_string(full));
    }
    const bool devices_count = o.devices.kind() == DevicesSpec::Kind::Int ||
                               (o.devices.kind() == DevicesSpec::Kind::String && !o.devices.is_auto() &&
                                o.devices.as_string().find_first_not_of("0123456789 ") == std::string::npos);
    if (slurm && *o.min_processes % unit != 0) {
      throw ConfigError("trainer option " + min + ": under Slurm a restart runs on whole nodes of " + std::to_string(unit) +
                        " process(es), so min_processes must be a multiple of " + std::to_string(unit));
    }
    if (!slurm && !devices_count) {
      throw ConfigError("trainer option " + min + " restarts at fewer devices, which needs --trainer.devices as a "
                        "number of devices (e.g. 4), not a list or auto");
    }
    if (o.elastic_batch == "global" && *o.min_processes < full &&
        global_batch_sizes(int(*o.min_processes), full, o.accumulate_grad_batches, unit).empty()) {
      throw ConfigError("elastic_batch=global keeps " + std::to_string(full) + " processes x accumulate_grad_batches=" +
                        std::to_string(o.accumulate_grad_batches) + " batches per step, and no smaller size from " + min +
                        " divides that; raise min_processes to " + std::to_string(full) + ", raise "
                        "accumulate_grad_batches, or use elastic_batch=per_rank");
    }
  }
  return true;
}

int run_fit_with_restarts(const std::vector<std::string>& fit_args, const trainer::TrainerOptions& o,
                          const ExecutionPlan& plan, int64_t batch_size) {
  const fs::file_time_type started = fs::file_time_type::clock::now();
  const std::optional<SlurmJob>& slurm = plan.cluster.slurm;
  const int per_node = slurm ? plan.processes_per_node : 0;
  // Under Slurm the ranks run on other nodes: the reports go where they all see it.
  const fs::path failure_dir = make_failure_dir(slurm ? fs::path(o.default_root_dir) : fs::path("/tmp"));
  const Attempt first{plan.world_size, o.accumulate_grad_batches, std::nullopt};
  Attempt attempt = first;
  std::string last_cause;
  for (int64_t restart = 0;; ++restart) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(failure_dir, ec)) fs::remove(entry.path(), ec);
    const std::vector<std::string> args = attempt_args(fit_args, attempt, first, per_node);
    const std::vector<std::string> cmd = slurm ? srun_command(plan, attempt.world, args) : job_command(plan, attempt.world, args);
    std::printf("tandem: %s (restart %lld of at most %lld): %s\n", restart == 0 ? "starting the job" : "restarting the job",
                static_cast<long long>(restart), static_cast<long long>(o.max_restarts), join(cmd, " ").c_str());
    bool interrupted = false;
    const int code = run_job_and_wait(cmd, {{trainer::kRestartCountVariable, std::to_string(restart)},
                                            {trainer::kFailureDirVariable, failure_dir.string()}},
                                      &interrupted);
    const std::vector<trainer::JobFailure> failures = trainer::read_job_failures(failure_dir.string());
    if (code == 0 || interrupted) {
      fs::remove_all(failure_dir, ec);
      if (interrupted) std::fprintf(stderr, "tandem fit: interrupted; not restarting\n");
      return code == 0 ? 0 : 130;
    }
    bool restartable = failures.empty() ? code > 128 : true;
    for (const auto& f : failures) {
      if (f.restartable) continue;
      restartable = false;
      // The rank printed the error itself (once); this line says only what the agent decided.
      std::fprintf(stderr, "tandem fit: error: the job failed with %s on rank %d, which a restart would not fix; not "
                   "restarting (rank %d's error is above)\n", f.error.c_str(), f.rank, f.rank);
      break;
    }
    if (!restartable) {
      if (failures.empty()) {
        std::fprintf(stderr, "tandem fit: error: the job exited with status %d and no rank reported a lost peer or a "
                     "timeout; not restarting\n", code);
      }
      fs::remove_all(failure_dir, ec);
      return code == 2 ? 2 : 1;
    }
    last_cause = describe_failure(failures, code);
    if (restart == o.max_restarts) {
      fs::remove_all(failure_dir, ec);
      std::fprintf(stderr, "tandem fit: error: the job failed %lld time(s) and max_restarts=%lld restarts are used up; "
                   "last failure: %s\n", static_cast<long long>(restart + 1), static_cast<long long>(o.max_restarts),
                   last_cause.c_str());
      return 1;
    }
    if (!resize_after_failure(o, plan, first, last_cause, attempt)) {
      fs::remove_all(failure_dir, ec);
      return 1;
    }
    if (auto newest = newest_complete_checkpoint(o, started)) attempt.resume_from = *newest;
    const int64_t global = batch_size * attempt.world * attempt.accumulate;
    std::printf("tandem: the job failed (%s); restart %lld of %lld from %s at %d process(es), %s: batch %lld x %d "
                "process(es) x accumulate %lld = global batch %lld\n",
                last_cause.c_str(), static_cast<long long>(restart + 1), static_cast<long long>(o.max_restarts),
                attempt.resume_from ? attempt.resume_from->c_str() : "where the run started (no checkpoint yet)",
                attempt.world, o.elastic_batch == "global" ? "global batch kept" : "per-rank batch kept",
                static_cast<long long>(batch_size), attempt.world, static_cast<long long>(attempt.accumulate),
                static_cast<long long>(global));
    std::fflush(stdout);
  }
}

}  // namespace tandem::cli
