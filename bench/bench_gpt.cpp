// GPT benchmarks, the Tandem side (bench/run_gpt.sh runs them beside bench/peers/gpt_torch.py).
//
//   bench_gpt train TEXT STEPS      nanoGPT's CPU recipe on a text's bytes: gpt-nano, batch 12,
//                                   dropout 0, AdamW lr 1e-3 betas (0.9, 0.99) weight decay 0.1 (2-D
//                                   parameters only), clip 1.0, 100 warm-up steps then cosine to 1e-4
//                                   over STEPS; prints JSON: ms/step, val loss (mean over 200 batches
//                                   of fixed validation windows), a 300-byte sample
//   bench_gpt step PRESET B T STEPS ms per AdamW training step (median after one warm-up step) on
//                                   random tokens, and the process' peak RSS
//   mpirun -np N bench_gpt ddp TEXT STEPS
//                                   the recipe's model and optimizer (constant lr 1e-3) under the
//                                   Trainer's ddp over MPI, batch 12 per rank, STEPS steps; rank 0
//                                   prints JSON: ms per step after 5 warm-up steps, peak RSS (max
//                                   over ranks). The twin: gpt_torch.py ddp (PyTorch DDP, gloo)
//   bench_gpt fit PRESET B STEPS ACCELERATOR PRECISION TEXT
//                                   the preset at its block_size T with AdamW lr 1e-4 under the
//                                   Trainer on one device of ACCELERATOR at PRECISION, batches of B
//                                   windows of TEXT's bytes; prints JSON: ms per step after 5 warm-up
//                                   steps, tokens (B * T) per second. The twin: gpt_torch.py cuda
// Threads: OMP_NUM_THREADS.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/bench_trainer.h"
#include "engine/config/optimizer_section.h"
#include "engine/data/text_data.h"
#include "engine/optim/clip_grad.h"
#include "engine/trainer/callback.h"
#include "engine/trainer/trainer.h"
#include "kernels/cpu/host_allocator.h"
#include "models/gpt.h"
#include "models/registry.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/generator.h"
#include "tensor/ops/ops.h"

using namespace tandem;
using Clock = std::chrono::steady_clock;

