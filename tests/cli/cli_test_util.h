// What the tests of the `tandem` binary share: running it (TANDEM_CLI_PATH) in a directory,
// fresh temporary directories, and TinyRun, a tiny generated dataset with the flags every
// training run of the tests uses.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/run_command.h"
#include "tiny_idx_dataset.h"

#ifndef TANDEM_CLI_PATH
#error "TANDEM_CLI_PATH must name the built tandem binary"
#endif

namespace fs = std::filesystem;

namespace {

using RunResult = CommandResult;

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fresh directory per test process (ctest runs cases concurrently).
fs::path temp_dir(const std::string& name) {
  fs::path dir = fs::path(testing::TempDir()) / ("tandem_cli_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Runs `tandem args` in `cwd`. One thread, no GPU: the runs are tiny, and the test must not
// depend on the machine.
RunResult run_tandem(const std::string& args, const fs::path& cwd = fs::temp_directory_path()) {
  return run_command("cd '" + cwd.string() + "' && env OMP_NUM_THREADS=1 CUDA_VISIBLE_DEVICES= " +
                     std::string(TANDEM_CLI_PATH) + " " + args);
}

fs::path find_first(const fs::path& root, const std::string& extension) {
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.path().extension() == extension) return entry.path();
  }
  return {};
}

// The tiny dataset (60 training and n_test test images) and the flags every run shares.
struct TinyRun {
  explicit TinyRun(const std::string& name, int n_test = 20) : dir(temp_dir(name)) {
    fs::create_directories(dir / "data");
    write_tiny_fashion_mnist((dir / "data").string(), 60, n_test);
    common = "--data.root=" + (dir / "data").string() + " --data.val_size=12 --data.batch_size=8" +
             " --trainer.default_root_dir=" + (dir / "runs").string() +
             " --trainer.accelerator=cpu --trainer.enable_progress_bar=false --model.hidden=[32]";
  }
  ~TinyRun() { fs::remove_all(dir); }
  fs::path version(int n) const { return dir / "runs" / "lightning_logs" / ("version_" + std::to_string(n)); }
  fs::path dir;
  std::string common;
};

}  // namespace

