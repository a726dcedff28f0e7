#include "engine/strategies/mpirun_launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "base/error.h"

namespace tandem {

namespace {

// The configured mpirun (CMake's MPIEXEC_EXECUTABLE) when it exists, else "mpirun" on PATH.
std::string mpirun_program() {
#ifdef TANDEM_MPIEXEC
  std::error_code ec;
  if (std::filesystem::exists(TANDEM_MPIEXEC, ec)) return TANDEM_MPIEXEC;
#endif
  return "mpirun";
}

// argv[0] as a path mpirun can start on every rank: this executable's real path.
std::string self_path(const std::string& argv0) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? argv0 : exe.string();
}

// What every relaunched process sees (header comment).
void set_relaunch_environment() {
  setenv("TANDEM_LAUNCHED_BY_TANDEM", "1", 1);
  setenv("TANDEM_STDOUT_IS_TTY", isatty(STDOUT_FILENO) ? "1" : "0", 0);  // the ranks' stdout is mpirun's pty
  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
}

volatile sig_atomic_t g_child_pid = 0;
volatile sig_atomic_t g_interrupted = 0;

void pass_signal_to_child(int sig) {
  g_interrupted = 1;
  if (g_child_pid > 0) kill(static_cast<pid_t>(g_child_pid), sig);
}

}  // namespace

std::vector<std::string> job_command(const ExecutionPlan& plan, int world_size, const std::vector<std::string>& argv) {
  if (world_size > 1) {
    ExecutionPlan sized = plan;
    sized.world_size = world_size;
    return mpirun_command(sized, argv);
  }
  std::vector<std::string> cmd{argv.empty() ? std::string("tandem") : self_path(argv[0])};
  cmd.insert(cmd.end(), argv.begin() + (argv.empty() ? 0 : 1), argv.end());
  return cmd;
}

int run_job_and_wait(const std::vector<std::string>& cmd, const std::vector<std::pair<std::string, std::string>>& extra_env,
                     bool* interrupted) {
  set_relaunch_environment();
  for (const auto& [name, value] : extra_env) setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> c_argv;
  for (const auto& a : cmd) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  struct sigaction pass {}, old_int {}, old_term {};
  pass.sa_handler = pass_signal_to_child;
  sigemptyset(&pass.sa_mask);
  g_interrupted = 0;
  sigaction(SIGINT, &pass, &old_int);
  sigaction(SIGTERM, &pass, &old_term);
  const pid_t pid = fork();
  if (pid == 0) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    execvp(c_argv[0], c_argv.data());
    std::fprintf(stderr, "tandem: error: cannot run %s: %s\n", c_argv[0], std::strerror(errno));
    _exit(127);
  }
  if (pid < 0) {
    const int err = errno;
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    throw CommError("cannot start " + cmd[0] + ": fork failed: " + std::strerror(err));
  }
  g_child_pid = pid;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child_pid = 0;
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  for (const auto& [name, value] : extra_env) unsetenv(name.c_str());
  if (interrupted) *interrupted = g_interrupted != 0;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

std::vector<std::string> mpirun_command(const ExecutionPlan& plan, const std::vector<std::string>& argv) {
  std::vector<std::string> cmd{mpirun_program(), "-np", std::to_string(plan.world_size)};
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores == 0 || unsigned(plan.world_size) > cores) cmd.push_back("--oversubscribe");
  cmd.push_back(argv.empty() ? std::string("tandem") : self_path(argv[0]));
  for (size_t i = 1; i < argv.size(); ++i) cmd.push_back(argv[i]);
  return cmd;
}

void relaunch_with_mpirun(const ExecutionPlan& plan, const std::vector<std::string>& argv) {
  if (plan.num_nodes > 1) {
    throw ConfigError("num_nodes=" + std::to_string(plan.num_nodes) + " needs a launcher that knows the hosts; start " +
                      "the job with " + (plan.launch ? *plan.launch : std::string("mpirun -H <hosts> ...")) +
                      " (or srun under SLURM) instead of running it directly");
  }
  if (const char* again = std::getenv("TANDEM_LAUNCHED_BY_TANDEM"); again && std::string(again) == "1") {
    throw ConfigError("this process was started by Tandem's mpirun relaunch, but no launcher variables "
                      "(OMPI_COMM_WORLD_*, PMIX_RANK, SLURM_PROCID, RANK) are set; check that `mpirun` is Open MPI's, "
                      "or launch the job yourself: " + (plan.launch ? *plan.launch : std::string("mpirun -np N ...")));
  }
  const std::vector<std::string> cmd = mpirun_command(plan, argv);
  std::string shown;
  for (const auto& a : cmd) shown += (shown.empty() ? "" : " ") + a;
  std::printf("Tandem: strategy=%s needs %d processes; relaunching as: %s\n", plan.strategy.c_str(), plan.world_size,
              shown.c_str());
  std::fflush(stdout);
  set_relaunch_environment();
  std::vector<char*> c_argv;
  for (const auto& a : cmd) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  execvp(c_argv[0], c_argv.data());
  const int err = errno;
  throw CommError("cannot run " + cmd[0] + " to start the " + std::to_string(plan.world_size) + " processes: " +
                  std::strerror(err) + "; install Open MPI (apt-get install openmpi-bin) or launch the job yourself: " +
                  shown);
}

}  // namespace tandem
