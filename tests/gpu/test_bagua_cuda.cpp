// bagua on CUDA devices under mpirun -np 2 (label gpu; two emulated GPUs in the emulation build,
// one per rank; skips without a device, and the Trainer's tests skip without a GPU per rank),
// over the MPI communicator (the emulation build has no
// NCCL, and these tests pass MPI explicitly so a NCCL build runs the same thing). Against the
// same computation on the CPU:
//   - the exchanges, on random data: compressed_group_average (bytegrad's and qadam's),
//     decentralized (all, shift_one) and low_precision_decentralized give the CPU's bits on CUDA
//     tensors (the arithmetic is the same: the compressor's twins are bit-identical, and the
//     adds, scalings and MPI's reductions are IEEE operations in the same order), and the
//     compressed ones send only their uint8 codes (the communicator's byte counts);
//   - the Trainer with each algorithm on the two GPUs next to the same run on the CPU
//     (each test says its tolerance and why).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "../trainer/trainer_test_util.h"
#include "collectives/communicator_factory.h"
#include "engine/optim/qadam.h"
#include "engine/strategies/bagua/algorithms.h"
#include "engine/strategies/bagua/compressed_average.h"
#include "engine/strategies/bagua/min_max_uint8.h"
#include "gpu_test_skip.h"
#include "kernels/cuda/device_query.h"
#include "mpi_test_world.h"

namespace tandem::bagua {
namespace {

using collectives::mpitest::g_world;

std::vector<float> rank_values(int rank, int64_t n, uint32_t salt = 0) {
  std::mt19937 gen(1000u + 7u * salt + unsigned(rank));
  std::normal_distribution<float> normal(0.1f * float(rank), 1.5f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = normal(gen);
  return v;
}

void expect_same_bits(const Tensor& gpu, const Tensor& cpu, const std::string& what) {
  ASSERT_TRUE(gpu.device().is_cuda()) << what << " left the GPU";
  const std::vector<float> g = gpu.to_vector<float>(), c = cpu.to_vector<float>();
  ASSERT_EQ(g.size(), c.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_EQ(std::memcmp(&g[i], &c[i], sizeof(float)), 0)
        << what << " [" << i << "]: GPU " << g[i] << ", CPU " << c[i];
  }
}

class BaguaCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    ASSERT_EQ(g_world->size(), 2) << "registered for mpirun -np 2";
    gpu = Device::cuda(g_world->local_rank() % cuda::visible_device_count());
    cuda::set_current_device(gpu.index);
    for (int r = 0; r < g_world->size(); ++r) everyone.push_back(r);
  }
  Device gpu;
  std::vector<int> everyone;
};

TEST_F(BaguaCuda, CompressedGroupAverageGivesTheCpuBitsAndSendsOnlyCodes) {
  const int w = g_world->size(), me = g_world->rank();
  for (int64_t n : {int64_t(1), int64_t(3), int64_t(1001), int64_t(5000)}) {
    for (int64_t block : {int64_t(7), int64_t(1024)}) {
      const std::string what = "n=" + std::to_string(n) + " block=" + std::to_string(block);
      Tensor cpu = Tensor::from_vector(rank_values(me, n), {n});
      Tensor on_gpu = cpu.to(gpu);
      const collectives::CommTraffic before = g_world->traffic();
      compressed_group_average(*g_world, on_gpu, everyone, block);
      const int64_t gpu_bytes = (g_world->traffic() - before).total_bytes();
      compressed_group_average(*g_world, cpu, everyone, block);
      expect_same_bits(on_gpu, cpu, what);
      // Scatter: every chunk but mine, compressed; allgather: my compressed mean to each other rank.
      int64_t codes = 0;
      for (int j = 0; j < w; ++j) {
        if (j != me) codes += compressed_bytes(collectives::chunk_count(n, w, j), block);
      }
      const int64_t mine = collectives::chunk_count(n, w, me);
      if (mine > 0) codes += (w - 1) * compressed_bytes(mine, block);
      EXPECT_EQ(gpu_bytes, codes) << what;
    }
  }
}

TEST_F(BaguaCuda, DecentralizedExchangesGiveTheCpuBits) {
  const int me = g_world->rank();
  auto weights = [&](Device device, uint32_t salt) {
    const std::vector<float> v = rank_values(me, 10, salt);
    return std::vector<Tensor>{Tensor::from_vector(std::vector<float>(v.begin(), v.begin() + 6), {2, 3}).to(device),
                               Tensor::from_vector(std::vector<float>(v.begin() + 6, v.end()), {4}).to(device)};
  };
  for (const char* mode : {"all", "shift_one"}) {
    Decentralized on_gpu({{"peer_selection_mode", mode}, {"communication_interval", "1"}});
    Decentralized on_cpu({{"peer_selection_mode", mode}, {"communication_interval", "1"}});
    std::vector<Tensor> g = weights(gpu, 1), c = weights(Device::cpu(), 1);
    on_gpu.after_optimizer_step(*g_world, g, 1);
    on_cpu.after_optimizer_step(*g_world, c, 1);
    for (size_t k = 0; k < g.size(); ++k) {
      expect_same_bits(g[k], c[k], std::string(mode) + " parameter " + std::to_string(k));
    }
  }

  LowPrecisionDecentralized ring_gpu(InitParams{{"communication_interval", "1"}});
  LowPrecisionDecentralized ring_cpu(InitParams{{"communication_interval", "1"}});
  std::vector<Tensor> g = weights(gpu, 2), c = weights(Device::cpu(), 2);
  ring_gpu.on_setup(g);
  ring_cpu.on_setup(c);
  for (int step = 1; step <= 3; ++step) {  // new random weights each step: inexact compression
    g = weights(gpu, 10 + step);
    c = weights(Device::cpu(), 10 + step);
    ring_gpu.after_optimizer_step(*g_world, g, step);
    ring_cpu.after_optimizer_step(*g_world, c, step);
  }
  for (size_t k = 0; k < g.size(); ++k) expect_same_bits(g[k], c[k], "ring parameter " + std::to_string(k));
  expect_same_bits(ring_gpu.self_copy(), ring_cpu.self_copy(), "ring self copy");
  expect_same_bits(ring_gpu.left_copy(), ring_cpu.left_copy(), "ring left copy");
  expect_same_bits(ring_gpu.right_copy(), ring_cpu.right_copy(), "ring right copy");
}

// ---- through the Trainer ----

// The Trainer puts rank r on cuda:r, so it needs a GPU per rank (on a one-GPU machine the
// exchanges above still run, both ranks sharing the device).
class BaguaCudaTrainer : public BaguaCuda {
 protected:
  void SetUp() override {
    BaguaCuda::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (cuda::visible_device_count() < g_world->size()) GTEST_SKIP() << "the Trainer needs a GPU per rank";
  }
};

using trainer::testing::flat_weights;
using trainer::testing::max_relative_difference;

enum class Optim { Adam, Sgd, QAdam };

// 4 -> 16 -> 3 without dropout (TinyClassifier), with Adam (lr 0.05), SGD (lr 0.2: a compressed
// gradient's error reaches the weights unmagnified) or QAdam (lr 0.05, warm-up 2).
class Classifier : public trainer::testing::TinyClassifier {
 public:
  explicit Classifier(Optim optim) : TinyClassifier(optim == Optim::Sgd ? 0.2 : 0.05, 0.0), optim_(optim) {}
  trainer::OptimizerConfig configure_optimizers() override {
    if (optim_ == Optim::Adam) return TinyClassifier::configure_optimizers();
    trainer::OptimizerConfig c;
    if (optim_ == Optim::Sgd) c.optimizer = std::make_shared<optim::SGD>(parameters(), optim::SGDOptions{.lr = lr});
    else c.optimizer = std::make_shared<optim::QAdam>(parameters(), optim::AdamOptions{.lr = lr}, 2);
    return c;
  }

