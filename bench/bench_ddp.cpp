// DDP training throughput on CPU ranks: the models/ MLP (784-1024-1024-10; mlp_deep: eight
// hidden layers of 512, 8 weight matrices of 1-1.6 MB for the bucket cap to split) or CNN on
// Fashion-MNIST, Adam lr 1e-3, per-rank batch 128 (global 256 at 2 ranks), one epoch, through
// the real Trainer with strategy=ddp over the MPI communicator. The twin is
// bench/peers/ddp_torch.py (PyTorch DDP with gloo, same model, sharding and batch);
// bench/run_ddp.sh runs both in one run and prints the ratio.
//   mpirun -np 2 --bind-to none env OMP_NUM_THREADS=1 build/bin/bench_ddp [mlp|mlp_deep|cnn] [batch] [root] [bucket_mib] [batches]
// Rank 0 prints one JSON line: samples/s over the epoch (data decoded before the clock, a barrier
// at the start), the mean step time, the exposed communication per step from the Reducer, the
// gradient buckets, and peak RSS (max over ranks). bucket_mib caps every bucket (the first one at
// min(1, bucket_mib) MiB); without it the Reducer's defaults (1 MiB, then 25 MiB) hold. batches
// limits the epoch to that many steps (samples/s then counts the samples of those steps).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "bench/bench_trainer.h"
#include "engine/data/fashion_mnist.h"
#include "engine/strategies/ddp_strategy.h"
#include "engine/trainer/trainer.h"
#include "models/cnn.h"
#include "models/mlp.h"
#include "tensor/generator.h"

using namespace tandem;

int main(int argc, char** argv) try {
  const std::string kind = argc > 1 ? argv[1] : "mlp";
  data::FashionMNISTOptions data_options;
  data_options.batch_size = argc > 2 ? std::atoll(argv[2]) : 128;
  if (argc > 3) data_options.root = argv[3];
  std::string strategy = "ddp";
  if (argc > 4) {
    const double mib = std::atof(argv[4]);
    if (!(mib > 0)) {
      std::fprintf(stderr, "bench_ddp: bucket_mib must be a positive number of MiB (e.g. 1, 4, 25), not '%s'\n", argv[4]);
      return 2;
    }
    ReducerOptions reducer;
    reducer.bucket_cap_bytes = static_cast<int64_t>(mib * (1 << 20));
    reducer.first_bucket_cap_bytes = std::min<int64_t>(reducer.first_bucket_cap_bytes, reducer.bucket_cap_bytes);
    strategy = "ddp_bucket_cap";
    strategy_registry().add(strategy, "ddp with the bucket cap given to bench_ddp",
                            [reducer](const InitParams&) { return std::make_unique<DDPStrategy>(reducer); });
  }
  // One CPU device per process on each node; as many nodes as mpirun spread the ranks over.
  const char* world = std::getenv("OMPI_COMM_WORLD_SIZE");
  const char* per_node = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int processes = world ? std::atoi(world) : 1;
  const int devices = per_node ? std::atoi(per_node) : processes;

  manual_seed(42);
  std::shared_ptr<models::ImageClassifier> model;
  if (kind == "cnn") model = std::make_shared<models::CNN>();
  else if (kind == "mlp_deep") model = std::make_shared<models::MLP>(models::MLPOptions{.hidden = std::vector<int64_t>(8, 512)});
  else model = std::make_shared<models::MLP>();
  data::FashionMNISTDataModule datamodule(data_options);
  datamodule.setup("fit");

  trainer::TrainerOptions options = bench::training_only_options("ddp");
  options.devices = devices;
  options.num_nodes = devices > 0 && processes % devices == 0 ? processes / devices : 1;
  options.strategy = strategy;
  const int64_t batches = argc > 5 ? std::atoll(argv[5]) : 0;
  if (argc > 5 && batches <= 0) {
    std::fprintf(stderr, "bench_ddp: batches must be a positive number of steps, not '%s'\n", argv[5]);
    return 2;
  }
  if (batches > 0) options.limit_train_batches = batches;
  options.limit_val_batches = 0;
  trainer::Trainer trainer(options);
  trainer.strategy().barrier("start");

  const auto start = std::chrono::steady_clock::now();
  trainer.fit(*model, datamodule);
  trainer.strategy().barrier("end");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int64_t samples = datamodule.train_dataset()->size();
  if (batches > 0) samples = std::min(samples, batches * data_options.batch_size * trainer.world_size());

  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);  // ru_maxrss: KiB on Linux
  const double rss_mb = trainer.strategy().reduce(double(usage.ru_maxrss) / 1024.0, trainer::ReduceFx::Max);
  double exposed_ms = 0;
  int64_t steps = 0;
  size_t buckets = 0;
  if (auto* ddp = dynamic_cast<DDPStrategy*>(&trainer.strategy()); ddp && ddp->reducer()) {
    exposed_ms = ddp->reducer()->stats().mean_exposed_ms();
    steps = ddp->reducer()->stats().reductions;
    buckets = ddp->reducer()->buckets().size();
  }
  exposed_ms = trainer.strategy().reduce(exposed_ms, trainer::ReduceFx::Mean);
  if (trainer.is_global_zero()) {
    std::printf("{\"bench\": \"ddp_%s\", \"impl\": \"tandem\", \"ranks\": %d, \"batch_per_rank\": %lld, "
                "\"train_samples\": %lld, \"epoch_s\": %.3f, \"samples_per_s\": %.0f, \"step_ms\": %.2f, "
                "\"buckets\": %zu, \"exposed_comm_ms_per_step\": %.3f, \"peak_rss_mb_per_rank\": %.1f}\n",
                kind.c_str(), trainer.world_size(), (long long)data_options.batch_size, (long long)samples, seconds,
                double(samples) / seconds, steps > 0 ? 1000.0 * seconds / double(steps) : 0.0, buckets, exposed_ms,
                rss_mb);
    std::filesystem::remove_all(options.default_root_dir);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_ddp: %s\n", e.what());
  return 1;
}
