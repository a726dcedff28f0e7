// A user's strategy registered under a new name trains through the stock Trainer: the
// micro-batch example (apps/examples/custom_strategy) against one device at the same batch.
#include <gtest/gtest.h>

#include "apps/examples/custom_strategy/microbatch_strategy.h"
#include "trainer_test_util.h"

namespace tandem::trainer {
namespace {

using testing::SyntheticDataModule;
using testing::TempDir;
using testing::TinyClassifier;

std::vector<float> fit_weights(const std::string& strategy) {
  TempDir dir;
  manual_seed(3);
  TinyClassifier model(0.05, 0.0);
  SyntheticDataModule dm(37, 16, 5);
  TrainerOptions o = testing::quiet_options(dir.path);
  o.strategy = strategy;
  o.max_epochs = 2;
  Trainer trainer(o);
  EXPECT_EQ(trainer.strategy().name(), strategy);
  trainer.fit(model, dm);
  return testing::flat_weights(model);
}

TEST(CustomStrategy, RegisteredUnderANewNameTrainsLikeOneDevice) {
  if (!strategy_registry().contains("microbatch")) microbatch_example::register_microbatch(strategy_registry());
  const std::vector<float> ref = fit_weights("single_device");
  const std::vector<float> got = fit_weights("microbatch");
  ASSERT_EQ(ref.size(), got.size());
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    worst = std::max(worst, std::fabs(double(got[i]) - ref[i]) / std::max(0.1, std::fabs(double(ref[i]))));
  }
  EXPECT_LE(worst, 1e-5);
  manual_seed(3);
  TinyClassifier untouched(0.05, 0.0);
  EXPECT_NE(testing::flat_weights(untouched), ref);
}

TEST(CustomStrategy, ItsPlanningRulesApply) {
  if (!strategy_registry().contains("microbatch")) microbatch_example::register_microbatch(strategy_registry());
  TempDir dir;
  TrainerOptions o = testing::quiet_options(dir.path);
  o.strategy = "microbatch";
  o.devices = 2;
  try {
    Trainer trainer(o);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("strategy=microbatch runs on one device"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::trainer