 private:
  Optim optim_;
};

std::vector<float> fit(const std::string& accelerator, const InitParams& options, Optim optim) {
  Tensor pid = Tensor::scalar(double(getpid()), DType::Int64);
  g_world->broadcast(pid, 0);
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("tandem_bagua_cuda_" + std::to_string(int64_t(pid.item())))).string();
  trainer::testing::SyntheticDataModule dm(24, 8, 4);  // 3 steps of 4 samples per rank and epoch
  manual_seed(42);
  Classifier model(optim);
  trainer::TrainerOptions o = trainer::testing::quiet_options(dir);
  o.accelerator = accelerator;
  o.devices = g_world->size();
  o.strategy = "bagua";
  o.strategy_options = options;
  o.process_group_backend = "mpi";
  o.max_epochs = 2;
  o.num_sanity_val_steps = 0;
  trainer::Trainer trainer(o);
  trainer.fit(model, dm);
  EXPECT_EQ(model.parameters().front().device().is_cuda(), accelerator == "cuda") << "trained elsewhere";
  g_world->barrier();
  if (g_world->rank() == 0) std::filesystem::remove_all(dir);
  return flat_weights(model);
}

bool replicas_equal(const std::vector<float>& w) {
  Tensor lo = Tensor::from_vector(w, {int64_t(w.size())}).to(DType::Float64), hi = lo.clone();
  g_world->allreduce(lo, collectives::ReduceOp::Min);
  g_world->allreduce(hi, collectives::ReduceOp::Max);
  return lo.to_vector<double>() == hi.to_vector<double>();
}

