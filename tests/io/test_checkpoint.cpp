// Checkpoints: a real model, optimizer and scheduler survive the file bit for bit and keep
// training identically; the file's layout; malformed checkpoints; finding "last".
#include <gtest/gtest.h>

#include <filesystem>

#include "base/error.h"
#include "engine/io/safetensors.h"
#include "engine/io/safetensors_format.h"
#include "engine/nn/nn.h"
#include "engine/optim/adam.h"
#include "engine/optim/lr_scheduler.h"
#include "engine/optim/sgd.h"
#include "engine/trainer/checkpoint.h"
#include "io_test_util.h"
#include "tensor/generator.h"

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
  EXPECT_EQ(raw.metadata.at("tandem.version"), "2");
  EXPECT_EQ(nlohmann::json::parse(raw.metadata.at("tandem.optimizer.param_groups")), adam.state_dict().param_groups);
  EXPECT_EQ(raw.metadata.at("tandem.scheduler"), R"({"last_epoch":0})");
  EXPECT_EQ(raw.metadata.at("tandem.trainer_state"), R"({"epoch":0})");
  EXPECT_TRUE(raw.metadata.count("tandem.file_crc32"));
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
  io::save_safetensors(path, {}, {{"tandem.version", "3"}});
  expect_error<DataError>([&] { trainer::load_checkpoint(path); }, {path, "version 3", "reads versions 1 and 2"});
  io::save_safetensors(path, {}, {{"tandem.version", "2"}, {"tandem.trainer_state", "{\"epoch\": "}});
  expect_error<DataError>([&] { trainer::load_checkpoint(path); }, {path, "tandem.trainer_state", "not valid JSON"});
  io::save_safetensors(path, {}, {{"tandem.version", "2"}, {"tandem.optimizer.param_groups", "{}"}});
  expect_error<DataError>([&] { trainer::load_checkpoint(path); }, {path, "must be a JSON array"});

  // A Tandem checkpoint whose header lost the checksum key cannot be verified.
  tandem::test::write_bytes(path, tandem::test::safetensors_bytes(
                                      R"({"__metadata__":{"tandem.version":"1"},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
                                      {1}));
  expect_error<DataError>([&] { trainer::load_checkpoint(path); }, {path, "tandem.checksum", "cannot be verified"});
  tandem::test::write_bytes(path, tandem::test::safetensors_bytes(
                                      R"({"__metadata__":{"tandem.version":"2"},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
                                      {1}));
  expect_error<DataError>([&] { trainer::load_checkpoint(path); }, {path, "tandem.file_crc32", "cannot be verified"});

  auto model = make_model(2);
  trainer::save_checkpoint(path, {model->state_dict(), std::nullopt, nullptr, {{"epoch", 1}}});
  auto bytes = read_bytes(path);
  bytes.resize(bytes.size() - 10);
  write_bytes(path, bytes);
  expect_error<DataError>([&] { trainer::load_checkpoint(path); }, {path, "truncated"});
}

namespace {

// A checkpoint as the Trainer writes it: weights, Adam's state and param_groups, a scheduler
// and trainer state.
std::string write_full_checkpoint(const ScratchDir& dir) {
  manual_seed(4);
  auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 3));
  optim::Adam adam(model->parameters());
  optim::StepLR sched(adam, 2, 0.5);
  Tensor x = Tensor::from_vector<float>({0.5f, -1, 2, 0.1f}, {1, 4});
  mse_loss((*model)(x), Tensor::zeros({1, 3})).backward();
  adam.step();
  sched.step();
  const std::string path = dir.file("full.safetensors");
  trainer::save_checkpoint(path, {model->state_dict(), adam.state_dict(), sched.state_dict(), example_trainer_state()});
  return path;
}

}  // namespace

