#include "engine/strategies/mpirun_launcher.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "engine/core/error.h"

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

}  // namespace

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
  setenv("TANDEM_LAUNCHED_BY_TANDEM", "1", 1);
  setenv("TANDEM_STDOUT_IS_TTY", isatty(STDOUT_FILENO) ? "1" : "0", 0);  // the ranks' stdout is mpirun's pty
  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
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
