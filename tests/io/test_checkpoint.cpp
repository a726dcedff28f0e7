// Checkpoints: a real model, optimizer and scheduler survive the file bit for bit and keep
// training identically; the file's layout; malformed checkpoints; finding "last".
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/core/error.h"
#include "engine/io/safetensors.h"
#include "engine/nn/nn.h"
#include "engine/optim/adam.h"
#include "engine/optim/lr_scheduler.h"
#include "engine/optim/sgd.h"
#include "engine/tensor/generator.h"
#include "engine/trainer/checkpoint.h"
#include "io_test_util.h"

using namespace tandem;
using tandem::test::expect_error;
using tandem::test::read_bytes;
using tandem::test::ScratchDir;
using tandem::test::tensor_bytes;
using tandem::test::write_bytes;
using trainer::Checkpoint;

namespace {

std::shared_ptr<nn::Sequential> make_model(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::BatchNorm1d>(8),
                                          std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 3));
}

// A few optimizer steps on fixed data (training mode: BatchNorm's running stats move too).
void train(nn::Module& model, optim::Optimizer& opt, optim::LRScheduler* sched, int steps) {
  Tensor x = Tensor::from_vector<float>({0.5f, -1, 2, 0.1f, 1.5f, 0.25f, -0.75f, 3, -2, 0, 1, 1}, {3, 4});
  Tensor y = Tensor::from_vector<float>({1, 0, -1, 0.5f, 0.5f, 2, -1, 0, 1}, {3, 3});
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    mse_loss(model(x), y).backward();
    opt.step();
    if (sched) sched->step();
  }
}

void expect_same_tensors(const StateDict& got, const StateDict& want) {
  ASSERT_EQ(got.keys(), want.keys());
  for (const auto& [name, t] : want) {
    EXPECT_EQ(got.at(name).dtype(), t.dtype()) << name;
    EXPECT_EQ(got.at(name).shape(), t.shape()) << name;
    EXPECT_EQ(tensor_bytes(got.at(name)), tensor_bytes(t)) << name;
  }
}

nlohmann::json example_trainer_state() {
  return {{"epoch", 3},
          {"global_step", 1234},
          {"loops", {{"fit_loop", {{"batch_idx", 17}, {"total_batches", 215}}}}},
          {"rng", {{"seed", 42}, {"offset", 18446744073709551615ull}}},  // full uint64 range
          {"callbacks", {{"ModelCheckpoint", {{"best_model_score", 0.8734999999999999}, {"best_k_models", nlohmann::json::object()}}}}},
          {"hparams", {{"lr", 1e-3}, {"hidden", {512, 256}}, {"name", "mlp \"quoted\" \u00e9"}}},
          {"world_size", 1}};
}

}  // namespace

TEST(Checkpoint, RoundTripRestoresFreshObjectsThatTrainIdentically) {
  ScratchDir dir;
  auto model = make_model(1);
  optim::SGD sgd(model->parameters(), {.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4});
  optim::StepLR sched(sgd, 2, 0.5);
  train(*model, sgd, &sched, 3);

  const std::string path = dir.file("epoch=0-step=3.safetensors");
  Checkpoint saved{model->state_dict(), sgd.state_dict(), sched.state_dict(), example_trainer_state()};
  trainer::save_checkpoint(path, saved);
  Checkpoint loaded = trainer::load_checkpoint(path);

  expect_same_tensors(loaded.model, saved.model);
  ASSERT_TRUE(loaded.optimizer.has_value());
  expect_same_tensors(loaded.optimizer->state, saved.optimizer->state);
  EXPECT_EQ(loaded.optimizer->param_groups, saved.optimizer->param_groups);
  EXPECT_EQ(loaded.scheduler, saved.scheduler);
  EXPECT_EQ(loaded.trainer_state, saved.trainer_state);
  EXPECT_EQ(loaded.trainer_state["rng"]["offset"].get<uint64_t>(), 18446744073709551615ull);

  // Fresh objects from another seed and other hyper-parameters take everything from the file...
  auto restored = make_model(99);
  optim::SGD restored_sgd(restored->parameters(), {.lr = 1.0, .momentum = 0.5});
  optim::StepLR restored_sched(restored_sgd, 2, 0.5);
  restored->load_state_dict(loaded.model);
  restored_sgd.load_state_dict(*loaded.optimizer);
  restored_sched.load_state_dict(loaded.scheduler);
  EXPECT_EQ(restored_sgd.param_groups()[0].lr(), sgd.param_groups()[0].lr());
  // ...and the two runs continue bit for bit alike.
  train(*model, sgd, &sched, 3);
  train(*restored, restored_sgd, &restored_sched, 3);
  expect_same_tensors(restored->state_dict(), model->state_dict());
}

