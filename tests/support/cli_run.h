// What the tests of command-line runs (`tandem fit` by hand, under mpirun, with injected
// faults) share: running a command line in a directory with the environment every such run
// gets, its combined output and wall time, and reading a value back from the printed metrics
// table.
#pragma once
#include <chrono>
#include <cmath>
#include <regex>
#include <string>

#include "tests/support/run_command.h"

struct CliRun {
  int exit_code = -1;
  std::string output;  // stdout then stderr
  std::string err;
  double seconds = 0;
  bool has(const std::string& s) const { return output.find(s) != std::string::npos; }
  int count(const std::string& s) const {
    int n = 0;
    for (size_t at = output.find(s); at != std::string::npos; at = output.find(s, at + 1)) ++n;
    return n;
  }
};

// Runs `command` (a launcher and a program with its arguments) in `cwd` with one CPU thread (OMP_NUM_THREADS=1)
// and Open MPI allowed to run as root and to oversubscribe the cores; `env` adds variables
// ("CUDA_VISIBLE_DEVICES= TANDEM_TEST_FAULT=die").
inline CliRun run_cli(const std::string& cwd, const std::string& env, const std::string& command) {
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r = run_command("cd '" + cwd + "' && env OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 "
                                      "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 " +
                                      env + " " + command);
  return {r.exit_code, r.out + r.err, r.err,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

// "| val_loss | 0.35 |" -> 0.35 from a printed metrics table (nan, inf too); NaN when absent.
inline double table_value(const std::string& output, const std::string& name) {
  const std::regex row("\\|\\s*" + name + "\\s*\\|\\s*([-+0-9.eEnaif]+)\\s*\\|");
  std::smatch m;
  if (!std::regex_search(output, m, row)) return std::nan("");
  return std::stod(m[1]);
}
