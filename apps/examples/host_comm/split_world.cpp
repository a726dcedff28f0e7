// An HPC host program that owns MPI and trains with Tandem on its own communicator and arrays.
//
// It initializes MPI, splits MPI_COMM_WORLD in two halves, and each half trains its own MLP
// with the Trainer (strategy=ddp) on the half's communicator, over arrays the host generated
// itself (each half its own problem; each rank its own part of its half's data, viewed in place
// by HostArrayDataModule). Then it checks what embedding promises:
//   - each half averaged only within itself: the ranks of a half end with identical weights,
//     and the two halves' weights differ;
//   - a half equals one process at the half's global batch (batch k of the reference is batch
//     k of every rank of the half, concatenated), within float32 rounding;
//   - Tandem left MPI to the host: not finalized, the half communicators still usable.
// Exit 0 when every check holds on every rank, 1 otherwise, 2 for bad input (a typed
// ConfigError). Run: mpirun -np 4 build/bin/host_comm_split_world
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <stdlib.h>  // mkdtemp

#include "base/error.h"
#include "collectives/mpi/host_comm.h"
#include "engine/data/host_array_data_module.h"
#include "engine/trainer/trainer.h"
#include "models/mlp.h"
#include "tensor/generator.h"
#include "tensor/ops/ops.h"

using namespace tandem;

namespace {

constexpr int64_t kFeatures = 8, kClasses = 3, kPerRank = 40, kBatch = 5, kValSize = 8;
constexpr int kEpochs = 3;

// The host's data for rank `r` of half `half`: examples drawn per half, labels from a
// half-specific linear rule, so the two halves learn different functions.
struct HostData {
  std::vector<float> x;
  std::vector<int64_t> y;
};

HostData make_rank_data(int half, int rank_in_half) {
  std::mt19937 gen(1000u * unsigned(half + 1) + unsigned(rank_in_half));
  std::normal_distribution<float> normal;
  HostData d;
  d.x.resize(size_t(kPerRank * kFeatures));
  for (float& v : d.x) v = normal(gen);
  for (int64_t i = 0; i < kPerRank; ++i) {
    const float* row = &d.x[size_t(i * kFeatures)];
    const float score = half == 0 ? row[0] + row[1] : row[2] - row[3];
    d.y.push_back(score < -0.5f ? 0 : score < 0.5f ? 1 : 2);
  }
  return d;
}

data::HostArrayOptions data_options() {
  data::HostArrayOptions o;
  o.batch_size = kBatch;
  o.val_size = kValSize;
  o.seed = 7;
  o.prefetch = 0;
  return o;
}

std::shared_ptr<models::MLP> make_model() {
  manual_seed(42);  // the same start on every rank (DDP broadcasts rank 0's weights anyway)
  models::MLPOptions o;
  o.in_features = kFeatures;
  o.hidden = {16};
  o.num_classes = kClasses;
  return std::make_shared<models::MLP>(o);
}

std::vector<float> flat_weights(const nn::Module& m) {
  std::vector<float> out;
  for (const auto& p : m.parameters()) {
    const auto v = p.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// One process at the half's global batch: batch k is batch k of each rank's loader (the same
// split and shuffle the Trainer's loaders use), concatenated, with the model's optimizer.
std::vector<float> reference_weights(int half, int half_size) {
  std::vector<HostData> data;
  std::vector<std::shared_ptr<data::DataLoader>> loaders;
  std::vector<std::unique_ptr<data::HostArrayDataModule>> modules;
  for (int r = 0; r < half_size; ++r) data.push_back(make_rank_data(half, r));
  for (int r = 0; r < half_size; ++r) {
    modules.push_back(std::make_unique<data::HostArrayDataModule>(
        data::HostArrays{data[size_t(r)].x.data(), {kPerRank, kFeatures}, DType::Float32, data[size_t(r)].y.data()},
        data_options()));
    loaders.push_back(modules.back()->train_dataloader());
  }
  auto model = make_model();
  trainer::OptimizerConfig config = model->configure_optimizers();
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    for (auto& loader : loaders) loader->start_epoch(epoch);
    while (true) {
      std::vector<Tensor> inputs, targets;
      for (auto& loader : loaders) {
        if (auto b = loader->next()) {
          inputs.push_back(b->input);
          targets.push_back(b->target);
        }
      }
      if (inputs.empty()) break;
      Tensor loss = cross_entropy(model->forward(cat(inputs, 0)), cat(targets, 0));
      loss.backward();
      config.optimizer->step();
      config.optimizer->zero_grad();
    }
    if (config.scheduler) config.scheduler->step();
  }
  return flat_weights(*model);
}

double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = a.size() == b.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::fabs(double(a[i]) - b[i]) / std::max(1.0, std::fabs(double(b[i]))));
  }
  return worst;
}