TEST(Checkpoint, AdamStateRoundTripsAndContinuesIdentically) {
  ScratchDir dir;
  auto model = make_model(7);
  optim::Adam adam(model->parameters(), {.lr = 0.01, .betas = {0.8, 0.95}});
  train(*model, adam, nullptr, 2);
  const std::string path = dir.file("adam.safetensors");
  trainer::save_checkpoint(path, {model->state_dict(), adam.state_dict(), nullptr, {{"global_step", 2}}});

  Checkpoint loaded = trainer::load_checkpoint(path);
  EXPECT_TRUE(loaded.scheduler.is_null());
  ASSERT_TRUE(loaded.optimizer);
  EXPECT_TRUE(loaded.optimizer->state.contains("0.exp_avg"));
  EXPECT_EQ(loaded.optimizer->state.at("0.step").item(), 2.0);
  auto restored = make_model(8);
  optim::Adam restored_adam(restored->parameters());
  restored->load_state_dict(loaded.model);
  restored_adam.load_state_dict(*loaded.optimizer);
  train(*model, adam, nullptr, 2);
  train(*restored, restored_adam, nullptr, 2);
  expect_same_tensors(restored->state_dict(), model->state_dict());
}

TEST(Checkpoint, FileLayoutUsesPyTorchNamesAndStringMetadata) {
  ScratchDir dir;
  auto model = make_model(3);
  optim::Adam adam(model->parameters());
  train(*model, adam, nullptr, 1);
  const std::string path = dir.file("c.safetensors");
  trainer::save_checkpoint(path, {model->state_dict(), adam.state_dict(), {{"last_epoch", 0}}, {{"epoch", 0}}});

  io::SafetensorsContent raw = io::load_safetensors(path);
  std::vector<std::string> names;
  for (const auto& entry : raw.tensors) names.push_back(entry.first);
  const std::vector<std::string> expected_model = {"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                                                   "1.running_var", "1.num_batches_tracked", "3.weight", "3.bias"};
  ASSERT_GE(names.size(), expected_model.size());
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + long(expected_model.size())), expected_model);
  EXPECT_EQ(names[expected_model.size()], "optimizer.0.step");
  EXPECT_EQ(names.back(), "optimizer.5.exp_avg_sq");
  EXPECT_EQ(raw.metadata.at("format"), "pt");
  EXPECT_EQ(raw.metadata.at("tandem.version"), "1");
  EXPECT_EQ(nlohmann::json::parse(raw.metadata.at("tandem.optimizer.param_groups")), adam.state_dict().param_groups);
  EXPECT_EQ(raw.metadata.at("tandem.scheduler"), R"({"last_epoch":0})");
  EXPECT_EQ(raw.metadata.at("tandem.trainer_state"), R"({"epoch":0})");
  EXPECT_TRUE(raw.metadata.count("tandem.checksum"));
}

TEST(Checkpoint, ModelOnlyCheckpointHasNoOptimizerOrState) {
  ScratchDir dir;
  auto model = make_model(5);
  trainer::save_checkpoint(dir.file("m.safetensors"), {model->state_dict(), std::nullopt, nullptr, nullptr});
  Checkpoint loaded = trainer::load_checkpoint(dir.file("m.safetensors"));
  expect_same_tensors(loaded.model, model->state_dict());
  EXPECT_FALSE(loaded.optimizer.has_value());
  EXPECT_TRUE(loaded.scheduler.is_null());
  EXPECT_TRUE(loaded.trainer_state.is_null());
}

TEST(Checkpoint, PlainSafetensorsWeightsLoadAsAModelOnlyCheckpoint) {
  ScratchDir dir;
  // E.g. weights a PyTorch user saved: no Tandem metadata; "optimizer.*" names stay model keys.
  io::save_safetensors(dir.file("w.safetensors"), {{"fc.weight", Tensor::ones({2, 2})}, {"optimizer.x", Tensor::ones({1})}});
  Checkpoint loaded = trainer::load_checkpoint(dir.file("w.safetensors"));
  EXPECT_EQ(loaded.model.keys(), (std::vector<std::string>{"fc.weight", "optimizer.x"}));
  EXPECT_FALSE(loaded.optimizer);
  EXPECT_TRUE(loaded.trainer_state.is_null());
}

