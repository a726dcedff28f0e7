// Training throughput of the strategies on CPU devices: the models/ MLP (784-1024-1024-10),
// Adam lr 1e-3, one epoch of 16384 synthetic 784-feature examples (values from a formula, 10
// classes), batch 256 per process, through the real Trainer:
//   OMP_NUM_THREADS=1 build/bin/bench_strategies single_device 1      one device
//   OMP_NUM_THREADS=1 build/bin/bench_strategies dp 2                 one process, 2 CPU devices
//   OMP_NUM_THREADS=1 mpirun -np 2 --bind-to none build/bin/bench_strategies ddp 2   2 ranks
// dp splits each batch of 256 over its devices (effective batch 256); ddp multiplies it
// (effective batch 512). Rank 0 prints one JSON line: samples/s over the epoch (a barrier at the
// start, data built before the clock).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "bench/bench_trainer.h"
#include "engine/data/data_loader.h"
#include "engine/data/data_module.h"
#include "engine/data/tensor_dataset.h"
#include "engine/trainer/trainer.h"
#include "models/mlp.h"
#include "tensor/generator.h"

using namespace tandem;

namespace {

class SyntheticImages : public data::DataModule {
 public:
  SyntheticImages(int64_t n, int64_t batch) : batch_(batch) {
    std::vector<float> x(static_cast<size_t>(n * 784));
    std::vector<int64_t> y(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      y[size_t(i)] = i % 10;
      for (int64_t j = 0; j < 784; ++j) x[size_t(i * 784 + j)] = float(std::sin(0.01 * double(i * 31 + j * (i % 10 + 1))));
    }
    train_ = std::make_shared<data::TensorDataset>(Tensor::from_vector(x, {n, 784}), Tensor::from_vector(y, {n}));
  }
  void setup(const std::string&) override {}
  std::shared_ptr<data::DataLoader> val_dataloader() override { return nullptr; }
  std::shared_ptr<data::DataLoader> test_dataloader() override { return nullptr; }
  std::shared_ptr<data::DataLoader> train_dataloader() override {
    data::DataLoaderOptions o;
    o.batch_size = batch_;
    o.shuffle = true;
    o.seed = 1;
    return std::make_shared<data::DataLoader>(train_, o);
  }

 private:
  int64_t batch_;
  std::shared_ptr<data::TensorDataset> train_;
};

}  // namespace

int main(int argc, char** argv) try {
  const std::string strategy = argc > 1 ? argv[1] : "single_device";
  const int devices = argc > 2 ? std::atoi(argv[2]) : 1;
  const int64_t batch = argc > 3 ? std::atoll(argv[3]) : 256;
  const int64_t examples = 16384;
  manual_seed(42);
  auto model = std::make_shared<models::MLP>();
  model->replica_factory = [] { return std::make_shared<models::MLP>(); };
  SyntheticImages datamodule(examples, batch);

  trainer::TrainerOptions options = bench::training_only_options("strategies");
  options.devices = devices;
  options.strategy = strategy;
  trainer::Trainer trainer(options);
  trainer.strategy().barrier("start");
  const auto start = std::chrono::steady_clock::now();
  trainer.fit(*model, datamodule);
  trainer.strategy().barrier("end");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (trainer.is_global_zero()) {
    std::printf("{\"bench\": \"strategies_mlp\", \"strategy\": \"%s\", \"processes\": %d, \"devices_per_process\": %d, "
                "\"batch_per_process\": %lld, \"examples\": %lld, \"epoch_s\": %.3f, \"samples_per_s\": %.0f}\n",
                strategy.c_str(), trainer.world_size(), trainer.strategy().devices_per_process(), (long long)batch,
                (long long)examples, seconds, double(examples) / seconds);
    std::filesystem::remove_all(options.default_root_dir);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_strategies: %s\n", e.what());
  return 1;
}
