// Invalid Trainer options are ConfigErrors that name the option, the value and what is allowed;
// plans the Trainer cannot run yet are refused with what is supported.
#include <gtest/gtest.h>

#include "engine/config/config_args.h"
#include "engine/trainer/trainer_section.h"
#include "tests/accelerators/expect_error.h"
#include "tests/accelerators/scoped_env.h"
#include "trainer_test_util.h"

namespace tandem::trainer {
namespace {

using testing::quiet_options;

void expect_invalid(const std::function<void(TrainerOptions&)>& change, std::initializer_list<std::string> fragments) {
  TrainerOptions o = quiet_options("/tmp");
  change(o);
  expect_error<ConfigError>([&] { Trainer t(o); }, fragments);
}

TEST(TrainerOptionsTest, InvalidValuesAreConfigErrors) {
  expect_invalid([](auto& o) { o.max_epochs = -2; }, {"max_epochs=-2", "-1 (no limit)"});
  expect_invalid([](auto& o) { o.max_steps = -5; }, {"max_steps=-5", ">= 0"});
  expect_invalid([](auto& o) { o.step_timeout = -1.0; }, {"step_timeout=-1", "0 (off)"});
  expect_invalid([](auto& o) { o.max_restarts = -2; }, {"max_restarts=-2", ">= 0"});
  expect_invalid([](auto& o) { o.min_processes = 0; }, {"min_processes=0", ">= 1"});
  expect_invalid([](auto& o) { o.elastic_batch = "both"; }, {"elastic_batch=both", "per_rank or global"});
  expect_invalid([](auto& o) { o.limit_train_batches = 1.5; }, {"limit_train_batches=1.5", "[0.0, 1.0]"});
  expect_invalid([](auto& o) { o.limit_val_batches = -1; }, {"limit_val_batches=-1", ">= 0"});
  expect_invalid([](auto& o) { o.val_check_interval = 1.5; }, {"val_check_interval=1.5", "(0.0, 1.0]"});
  expect_invalid([](auto& o) { o.val_check_interval = 0; }, {"val_check_interval=0", ">= 1"});
  expect_invalid([](auto& o) { o.check_val_every_n_epoch = 0; }, {"check_val_every_n_epoch=0", ">= 1"});
  expect_invalid([](auto& o) { o.check_val_every_n_epoch.reset(); o.val_check_interval = 0.5; },
                 {"val_check_interval=0.5", "must be an int"});
  expect_invalid([](auto& o) { o.num_sanity_val_steps = -3; }, {"num_sanity_val_steps=-3"});
  expect_invalid([](auto& o) { o.accumulate_grad_batches = 0; }, {"accumulate_grad_batches=0", ">= 1"});
  expect_invalid([](auto& o) { o.gradient_clip_val = -1.0; }, {"gradient_clip_val", ">= 0"});
  expect_invalid([](auto& o) { o.gradient_clip_algorithm = "l2"; }, {"gradient_clip_algorithm=l2", "'norm' or 'value'"});
  expect_invalid([](auto& o) { o.log_every_n_steps = 0; }, {"log_every_n_steps=0"});
  expect_invalid([](auto& o) { o.fast_dev_run = -1; }, {"fast_dev_run=-1"});
  expect_invalid([](auto& o) { o.precision = "8-true"; }, {"8-true", "32-true"});
}

TEST(TrainerOptionsTest, PlansThatCannotTrainYetAreRefused) {
  // Two CPU processes need a launcher: the error gives the command (tandem fit relaunches itself).
  expect_invalid([](auto& o) { o.devices = 2; }, {"needs 2 processes", "mpirun -np 2"});
  // horovod is never relaunched: started by hand it says what it needs.
  expect_invalid([](auto& o) { o.strategy = "horovod"; o.devices = 2; },
                 {"strategy=horovod", "started by mpirun or horovodrun", "mpirun -np 2", "--trainer.strategy=ddp"});
  expect_invalid([](auto& o) { o.process_group_backend = "gloo"; }, {"process_group_backend=gloo", "auto, mpi, nccl"});
  expect_invalid([](auto& o) { o.collective_timeout = 0; }, {"collective_timeout", "> 0"});
  // CUDA graphs need one GPU in one process.
  expect_invalid([](auto& o) { o.cuda_graph = true; }, {"cuda_graph=true", "accelerator=cuda", "accelerator=cpu", "cuda_graph=false"});
}

TEST(TrainerOptionsTest, DdpWithOneDeviceIsAWorldOfOne) {
  testing::TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.strategy = "ddp";
  Trainer trainer(o);
  EXPECT_EQ(trainer.strategy().name(), "ddp");
  EXPECT_EQ(trainer.world_size(), 1);
}

TEST(TrainerOptionsTest, SimulatedGpusArePlannedButNotTrainedOn) {
  ScopedEnv env;
  env.set("TANDEM_SIMULATE_CUDA_DEVICES", "2").unset("TANDEM_SIMULATE_BUSY_CUDA_DEVICES");
  expect_invalid([](auto& o) { o.accelerator = "cuda"; o.devices = 1; },
                 {"refusing to start a Trainer", "TANDEM_SIMULATE_CUDA_DEVICES=2 is set"});
  // Whatever the accelerator: the variables describe a pretend machine.
  expect_invalid([](auto& o) { o.accelerator = "cpu"; }, {"refusing to start a Trainer"});
  env.unset("TANDEM_SIMULATE_CUDA_DEVICES").set("TANDEM_SIMULATE_BUSY_CUDA_DEVICES", "0");
  expect_invalid([](auto& o) { o.accelerator = "cpu"; }, {"TANDEM_SIMULATE_BUSY_CUDA_DEVICES=0 is set"});
}

TEST(TrainerOptionsTest, PrecisionTakesInts) {
  testing::TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.precision = 64;  // Lightning's precision=64
  Trainer trainer(o);
  EXPECT_EQ(trainer.plan().precision, Precision::Float64True);
}

TEST(TrainerOptionsTest, ZeroBatchFractionIsAnError) {
  testing::TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.limit_train_batches = 0.05;  // 5% of 8 batches is 0
  Trainer trainer(o);
  testing::TinyClassifier model;
  testing::SyntheticDataModule dm;
  expect_error<ConfigError>([&] { trainer.fit(model, dm); }, {"limit_train_batches=0.05", "0 of the 8"});
}

TEST(TrainerOptionsTest, BatchCountParsesIntsAndFractions) {
  EXPECT_TRUE(BatchCount::parse("10", "x").is_count());
  EXPECT_EQ(BatchCount::parse("10", "x").count(), 10);
  EXPECT_FALSE(BatchCount::parse("1.0", "x").is_count());
  EXPECT_DOUBLE_EQ(BatchCount::parse("0.25", "x").fraction(), 0.25);
  EXPECT_EQ(BatchCount(1.0).str(), "1.0");
  expect_error<ConfigError>([] { BatchCount::parse("ten", "limit_val_batches"); }, {"limit_val_batches=ten"});
}

}  // namespace
}  // namespace tandem::trainer
