// Issue 16's table, one row per run: a data-parallel strategy (or algorithm) trains through the
// real Trainer under mpirun with `tandem fit`'s flags, then tests; rank 0 prints one JSON line
// with the test accuracy, the bytes this job's communicator sent per rank per optimizer step
// (Strategy::step_traffic, counted by the communicator: collectives::ring_bytes_sent, mean over
// ranks), the optimizer state per rank, and samples/s over fit (data decoded before the clock,
// barriers at both ends). bench/run_comm_strategies.sh runs the grid and prints the table.
//   mpirun -np 2 --bind-to none env OMP_NUM_THREADS=1 build/bin/bench_comm_strategies \
//       --model=mlp --trainer.strategy=ddp_sharded --trainer.max_epochs=2 ...
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "apps/tandem/run_config.h"
#include "base/error.h"
#include "engine/accelerators/cuda_accelerator.h"
#include "engine/config/data_section.h"
#include "engine/trainer/trainer.h"
#include "models/registry.h"
#include "tensor/generator.h"

using namespace tandem;

namespace {

// Examples this rank trained on.
class CountSamples : public trainer::Callback {
 public:
  std::string name() const override { return "CountSamples"; }
  void on_train_batch_end(trainer::Trainer&, trainer::LightningModule&, const Tensor&, const data::Batch& batch,
                          int64_t) override {
    samples += batch.size();
  }
  int64_t samples = 0;
};

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const auto run = cli::parse_run(args, {}, [](const ConfigSchema& schema) {
    return "bench_comm_strategies: `tandem fit`'s flags, under mpirun\n" + cli::run_help("fit", schema);
  });
  if (!run) return 0;
  const YAML::Node& config = run->config;
  const YAML::Node seed = get_config_value(config, "seed_everything");
  if (!seed.IsNull()) manual_seed(seed.as<uint64_t>());
  trainer::TrainerOptions options = trainer::trainer_options_from_config(config);
  const data::FashionMNISTOptions data_options = data_options_from_config(config);
  std::shared_ptr<trainer::LightningModule> model = models::make_model(config);
  data::FashionMNISTDataModule datamodule(data_options);
  trainer::validate_trainer_options(options);
  refuse_training_when_simulating("start a Trainer");
  ExecutionPlan plan = plan_execution(trainer::hardware_options(options));
  if (plan.launch) {
    throw ConfigError("bench_comm_strategies trains in the processes it was started in; start it as: mpirun -np " +
                      std::to_string(plan.world_size) + " bench_comm_strategies ...");
  }
  const auto samples = std::make_shared<CountSamples>();
  options.callbacks.push_back(samples);
  const auto root = std::filesystem::temp_directory_path() / ("tandem_bench_comm_" + std::to_string(getppid()));
  options.default_root_dir = root.string();
  trainer::Trainer trainer(std::move(options), std::move(plan));
  datamodule.setup("fit");
  Strategy& strategy = trainer.strategy();
  strategy.barrier("start");

  const auto start = std::chrono::steady_clock::now();
  trainer.fit(*model, datamodule);
  strategy.barrier("end");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double trained = strategy.reduce(double(samples->samples), trainer::ReduceFx::Sum);
  const StepTraffic traffic = strategy.step_traffic().value_or(StepTraffic{});
  const double bytes_per_step = strategy.reduce(traffic.bytes_per_step(), trainer::ReduceFx::Mean);
  const double state_bytes = strategy.reduce(double(strategy.optimizer_state_bytes(*trainer.optimizer())),
                                             trainer::ReduceFx::Mean);
  const auto results = trainer.test(*model, datamodule, "", /*verbose=*/false);
  const double test_acc = !results.empty() && results[0].count("test_acc") ? results[0].at("test_acc") : -1.0;

  if (trainer.is_global_zero()) {
    std::string flags;
    for (const std::string& a : args) flags += (flags.empty() ? "" : " ") + a;
    std::printf("{\"bench\": \"comm_strategies\", \"flags\": \"%s\", \"strategy\": \"%s\", \"world_size\": %d, "
                "\"steps\": %lld, \"test_acc\": %.4f, \"bytes_per_step\": %.0f, \"optimizer_state_bytes\": %.0f, "
                "\"samples\": %.0f, \"fit_s\": %.3f, \"samples_per_s\": %.0f}\n",
                json_escape(flags).c_str(), strategy.name().c_str(), trainer.world_size(),
                static_cast<long long>(traffic.steps), test_acc, bytes_per_step, state_bytes, trained, seconds,
                trained / seconds);
  }
  strategy.barrier("done");
  if (trainer.is_global_zero()) std::filesystem::remove_all(root);
  return 0;
} catch (const ConfigError& e) {
  std::fprintf(stderr, "bench_comm_strategies: error: %s\n", e.what());
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_comm_strategies: %s\n", e.what());
  return 1;
}