TEST(Checkpoint, MalformedCheckpointsAreDataErrorsNamingTheFile) {
  ScratchDir dir;
  const std::string path = dir.file("bad.safetensors");
  io::save_safetensors(path, {}, {{"tandem.version", "2"}});
  expect_error<DataError>([&] { trainer::load_checkpoint(path); }, {path, "version 2", "reads version 1"});
  io::save_safetensors(path, {}, {{"tandem.version", "1"}, {"tandem.trainer_state", "{\"epoch\": "}});
  expect_error<DataError>([&] { trainer::load_checkpoint(path); }, {path, "tandem.trainer_state", "not valid JSON"});
  io::save_safetensors(path, {}, {{"tandem.version", "1"}, {"tandem.optimizer.param_groups", "{}"}});
  expect_error<DataError>([&] { trainer::load_checkpoint(path); }, {path, "must be a JSON array"});

  // A Tandem checkpoint whose header lost the checksum key cannot be verified.
  tandem::test::write_bytes(path, tandem::test::safetensors_bytes(
                                      R"({"__metadata__":{"tandem.version":"1"},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
                                      {1}));
  expect_error<DataError>([&] { trainer::load_checkpoint(path); }, {path, "tandem.checksum", "cannot be verified"});

  auto model = make_model(2);
  trainer::save_checkpoint(path, {model->state_dict(), std::nullopt, nullptr, {{"epoch", 1}}});
  auto bytes = read_bytes(path);
  bytes.resize(bytes.size() - 10);
  write_bytes(path, bytes);
  expect_error<DataError>([&] { trainer::load_checkpoint(path); }, {path, "truncated"});
}

TEST(Checkpoint, ModelKeysMayNotUseTheOptimizerPrefix) {
  ScratchDir dir;
  StateDict model{{"optimizer.weight", Tensor::ones({1})}};
  optim::OptimizerStateDict opt;
  expect_error<ValueError>([&] { trainer::save_checkpoint(dir.file("x.safetensors"), {model, opt, nullptr, nullptr}); },
                           {"'optimizer.weight'", "reserve"});
  EXPECT_TRUE(dir.listing().empty());
}

TEST(Checkpoint, FailedSaveKeepsThePreviousCheckpoint) {
  ScratchDir dir;
  const std::string path = dir.file("last.safetensors");
  auto model = make_model(4);
  trainer::save_checkpoint(path, {model->state_dict(), std::nullopt, nullptr, {{"epoch", 1}}});
  const auto before = read_bytes(path);
  // Invalid UTF-8 cannot be written as JSON: the save fails before touching the file.
  nlohmann::json bad_state = {{"name", std::string("\xff\xfe")}};
  expect_error<ValueError>([&] { trainer::save_checkpoint(path, {model->state_dict(), std::nullopt, nullptr, bad_state}); },
                           {"trainer state", "UTF-8"});
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"last.safetensors"});
}

TEST(FindLastCheckpoint, PrefersLastThenNewestAndIgnoresTemporaryFiles) {
  namespace fs = std::filesystem;
  ScratchDir dir;
  EXPECT_EQ(trainer::find_last_checkpoint(dir.file("missing")), std::nullopt);
  EXPECT_EQ(trainer::find_last_checkpoint(dir.path()), std::nullopt);

  const auto now = fs::file_time_type::clock::now();
  write_bytes(dir.file("epoch=1-step=20.safetensors"), {1});
  write_bytes(dir.file("epoch=0-step=10.safetensors"), {1});
  write_bytes(dir.file("epoch=2-step=30.safetensors.tmp-123"), {1});  // an unfinished save
  write_bytes(dir.file("notes.txt"), {1});
  fs::last_write_time(dir.file("epoch=0-step=10.safetensors"), now - std::chrono::hours(2));
  fs::last_write_time(dir.file("epoch=1-step=20.safetensors"), now - std::chrono::hours(1));
  fs::last_write_time(dir.file("epoch=2-step=30.safetensors.tmp-123"), now);
  fs::last_write_time(dir.file("notes.txt"), now);
  EXPECT_EQ(trainer::find_last_checkpoint(dir.path()), dir.file("epoch=1-step=20.safetensors"));

  write_bytes(dir.file("last.safetensors"), {1});
  fs::last_write_time(dir.file("last.safetensors"), now - std::chrono::hours(5));
  EXPECT_EQ(trainer::find_last_checkpoint(dir.path()), dir.file("last.safetensors"));
}
