// Fuzz target: the Trainer's restore of a checkpoint's JSON state (checkpoint_connector.cpp and
// the callbacks' load_state_dict), past the file format that fuzz_checkpoint mostly meets.
// Input: up to three lines of JSON: the trainer_state, the scheduler's state, the optimizer's
// param_groups; a missing line takes the value a fresh tiny run (tiny_training.h) would save.
// The harness writes them with the real save_checkpoint beside the tiny model's weights, then
// resumes fit and validates from the file. Input that is not JSON is skipped (the writer takes
// JSON values; fuzz_checkpoint feeds raw bytes). Allowed outcomes: as fuzz_checkpoint's.
#include <cstdint>
#include <filesystem>
#include <optional>

#include "engine/trainer/checkpoint.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/tiny_training.h"

namespace {

std::optional<nlohmann::json> json_line(const std::vector<std::string>& lines, size_t i, nlohmann::json fallback) {
  if (i >= lines.size() || lines[i].empty()) return fallback;
  nlohmann::json value = nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;
  static const fuzz::ScratchFile file("checkpoint_state.safetensors");
  const std::string root = "fuzz_checkpoint_state_run";
  const std::vector<std::string> lines = fuzz::split_bytes(std::string(reinterpret_cast<const char*>(data), size), '\n');

  fuzz::TinyModule model;
  const trainer::OptimizerConfig fresh = model.configure_optimizers();
  const auto trainer_state = json_line(lines, 0, nlohmann::json::object());
  const auto scheduler = json_line(lines, 1, fresh.scheduler->state_dict());
  const auto param_groups = json_line(lines, 2, fresh.optimizer->state_dict().param_groups);
  if (!trainer_state || !scheduler || !param_groups || !param_groups->is_array()) return 0;
  trainer::Checkpoint ckpt;
  ckpt.model = model.state_dict();
  ckpt.optimizer = fresh.optimizer->state_dict();
  ckpt.optimizer->param_groups = *param_groups;
  ckpt.scheduler = *scheduler;
  ckpt.trainer_state = *trainer_state;
  try {
    trainer::save_checkpoint(file.path(), ckpt);
  } catch (const ValueError&) {
    return 0;  // JSON the writer refuses (strings that are not UTF-8)
  }
  fuzz::resume_tiny_run(file.path(), root);
  std::filesystem::remove_all(root);
  return 0;
}
