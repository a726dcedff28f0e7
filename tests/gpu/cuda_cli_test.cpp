// `tandem fit` on the GPU as a user runs it, on a tiny generated Fashion-MNIST (label gpu; the
// GPU cases skip without a device):
//   - accelerator=cuda trains and lands where the CPU does from the same seed;
//   - precision=bf16-mixed and 16-mixed train to nearly the same validation loss;
//   - DDP over NCCL at one rank (mpirun -np 1) trains and says it ran over nccl;
//   - mixed precision on the CPU is a usage error (exit 2), GPU or not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>

#include "gpu_test_skip.h"
#include "kernels/cuda/device_query.h"
#include "tests/support/cli_run.h"
#include "tiny_idx_dataset.h"

namespace fs = std::filesystem;

namespace {

class CudaCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::path(::testing::TempDir()) / ("tandem_cuda_cli_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "data");
    write_tiny_fashion_mnist((dir / "data").string(), 240, 60);
    common = "--data.root=" + (dir / "data").string() + " --data.val_size=48 --data.batch_size=16 " +
             "--trainer.max_epochs=3 --trainer.default_root_dir=" + (dir / "runs").string() +
             " --trainer.enable_progress_bar=false --model.hidden=[64] --seed_everything=5";
  }
  void TearDown() override { fs::remove_all(dir); }
  CliRun fit(const std::string& args, const std::string& launcher = "") {
    return run_cli(dir.string(), "", launcher + " " + TANDEM_CLI_PATH + " fit " + common + " " + args);
  }
  fs::path dir;
  std::string common;
};

TEST_F(CudaCli, FitOnTheGpuLandsWhereTheCpuDoes) {
  SKIP_WITHOUT_GPU();
  const CliRun cpu = fit("--trainer.accelerator=cpu");
  const CliRun gpu = fit("--trainer.accelerator=cuda --trainer.devices=1");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  const double a = table_value(cpu.output, "val_loss"), b = table_value(gpu.output, "val_loss");
  ASSERT_TRUE(std::isfinite(a) && std::isfinite(b)) << cpu.output << gpu.output;
  EXPECT_NEAR(a, b, 1e-3 * (1 + std::abs(a)));
}

TEST_F(CudaCli, MixedPrecisionTrainsToNearlyTheSameLoss) {
  SKIP_WITHOUT_GPU();
  const CliRun full = fit("--trainer.accelerator=cuda");
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const double reference = table_value(full.output, "val_loss");
  for (const char* precision : {"bf16-mixed", "16-mixed"}) {
    // The progress bar on: its first line names the precision the run trained at.
    const CliRun run =
        fit(std::string("--trainer.enable_progress_bar=true --trainer.accelerator=cuda --trainer.precision=") + precision);
    ASSERT_EQ(run.exit_code, 0) << precision << "\n" << run.output;
    EXPECT_NE(run.output.find(std::string("precision=") + precision), std::string::npos) << run.output;
    EXPECT_NEAR(table_value(run.output, "val_loss"), reference, 0.05) << precision;
  }
}

// DDP on up to two GPUs under mpirun: over NCCL where the build has it, else over the MPI
// communicator (the emulation build, which never fakes NCCL). The strategy's summary line,
// printed from two ranks up, names the communicator.
TEST_F(CudaCli, DdpTrainsOnTheVisibleGpus) {
  SKIP_WITHOUT_GPU();
  const int ranks = std::min(2, tandem::cuda::visible_device_count());
  const CliRun run = fit("--trainer.accelerator=cuda --trainer.devices=" + std::to_string(ranks) +
                             " --trainer.strategy=ddp",
                         std::string(TANDEM_MPIEXEC_PATH) + " -np " + std::to_string(ranks));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  if (ranks == 2) {
    const std::string over = std::string("2 ranks over ") + (TANDEM_WITH_NCCL ? "nccl" : "mpi");
    EXPECT_NE(run.output.find(over), std::string::npos) << run.output;
  }
  EXPECT_TRUE(std::isfinite(table_value(run.output, "val_loss"))) << run.output;
}

// plan says 16-mixed means bf16-mixed on the CPU, and fit trains it (autocast.h's CPU rounding).
TEST_F(CudaCli, SixteenMixedOnTheCpuTrainsAsBf16Mixed) {
  const CliRun run = fit("--trainer.accelerator=cpu --trainer.precision=16");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("using bf16-mixed instead"), std::string::npos) << run.output;
  EXPECT_TRUE(std::isfinite(table_value(run.output, "val_loss"))) << run.output;
}

}  // namespace
