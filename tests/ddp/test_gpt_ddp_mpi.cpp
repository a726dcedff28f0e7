// The GPT on text under ddp and ddp_sharded at the test world's size (mpirun -np 1..4): the same
// model as one process at the same global batch. The global batch is 12 windows (12 / W per rank, so np 1, 2, 3
// and 4 all run it), gradients clipped to norm 0.05 (well below the raw norm, so clipping acts on
// every step and must see the averaged gradient), AdamW with GPT's weight-decay groups, dropout 0.
// The reference is a plain loop over the same windows (TextDataModule at batch 12 in one process)
// with clip_grad_norm_ on the whole batch's gradient. Tolerance: 1e-4 relative (floor 0.1), float32
// sums in another order per rank over 4 steps.
#include <gtest/gtest.h>

#include <fstream>

#include "engine/config/optimizer_section.h"
#include "engine/data/text_data.h"
#include "engine/optim/clip_grad.h"
#include "mpi_test_world.h"
#include "models/gpt.h"
#include "trainer_test_util.h"

namespace tandem::trainer {
namespace {

using collectives::mpitest::g_world;

constexpr int64_t kGlobalBatch = 12;

models::OptimizationConfig adamw() {
  YAML::Node config;
  config["optimizer"]["name"] = "AdamW";
  config["optimizer"]["lr"] = 1e-2;
  config["optimizer"]["weight_decay"] = 0.1;
  resolve_optimizer_sections(config);
  return {config["optimizer"], YAML::Node()};
}

models::GPTOptions tiny() { return {.n_layer = 2, .n_head = 2, .n_embd = 16, .block_size = 8, .vocab_size = 256}; }

data::TextDataOptions text(const std::string& path, int64_t batch) {
  data::TextDataOptions o;
  o.path = path;
  o.block_size = 8;
  o.batch_size = batch;
  o.samples_per_epoch = 4 * kGlobalBatch;
  o.val_samples = 0;
  o.prefetch = 0;
  return o;
}

std::vector<float> weights(const nn::Module& m) {
  std::vector<float> out;
  for (const auto& p : m.parameters()) {
    const auto v = p.contiguous().to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

void expect_one_process_model(const std::string& strategy) {
  const int W = g_world->size();
  if (kGlobalBatch % W != 0) GTEST_SKIP() << "global batch 12 does not split over " << W << " ranks";
  SCOPED_TRACE(strategy);
  const std::string path = (std::filesystem::temp_directory_path() / ("tandem_gpt_" + strategy + "_" + std::to_string(W) + "_" +
                                                                       std::to_string(g_world->rank()) + ".txt")).string();
  {
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 3000; ++i) out << "In the beginning God created the heaven and the earth. "[i % 55];
  }
  manual_seed(5);
  models::GPT model(tiny(), adamw());
  const std::vector<float> initial = weights(model);
  data::TextDataModule dm(text(path, kGlobalBatch / W));
  const std::string root = path + ".logs";
  TrainerOptions o = testing::quiet_options(root);
  o.devices = W;
  o.strategy = strategy;
  o.num_sanity_val_steps = 0;
  o.max_epochs = 1;
  o.gradient_clip_val = 0.05;
  Trainer trainer(o);
  trainer.fit(model, dm);

  manual_seed(5);
  models::GPT reference(tiny(), adamw());
  OptimizerConfig config = reference.configure_optimizers();
  data::TextDataModule whole(text(path, kGlobalBatch));
  auto loader = whole.train_dataloader();
  loader->start_epoch(0);
  double first_norm = 0;
  int steps = 0;
  while (auto batch = loader->next()) {
    Tensor loss = reference.training_step(*batch, steps);
    loss.backward();
    const double norm = optim::clip_grad_norm_(reference.parameters(), 0.05);
    if (steps == 0) first_norm = norm;
    config.optimizer->step();
    config.optimizer->zero_grad();
    ++steps;
  }
  EXPECT_EQ(steps, 4);
  EXPECT_GT(first_norm, 0.5);  // so the clip at 0.05 changed every step's update
  const double diff = testing::max_relative_difference(weights(model), weights(reference));
  EXPECT_LT(diff, 1e-4) << "W=" << W;
  EXPECT_GT(testing::max_relative_difference(initial, weights(reference)), 1e-3);  // it trained
  std::filesystem::remove(path);
  std::filesystem::remove_all(root);
}

TEST(GPTDDP, MatchesOneProcessAtTheGlobalBatchWithClipping) { expect_one_process_model("ddp"); }
// ddp_sharded clips by the norm over every rank's shard (ddp_sharded_strategy.cpp).
TEST(GPTDDP, ShardedMatchesOneProcessAtTheGlobalBatchWithClipping) { expect_one_process_model("ddp_sharded"); }

}  // namespace
}  // namespace tandem::trainer
