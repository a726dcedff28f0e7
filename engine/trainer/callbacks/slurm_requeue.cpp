#include "engine/trainer/callbacks/slurm_requeue.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cctype>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>

#include "base/error.h"
#include "engine/accelerators/device_parsing.h"
#include "engine/trainer/trainer.h"

extern char** environ;

namespace fs = std::filesystem;

namespace tandem::trainer {

namespace {

volatile std::sig_atomic_t requeue_signalled = 0;

void note_requeue_signal(int) { requeue_signalled = 1; }

constexpr const char* kCheckpointPrefix = "hpc_ckpt_";
constexpr const char* kCheckpointSuffix = ".safetensors";

// N of <dir>/hpc_ckpt_<N>.safetensors, -1 for any other name.
int64_t hpc_checkpoint_number(const fs::path& file) {
  const std::string name = file.filename().string();
  const std::string prefix = kCheckpointPrefix, suffix = kCheckpointSuffix;
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return -1;
  }
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  int number = 0;
  return parse_int_strict(digits, &number) && number >= 0 ? number : -1;
}

int64_t highest_hpc_checkpoint_number(const std::string& dir) {
  int64_t highest = -1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) highest = std::max(highest, hpc_checkpoint_number(entry.path()));
  return highest;
}

// Runs `scontrol requeue <job>` without a shell; its exit status, or -1 when it did not start.
int run_requeue(const std::string& scontrol, const std::string& job_id) {
  std::string verb = "requeue";
  std::vector<char*> argv{const_cast<char*>(scontrol.c_str()), verb.data(), const_cast<char*>(job_id.c_str()), nullptr};
  pid_t pid = 0;
  if (posix_spawnp(&pid, scontrol.c_str(), nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace

SlurmRequeue::SlurmRequeue(int signal, std::string job_id, std::string scontrol)
    : signal_(signal), job_id_(std::move(job_id)), scontrol_(std::move(scontrol)), previous_handler_(new struct sigaction) {
  requeue_signalled = 0;
  struct sigaction action {};
  action.sa_handler = note_requeue_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (sigaction(signal_, &action, static_cast<struct sigaction*>(previous_handler_)) != 0) {
    delete static_cast<struct sigaction*>(previous_handler_);
    throw ConfigError("cannot handle signal " + std::to_string(signal_) + " (TANDEM_REQUEUE_SIGNAL): " + std::strerror(errno));
  }
}

SlurmRequeue::~SlurmRequeue() {
  auto* previous = static_cast<struct sigaction*>(previous_handler_);
  sigaction(signal_, previous, nullptr);
  delete previous;
}

void SlurmRequeue::on_train_batch_end(Trainer& trainer, LightningModule&, const Tensor&, const data::Batch&, int64_t) {
  // Between optimizer steps only: a checkpoint holds no half-accumulated gradient.
  if (trainer.accumulating_gradients()) return;
  // Every rank takes part, signalled or not: the decision is the same everywhere.
  if (!trainer.strategy().reduce_any(requeue_signalled != 0)) return;
  requeue_signalled = 0;
  const fs::path path = fs::path(trainer.default_root_dir()) /
                        (kCheckpointPrefix + std::to_string(highest_hpc_checkpoint_number(trainer.default_root_dir()) + 1) +
                         kCheckpointSuffix);
  trainer.save_checkpoint(path.string());  // collective; returns once rank 0's file is complete
  saved_ = path.string();
  trainer.should_stop = true;
  if (!trainer.is_global_zero()) return;
  std::cout << "tandem: signal " << signal_ << " (" << strsignal(signal_) << ") from Slurm: saved " << saved_
            << " at step " << trainer.global_step() << "; requeueing job " << job_id_ << " (" << scontrol_ << " requeue "
            << job_id_ << ")" << std::endl;
  const int status = run_requeue(scontrol_, job_id_);
  if (status != 0) {
    std::cerr << "tandem: `" << scontrol_ << " requeue " << job_id_ << "` failed (status " << status
              << "); the job ends here: resubmit it with --ckpt_path=" << saved_ << " to resume"
              << " (requeueing needs sbatch --requeue or JobRequeue=1)" << std::endl;
  }
}

std::optional<int> parse_requeue_signal(const std::string& text) {
  if (text == "none") return std::nullopt;
  int number = 0;
  if (parse_int_strict(text, &number)) {
    if (number >= 1 && number <= 64) return number;
  } else {
    std::string name = text;
    for (char& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (name.rfind("SIG", 0) == 0) name = name.substr(3);
    static const std::map<std::string, int> names{{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},
                                                  {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"ALRM", SIGALRM},
                                                  {"TERM", SIGTERM}};
    if (auto it = names.find(name); it != names.end()) return it->second;
  }
  throw ConfigError("TANDEM_REQUEUE_SIGNAL=" + text + " is not a signal; expected HUP, INT, QUIT, USR1, USR2, ALRM, "
                    "TERM (SIG prefix optional), a number 1..64, or none (no requeue)");
}

std::shared_ptr<SlurmRequeue> slurm_requeue_for(const ClusterEnvironment& cluster, const EnvLookup& env) {
  if (!cluster.slurm || !cluster.slurm->in_step) return nullptr;
  const std::optional<int> signal = parse_requeue_signal(env("TANDEM_REQUEUE_SIGNAL").value_or("USR1"));
  if (!signal) return nullptr;
  return std::make_shared<SlurmRequeue>(*signal, cluster.slurm->job_id);
}

std::optional<std::string> newest_hpc_checkpoint(const std::string& dir) {
  const int64_t highest = highest_hpc_checkpoint_number(dir);
  if (highest < 0) return std::nullopt;
  return (fs::path(dir) / (kCheckpointPrefix + std::to_string(highest) + kCheckpointSuffix)).string();
}

std::optional<std::string> requeued_job_checkpoint(const ClusterEnvironment& cluster, const std::string& dir,
                                                   const EnvLookup& env) {
  if (!cluster.slurm || !cluster.slurm->in_step) return std::nullopt;
  int restarts = 0;
  const auto count = env("SLURM_RESTART_COUNT");
  if (!count || !parse_int_strict(*count, &restarts) || restarts < 1) return std::nullopt;
  return newest_hpc_checkpoint(dir);
}

}  // namespace tandem::trainer
