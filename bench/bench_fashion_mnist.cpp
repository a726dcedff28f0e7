// Issue 3's throughput and accuracy goals: Fashion-MNIST training with the models/ MLP or CNN,
// Adam lr 1e-3, batch 256, through the real Trainer and data module (what `tandem fit` runs).
// The data is decoded before the clock starts (as the twin does), validation is off, and the
// clock covers trainer.fit: batch gathers (prefetch thread), forward, backward, Adam, logging.
// With epochs > 1 it then reports the test accuracy. The twin is
// bench/peers/fashion_mnist_torch.py; bench/run_fashion_mnist.sh runs both and prints ratios.
//   OMP_NUM_THREADS=2 build/bin/bench_fashion_mnist [mlp|cnn] [epochs] [root]
// prints one JSON line.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "bench/bench_trainer.h"
#include "engine/data/fashion_mnist.h"
#include "engine/trainer/trainer.h"
#include "models/cnn.h"
#include "models/mlp.h"
#include "tensor/generator.h"

using namespace tandem;

int main(int argc, char** argv) try {
  const std::string kind = argc > 1 ? argv[1] : "mlp";
  const int64_t epochs = argc > 2 ? std::atoll(argv[2]) : 1;
  data::FashionMNISTOptions data_options;
  if (argc > 3) data_options.root = argv[3];
  data_options.batch_size = 256;
  const char* threads = std::getenv("OMP_NUM_THREADS");

  manual_seed(42);
  std::shared_ptr<models::ImageClassifier> model;
  if (kind == "cnn") model = std::make_shared<models::CNN>();
  else model = std::make_shared<models::MLP>();
  data::FashionMNISTDataModule datamodule(data_options);
  datamodule.setup("fit");  // decoded before the clock starts; fit's own setup is then a no-op

  trainer::TrainerOptions options = bench::training_only_options("fashion_mnist");
  options.devices = 1;
  options.max_epochs = epochs;
  options.limit_val_batches = 0;
  trainer::Trainer trainer(options);

  const auto start = std::chrono::steady_clock::now();
  trainer.fit(*model, datamodule);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t samples = datamodule.train_dataset()->size();

  std::string accuracy;
  if (epochs > 1) {
    const auto results = trainer.test(*model, datamodule, "", /*verbose=*/false);
    if (!results.empty() && results[0].count("test_acc")) {
      accuracy = ", \"test_acc\": " + std::to_string(results[0].at("test_acc"));
    }
  }
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);  // ru_maxrss: KiB on Linux
  std::printf("{\"bench\": \"fashion_mnist_%s\", \"impl\": \"tandem\", \"threads\": %s, \"batch\": 256, "
              "\"epochs\": %lld, \"train_samples\": %lld, \"epoch_s\": %.3f, \"samples_per_s\": %.0f, "
              "\"peak_rss_mb\": %.1f%s}\n",
              kind.c_str(), threads ? threads : "null", (long long)epochs, (long long)samples, seconds / double(epochs),
              double(samples * epochs) / seconds, double(usage.ru_maxrss) / 1024.0, accuracy.c_str());
  std::filesystem::remove_all(options.default_root_dir);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_fashion_mnist: %s\n", e.what());
  return 1;
}