namespace {

double lr_at(int64_t step, int64_t total, int64_t warmup = 100, double lr = 1e-3, double min_lr = 1e-4) {
  if (step < warmup) return lr * double(step + 1) / double(warmup);
  if (step >= total) return min_lr;
  const double ratio = double(step - warmup) / double(total - warmup);
  return min_lr + 0.5 * (1.0 + std::cos(M_PI * ratio)) * (lr - min_lr);
}

models::OptimizationConfig adamw(double weight_decay, std::pair<double, double> betas) {
  YAML::Node config;
  config["optimizer"]["name"] = "AdamW";
  config["optimizer"]["lr"] = 1e-3;
  config["optimizer"]["weight_decay"] = weight_decay;
  config["optimizer"]["betas"].push_back(betas.first);
  config["optimizer"]["betas"].push_back(betas.second);
  resolve_optimizer_sections(config);
  return {config["optimizer"], YAML::Node()};
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;
}

// nanoGPT's CPU recipe: gpt-nano (seeded) with AdamW, weight decay 0.1, betas (0.9, 0.99), trained
// on batches of 12 windows of the text.
models::GPT recipe_model() {
  manual_seed(1337);
  return models::GPT(models::GPTOptions{}, adamw(0.1, {0.9, 0.99}));
}

data::TextDataOptions recipe_data(const models::GPT& model, const std::string& text, int64_t train_batches,
                                  int64_t val_batches) {
  data::TextDataOptions d;
  d.path = text;
  d.block_size = model.options.block_size;
  d.batch_size = 12;
  d.samples_per_epoch = 12 * train_batches;
  d.val_samples = 12 * val_batches;
  return d;
}

int train(const std::string& text, int64_t steps) {
  models::GPT model = recipe_model();
  data::TextDataModule dm(recipe_data(model, text, steps, 200));
  auto loader = dm.train_dataloader();
  trainer::OptimizerConfig config = model.configure_optimizers();
  loader->start_epoch(0);
  const auto start = Clock::now();
  for (int64_t step = 0; step < steps; ++step) {
    for (auto& group : config.optimizer->param_groups()) group.set_lr(lr_at(step, steps));
    const auto batch = loader->next();
    Tensor loss = model.training_step(*batch, step);
    config.optimizer->zero_grad();
    loss.backward();
    optim::clip_grad_norm_(model.parameters(), 1.0);
    config.optimizer->step();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  model.eval();
  double val = 0;
  int64_t batches = 0;
  {
    NoGradGuard no_grad;
    auto val_loader = dm.val_dataloader();
    val_loader->start_epoch(0);
    while (auto batch = val_loader->next()) {
      const Tensor logits = model.forward(batch->input);
      const int64_t rows = logits.size(0) * logits.size(1);
      val += cross_entropy(logits.reshape({rows, 256}), batch->target.reshape({rows})).item();
      ++batches;
    }
  }
  std::string sample;
  for (int64_t t : model.generate({'\n'}, {.max_new_tokens = 300, .temperature = 0.8, .top_k = 200, .seed = 1337})) sample += char(t);
  std::cout << nlohmann::json{{"ms_per_step", 1000 * seconds / double(steps)}, {"val_loss", val / double(batches)},
                              {"sample", sample}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
            << std::endl;
  return 0;
}

// The preset's model, built from its config section with AdamW at lr 1e-4.
std::shared_ptr<trainer::LightningModule> preset_model(const std::string& preset, int64_t* block_size, int64_t* vocab) {
  YAML::Node config;
  config["model"]["name"] = preset;
  models::resolve_model_section(config);
  config["optimizer"]["name"] = "AdamW";
  config["optimizer"]["lr"] = 1e-4;
  resolve_optimizer_sections(config);
  *block_size = config["model"]["block_size"].as<int64_t>();
  *vocab = config["model"]["vocab_size"].as<int64_t>();
  return models::make_model(config);
}

int step_time(const std::string& preset, int64_t B, int64_t T, int64_t steps) {
  manual_seed(0);
  int64_t block_size = 0, vocab = 0;
  auto model = preset_model(preset, &block_size, &vocab);
  trainer::OptimizerConfig opt = model->configure_optimizers();
  std::vector<int64_t> x(size_t(B * T)), y(size_t(B * T));
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = int64_t((i * 2654435761u) % uint64_t(vocab));
    y[i] = int64_t((i * 40503u + 7) % uint64_t(vocab));
  }
  const data::Batch batch{Tensor::from_vector(x, {B, T}), Tensor::from_vector(y, {B, T})};
  std::vector<double> times;
  for (int64_t i = 0; i <= steps; ++i) {
    const auto t0 = Clock::now();
    Tensor loss = model->training_step(batch, i);
    opt.optimizer->zero_grad();
    loss.backward();
    opt.optimizer->step();
    if (i > 0) times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  // The tensors' own peak (live storage, not the allocator's cached blocks) beside the process's.
  const double peak_tensor_mb = double(cpu::host_allocator_stats().peak_allocated_bytes) / (1024.0 * 1024.0);
  std::cout << nlohmann::json{{"ms_per_step_median", times[times.size() / 2]}, {"peak_rss_mb", peak_rss_mb()},
                              {"peak_tensor_mb", peak_tensor_mb}}.dump()
            << std::endl;
  return 0;
}

// The clock at the end of each training batch.
class StepClock : public trainer::Callback {
 public:
  std::string name() const override { return "StepClock"; }
  void on_train_batch_end(trainer::Trainer&, trainer::LightningModule&, const Tensor&, const data::Batch&, int64_t) override {
    ends.push_back(Clock::now());
  }
  std::vector<Clock::time_point> ends;
};

int ddp(const std::string& text, int64_t steps) {
  constexpr int64_t kWarmUp = 5;
  if (steps <= kWarmUp) {
    std::cerr << "bench_gpt ddp: STEPS must be above the " << kWarmUp << " warm-up steps\n";
    return 2;
  }
  const char* world = std::getenv("OMPI_COMM_WORLD_SIZE");
  const int ranks = world ? std::atoi(world) : 1;
  models::GPT model = recipe_model();
  data::TextDataModule dm(recipe_data(model, text, ranks * steps, 0));
  trainer::TrainerOptions o = bench::training_only_options("gpt_ddp");
  o.devices = ranks;
  o.strategy = "ddp";
  o.max_steps = steps;
  o.gradient_clip_val = 1.0;
  o.limit_val_batches = 0;
  auto clock = std::make_shared<StepClock>();
  o.callbacks.push_back(clock);
  trainer::Trainer trainer(o);
  trainer.fit(model, dm);
  if (int64_t(clock->ends.size()) != steps) {
    std::cerr << "bench_gpt ddp: " << clock->ends.size() << " steps ran, " << steps << " expected\n";
    return 1;
  }
  const double ms = std::chrono::duration<double, std::milli>(clock->ends.back() - clock->ends[kWarmUp - 1]).count() /
                    double(steps - kWarmUp);
  const double rss = trainer.strategy().reduce(peak_rss_mb(), trainer::ReduceFx::Max);
  if (trainer.is_global_zero()) {
    std::cout << nlohmann::json{{"ranks", trainer.world_size()}, {"ms_per_step", ms}, {"peak_rss_mb_per_rank", rss}}.dump()
              << std::endl;
    std::filesystem::remove_all(o.default_root_dir);
  }
  return 0;
}

int fit_timed(const std::string& preset, int64_t B, int64_t steps, const std::string& accelerator,
              const std::string& precision, const std::string& text) {
  constexpr int64_t kWarmUp = 5;
  if (steps <= kWarmUp) {
    std::cerr << "bench_gpt fit: STEPS must be above the " << kWarmUp << " warm-up steps\n";
    return 2;
  }
  manual_seed(0);
  int64_t T = 0, vocab = 0;
  auto model = preset_model(preset, &T, &vocab);
  data::TextDataOptions d;
  d.path = text;
  d.block_size = T;
  d.vocab_size = vocab;
  d.batch_size = B;
  d.samples_per_epoch = B * steps;
  d.val_samples = 0;
  data::TextDataModule dm(d);
  trainer::TrainerOptions o = bench::training_only_options("gpt_fit");
  o.accelerator = accelerator;
  o.devices = 1;
  o.precision = precision;
  o.max_steps = steps;
  o.limit_val_batches = 0;
  auto clock = std::make_shared<StepClock>();
  o.callbacks.push_back(clock);
  trainer::Trainer trainer(o);
  trainer.fit(*model, dm);
  std::filesystem::remove_all(o.default_root_dir);
  if (int64_t(clock->ends.size()) != steps) {
    std::cerr << "bench_gpt fit: " << clock->ends.size() << " steps ran, " << steps << " expected\n";
    return 1;
  }
  const double ms = std::chrono::duration<double, std::milli>(clock->ends.back() - clock->ends[kWarmUp - 1]).count() /
                    double(steps - kWarmUp);
  std::cout << nlohmann::json{{"preset", preset}, {"B", B}, {"T", T}, {"precision", precision}, {"ms_per_step", ms},
                              {"tokens_per_s", 1000.0 * double(B * T) / ms}}.dump()
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "train" && argc == 4) return train(argv[2], std::stoll(argv[3]));
  if (mode == "ddp" && argc == 4) return ddp(argv[2], std::stoll(argv[3]));
  if (mode == "fit" && argc == 8)
    return fit_timed(argv[2], std::stoll(argv[3]), std::stoll(argv[4]), argv[5], argv[6], argv[7]);
  if (mode == "step" && argc == 6) return step_time(argv[2], std::stoll(argv[3]), std::stoll(argv[4]), std::stoll(argv[5]));
  std::cerr << "usage: bench_gpt train TEXT STEPS | bench_gpt step PRESET B T STEPS | mpirun -np N bench_gpt ddp TEXT STEPS"
               " | bench_gpt fit PRESET B STEPS ACCELERATOR PRECISION TEXT\n";
  return 2;
}