// Resume reads every byte: tensors and the JSON metadata (optimizer hyper-parameters,
// scheduler, loop position, RNG). Any bit changed anywhere is a DataError naming the file.
TEST(Checkpoint, EveryFlippedBitAnywhereIsADataErrorNamingTheFile) {
  ScratchDir dir;
  const auto good = read_bytes(write_full_checkpoint(dir));
  const std::string path = dir.file("flipped.safetensors");
  for (size_t i = 0; i < good.size(); ++i) {
    const uint8_t bit = uint8_t(1u << (i % 8));  // each bit position, over the file
    auto bytes = good;
    bytes[i] ^= bit;
    write_bytes(path, bytes);
    try {
      trainer::load_checkpoint(path);
      ADD_FAILURE() << "byte " << i << " xor " << int(bit) << " of " << good.size() << " loaded without an error";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

// The case the issue met: beta1 edited in the param_groups metadata (still valid JSON).
TEST(Checkpoint, AnEditedOptimizerSettingFailsTheChecksum) {
  ScratchDir dir;
  const std::string path = write_full_checkpoint(dir);
  auto bytes = read_bytes(path);
  std::string text(bytes.begin(), bytes.end());
  const size_t at = text.find("[0.9,0.999]");
  ASSERT_NE(at, std::string::npos) << text.substr(0, 600);
  bytes[at + 3] = '8';  // beta1 0.9 -> 0.8
  write_bytes(path, bytes);
  expect_error<DataError>([&] { trainer::load_checkpoint(path); }, {path, "checksum mismatch"});
}

// Format version 1 (before the whole-file checksum): loaded, with the warning the Trainer prints,
// and its tensors still verified.
TEST(Checkpoint, FormatVersionOneLoadsWithAWarning) {
  ScratchDir dir;
  const std::string v2 = write_full_checkpoint(dir);
  const io::SafetensorsContent content = io::load_safetensors(v2);
  // Rewrite it as version 1 wrote it: the data section's CRC-32 under "tandem.checksum".
  nlohmann::ordered_json header;
  header["__metadata__"] = nlohmann::ordered_json::object();
  std::vector<uint8_t> data;
  for (const auto& [name, tensor] : content.tensors) {
    const auto bytes = tensor_bytes(tensor);
    header[name] = {{"dtype", io::detail::safetensors_dtype_code(tensor.dtype())},
                    {"shape", tensor.shape()},
                    {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data.insert(data.end(), bytes.begin(), bytes.end());
  }
  for (const auto& [key, value] : content.metadata) {
    if (key != io::kFileChecksumKey) header["__metadata__"][key] = value;
  }
  header["__metadata__"]["tandem.version"] = "1";
  header["__metadata__"][io::kDataChecksumKey] =
      io::detail::crc32_hex(io::detail::crc32_update(0, data.data(), data.size()));
  const std::string v1 = dir.file("v1.safetensors");
  write_bytes(v1, tandem::test::safetensors_bytes(header.dump(), data));

  const Checkpoint old = trainer::load_checkpoint(v1);
  const Checkpoint now = trainer::load_checkpoint(v2);
  EXPECT_EQ(old.format_version, "1");
  EXPECT_EQ(now.format_version, "2");
  expect_same_tensors(old.model, now.model);
  EXPECT_EQ(old.optimizer->param_groups, now.optimizer->param_groups);
  EXPECT_EQ(old.trainer_state, now.trainer_state);
  const std::string warning = trainer::unverified_metadata_warning(v1, old);
  EXPECT_NE(warning.find(v1 + " has checkpoint format version 1"), std::string::npos) << warning;
  EXPECT_NE(warning.find("used unverified"), std::string::npos) << warning;
  EXPECT_EQ(trainer::unverified_metadata_warning(v2, now), "");

  auto bytes = read_bytes(v1);
  bytes[bytes.size() - 3] ^= 0x01;
  write_bytes(v1, bytes);
  expect_error<DataError>([&] { trainer::load_checkpoint(v1); }, {v1, "checksum mismatch"});
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