struct Runs {
  std::vector<float> gpu, cpu, untouched;
};

// The same fit on the two GPUs and on the CPU, and the initial weights.
Runs fit_on_both(const InitParams& options, Optim optim) {
  Runs r{fit("cuda", options, optim), fit("cpu", options, optim), {}};
  manual_seed(42);
  r.untouched = flat_weights(Classifier(optim));
  for (float v : r.gpu) EXPECT_TRUE(std::isfinite(v));
  EXPECT_GT(max_relative_difference(r.untouched, r.gpu), 1e-3) << "training moved the weights";
  return r;
}

// Exact averaging (gradient_allreduce, decentralized, async while warming up): the exchange
// gives the same bits on both devices (above), so GPU and CPU runs differ only by the forward,
// backward and Adam kernels, which agree to a few float32 ulps per step; Adam magnifies those
// on near-zero gradients. 1e-4 relative (floor 0.1) is CudaDataParallel's bound for one GPU
// against the CPU with the same model.
TEST_F(BaguaCudaTrainer, ExactAlgorithmsTrainAsOnTheCpu) {
  for (const InitParams& options :
       {InitParams{{"algorithm", "gradient_allreduce"}},
        InitParams{{"algorithm", "gradient_allreduce"}, {"hierarchical", "true"}, {"ranks_per_node", "1"}},
        InitParams{{"algorithm", "decentralized"}},
        InitParams{{"algorithm", "decentralized"}, {"peer_selection_mode", "shift_one"}},
        InitParams{{"algorithm", "async"}, {"warmup_steps", "1000"}}}) {
    std::string what;
    for (const auto& [k, v] : options) what += k + "=" + v + " ";
    const Runs r = fit_on_both(options, Optim::Adam);
    EXPECT_LE(max_relative_difference(r.gpu, r.cpu), 1e-4) << what;
    EXPECT_TRUE(replicas_equal(r.gpu)) << what;
  }
}

// async with rounds: when a round is applied depends on each rank's clock on either device, so
// no two runs need agree; what must hold on GPUs is that rounds of CUDA weights complete and
// finish_training leaves equal replicas.
TEST_F(BaguaCudaTrainer, AsyncRoundsOnGpuWeightsEndWithEqualReplicas) {
  const std::vector<float> w =
      fit("cuda", {{"algorithm", "async"}, {"sync_interval_ms", "1"}, {"warmup_steps", "2"}}, Optim::Adam);
  EXPECT_TRUE(replicas_equal(w));
  for (float v : w) ASSERT_TRUE(std::isfinite(v));
}

// Compressed exchanges (bytegrad with SGD, low_precision_decentralized with Adam, qadam): the
// codes are a step function of their inputs, so the kernels' ulp differences matter only where a
// value lies within them of a rounding boundary. In the emulation build the GEMMs are the CPU's
// own (the cuBLASLt seam's CPU twin), the remaining kernels differ by ulps, and no code moves at
// these seeds: the runs agree as the exact algorithms do (measured 2.2e-7 bytegrad, 1.1e-7
// low_precision_decentralized, 1.1e-5 qadam; the emulator is deterministic, so this does not
// flake). On a real GPU cuBLAS sums in its own order and a code may move by one step, its
// block's range / 255: the gradients' and weight differences' ranges here are below 1 and the
// learning rate is at most 0.2, so each moved code shifts a weight by at most 0.2 / 255 ~ 8e-4;
// 2e-2 relative (2e-3 at max_relative_difference's floor of 0.1) allows a few. QAdam divides its
// momentum by the frozen sqrt(v), which can magnify one moved code without bound, so on a real
// GPU qadam is held to equal, finite, trained replicas only.
TEST_F(BaguaCudaTrainer, CompressedAlgorithmsTrainAsOnTheCpu) {
  struct Case {
    InitParams options;
    Optim optim;
  };
  for (const Case& c : {Case{{{"algorithm", "bytegrad"}}, Optim::Sgd},
                        Case{{{"algorithm", "low_precision_decentralized"}}, Optim::Adam},
                        Case{{{"algorithm", "qadam"}}, Optim::QAdam}}) {
    const std::string algorithm = c.options.at("algorithm");
    const Runs r = fit_on_both(c.options, c.optim);
    const double difference = max_relative_difference(r.gpu, r.cpu);
    if (TANDEM_CUDA_EMULATION) EXPECT_LE(difference, 1e-4) << algorithm;
    else if (algorithm != "qadam") EXPECT_LE(difference, 2e-2) << algorithm;
    // The ring's replicas differ by design (each mixes with its neighbours' copies).
    if (algorithm != "low_precision_decentralized") EXPECT_TRUE(replicas_equal(r.gpu)) << algorithm;
  }
}

}  // namespace
}  // namespace tandem::bagua