void run(int world_rank, int world_size, bool& ok) {
  auto check = [&](bool holds, const std::string& what) {
    std::printf("[rank %d] %s: %s\n", world_rank, holds ? "ok" : "FAILED", what.c_str());
    ok = ok && holds;
  };
  if (world_size < 2 || world_size % 2 != 0) {
    throw ConfigError("host_comm_split_world splits MPI_COMM_WORLD in two equal halves, but it has " +
                      std::to_string(world_size) + " process(es); allowed: an even number >= 2 (mpirun -np 4)");
  }
  const int half = world_rank < world_size / 2 ? 0 : 1;
  MPI_Comm half_comm;
  MPI_Comm_split(MPI_COMM_WORLD, half, world_rank, &half_comm);
  int rank_in_half = 0, half_size = 1;
  MPI_Comm_rank(half_comm, &rank_in_half);
  MPI_Comm_size(half_comm, &half_size);

  // The host's own arrays: Tandem views them in place.
  const HostData mine = make_rank_data(half, rank_in_half);
  data::HostArrayDataModule dm({mine.x.data(), {kPerRank, kFeatures}, DType::Float32, mine.y.data()}, data_options());

  // Each half logs under a directory of its own, which its first rank creates.
  char dir[4096] = {};
  if (rank_in_half == 0) {
    std::string pattern = (std::filesystem::temp_directory_path() / "tandem_split_world_XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
    std::snprintf(dir, sizeof dir, "%s", pattern.c_str());
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, half_comm);

  trainer::TrainerOptions options;
  options.accelerator = "cpu";
  options.strategy = "ddp";
  options.max_epochs = kEpochs;
  options.num_sanity_val_steps = 0;
  options.enable_progress_bar = false;
  options.enable_model_summary = false;
  options.enable_checkpointing = false;
  options.default_root_dir = dir;
  options.communicator = collectives::host_comm(half_comm);

  // Bad input is a typed error naming what was given: 3 devices on a communicator of 2.
  trainer::TrainerOptions wrong = options;
  wrong.devices = half_size + 1;
  std::string refused;
  try {
    trainer::Trainer t(wrong);
  } catch (const ConfigError& e) {
    refused = e.what();
  }
  check(refused.find("host_comm") != std::string::npos && refused.find(std::to_string(half_size)) != std::string::npos,
        "devices=" + std::to_string(half_size + 1) + " on a communicator of " + std::to_string(half_size) +
            " is a ConfigError: " + refused);

  auto model = make_model();
  std::vector<float> weights;
  double val_loss = NAN;
  {
    trainer::Trainer trainer(options);
    check(trainer.world_size() == half_size && trainer.global_rank() == rank_in_half,
          "the Trainer's world is the half: rank " + std::to_string(trainer.global_rank()) + " of " +
              std::to_string(trainer.world_size()));
    trainer.fit(*model, dm);
    weights = flat_weights(*model);
    val_loss = trainer.callback_metrics().count("val_loss") ? trainer.callback_metrics().at("val_loss") : NAN;
  }
  check(std::isfinite(val_loss), "val_loss after fit = " + std::to_string(val_loss));

  // Identical within the half: the elementwise min and max over the half equal this rank's.
  std::vector<float> lo(weights.size()), hi(weights.size());
  MPI_Allreduce(weights.data(), lo.data(), int(weights.size()), MPI_FLOAT, MPI_MIN, half_comm);
  MPI_Allreduce(weights.data(), hi.data(), int(weights.size()), MPI_FLOAT, MPI_MAX, half_comm);
  check(lo == weights && hi == weights, "the ranks of half " + std::to_string(half) + " hold identical weights");

  // Different between the halves: their first ranks swap weights over the host's world.
  if (rank_in_half == 0) {
    const int other = half == 0 ? world_size / 2 : 0;
    std::vector<float> theirs(weights.size());
    MPI_Sendrecv(weights.data(), int(weights.size()), MPI_FLOAT, other, 0, theirs.data(), int(theirs.size()),
                 MPI_FLOAT, other, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const double apart = max_relative_difference(weights, theirs);
    check(apart > 1e-3, "the two halves' weights differ (max relative difference " + std::to_string(apart) + ")");

    const std::vector<float> reference = reference_weights(half, half_size);
    const double off = max_relative_difference(weights, reference);
    check(off < 2e-5, "half " + std::to_string(half) + " equals one process at the global batch " +
                          std::to_string(kBatch * half_size) + " (max relative difference " + std::to_string(off) + ")");
    const double moved = max_relative_difference(flat_weights(*make_model()), reference);
    check(moved > 1e-3, "training moved the weights (max relative difference " + std::to_string(moved) + ")");
  }

  // MPI is still the host's: not finalized, and its communicator works.
  int finalized = 1;
  MPI_Finalized(&finalized);
  check(!finalized, "Tandem did not finalize the host's MPI");
  check(MPI_Barrier(half_comm) == MPI_SUCCESS, "the host's half communicator is usable after the Trainer");
  MPI_Comm_free(&half_comm);
  if (rank_in_half == 0) std::filesystem::remove_all(dir);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int code = 0;
  bool ok = true;
  try {
    run(rank, size, ok);
    code = ok ? 0 : 1;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "[rank %d] host_comm_split_world: error: %s\n", rank, e.what());
    code = 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] host_comm_split_world: error: %s\n", rank, e.what());
    code = 1;
  }
  int worst = 0;
  MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) std::printf("host_comm_split_world: %s\n", worst == 0 ? "passed" : "FAILED");
  MPI_Finalize();
  return worst;
}
