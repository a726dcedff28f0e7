// ddp_spawn started as a plain program (no mpirun): `spawn_fit_main <dir> <world_size> [child-dies]`.
// The Trainer's process spawns world_size - 1 copies of this program, which train as ranks
// 1..W-1; the caller is rank 0, and when fit returns ITS model holds the trained weights, which
// must equal one device at batch W x B over the DistributedSampler's padded order (what ddp at
// W ranks equals, tests/ddp) within 1e-5 relative. Exit 0 on success; the copies exit 0 after fit.
// child-dies: the copies exit before starting MPI; the caller must abort after its 3 s
// collective timeout with an error saying so, not wait forever.
#include <cstdio>
#include <cstdlib>

#include "engine/data/distributed_sampler.h"
#include "trainer_test_util.h"

using namespace tandem;
namespace tt = tandem::trainer::testing;
using tandem::trainer::OptimizerConfig;
using tandem::trainer::Trainer;
using tandem::trainer::TrainerOptions;

namespace {

std::vector<float> one_device_weights(tt::SyntheticDataModule& dm, int64_t batch, int world, int epochs) {
  manual_seed(42);
  tt::TinyClassifier model(0.05, 0.0);
  OptimizerConfig config = model.configure_optimizers();
  data::DistributedSamplerOptions so;
  so.num_replicas = world;
  so.shuffle = true;
  so.seed = 1234;  // SyntheticDataModule's loader seed
  const data::DistributedSampler sampler(dm.train->size(), so);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    const std::vector<int64_t> order = sampler.padded_order(epoch);
    const int64_t window = batch * world;
    for (int64_t start = 0; start < int64_t(order.size()); start += window) {
      const auto last = order.begin() + std::min<int64_t>(start + window, int64_t(order.size()));
      const data::Batch b = dm.train->get_batch(std::vector<int64_t>(order.begin() + start, last));
      cross_entropy(model.forward(b.input), b.target).backward();
      config.optimizer->step();
      config.optimizer->zero_grad();
    }
    config.scheduler->step();
  }
  return tt::flat_weights(model);
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: spawn_fit_main <dir> <world_size> [child-dies]\n");
    return 2;
  }
  const bool child_dies = argc == 4 && std::string(argv[3]) == "child-dies";
  if (child_dies && std::getenv("TANDEM_SPAWN_WORLD_SIZE")) return 3;
  const int world = std::atoi(argv[2]);
  tt::SyntheticDataModule dm(37, 16, 4);
  manual_seed(42);
  tt::TinyClassifier model(0.05, 0.0);
  TrainerOptions o = tt::quiet_options(argv[1]);
  o.strategy = "ddp_spawn";
  o.devices = world;
  o.max_epochs = 2;
  o.num_sanity_val_steps = 0;
  if (child_dies) o.collective_timeout = 3;
  Trainer trainer(o);
  trainer.fit(model, dm);
  if (trainer.world_size() != world) {
    std::fprintf(stderr, "rank %d: world size %d, expected %d\n", trainer.global_rank(), trainer.world_size(), world);
    return 1;
  }
  if (!trainer.is_global_zero()) return 0;
  const std::vector<float> got = tt::flat_weights(model), ref = one_device_weights(dm, 4, world, 2);
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    worst = std::max(worst, std::fabs(double(got[i]) - ref[i]) / std::max(0.1, std::fabs(double(ref[i]))));
  }
  manual_seed(42);
  tt::TinyClassifier untouched(0.05, 0.0);
  const bool moved = tt::flat_weights(untouched) != ref;
  std::printf("ddp_spawn at %d ranks: max relative difference to one device at batch %d = %.3g%s\n", world, 4 * world,
              worst, moved ? "" : " (reference did not train!)");
  return worst <= 1e-5 && moved ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "spawn_fit_main: %s\n", e.what());
  return 1;
}
