// Checkpoint: everything a run needs to continue exactly, in ONE standard .safetensors file.
//
//   tensors                      the model's state_dict under its own names ("0.weight",
//                                "1.running_mean"), so a PyTorch user loads the weights with
//                                sd = safetensors.torch.load_file(p)
//                                model.load_state_dict({k: v for k, v in sd.items()
//                                                       if not k.startswith("optimizer.")})
//                                the optimizer's state as "optimizer.<key>" ("optimizer.0.exp_avg")
//   metadata (strings, JSON inside where structured):
//     "format": "pt", "tandem.version": "2"
//     "tandem.optimizer.param_groups"  torch.optim's param_groups (only with an optimizer)
//     "tandem.scheduler"               the scheduler's state_dict() (only with a scheduler)
//     "tandem.trainer_state"           epoch, global_step, loops, RNG, callbacks, hparams, ...
//     "tandem.file_crc32"              CRC-32 of the whole file: tensors, names and every
//                                      metadata string above (safetensors.h)
//
// Saving is atomic and durable (temp file, fsync, rename); loading validates the whole file and
// throws DataError naming it when anything is off. The Trainer decides what goes in
// trainer_state; this layer only stores and returns it.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/nn/state_dict.h"
#include "engine/optim/optimizer.h"

namespace tandem::trainer {

// The version this build writes. Bump it when the layout changes incompatibly (and teach
// load_checkpoint to read the old one). Version 1 (before the whole-file checksum) is still
// read: its checksum covers the tensors only, so its metadata (optimizer hyper-parameters,
// scheduler, loop position, RNG) is unverified and Checkpoint::format_version says so.
inline constexpr const char* kCheckpointVersion = "2";
inline constexpr const char* kUnverifiedMetadataVersion = "1";
// Prefix of the optimizer's tensors; a model key may not start with it when an optimizer is saved.
inline constexpr const char* kOptimizerTensorPrefix = "optimizer.";
// The file name ModelCheckpoint(save_last) writes and ckpt_path="last" looks for.
inline constexpr const char* kLastCheckpointName = "last.safetensors";

struct Checkpoint {
  StateDict model;                                     // module.state_dict()
  std::optional<optim::OptimizerStateDict> optimizer;  // optimizer.state_dict(), when there is one
  nlohmann::json scheduler;                            // scheduler.state_dict(); null when none
  nlohmann::json trainer_state;                        // the Trainer's own state; null when none
  // The file's "tandem.version" ("" for plain safetensors weights); on load only.
  std::string format_version;
};

// What a Trainer prints when it restores a checkpoint of format version 1 (empty otherwise).
std::string unverified_metadata_warning(const std::string& path, const Checkpoint& ckpt);

// Writes ckpt to path atomically (see header comment). Tensors may live on any device; they
// are copied to the host. ValueError when a model key collides with the optimizer prefix;
// DataError when the file cannot be written (the old file at path, if any, stays intact).
void save_checkpoint(const std::string& path, const Checkpoint& ckpt);

// Reads a checkpoint into CPU tensors (load_state_dict moves them to each parameter's device).
// A plain safetensors file without Tandem metadata (e.g. weights saved by PyTorch) loads as a
// model-only checkpoint: no optimizer, scheduler and trainer_state null. DataError, naming
// the file, for anything malformed (a byte changed anywhere fails the checksum), a Tandem
// checkpoint without its checksum, or one from a newer Tandem version.
Checkpoint load_checkpoint(const std::string& path);

// The checkpoint ckpt_path="last" means, in dir: "last.safetensors" when it exists, else the
// most recently modified "*.safetensors" (Lightning's fallback when there is no "last" file);
// nullopt when dir is missing or holds none. Temporary files of unfinished saves are ignored.
std::optional<std::string> find_last_checkpoint(const std::string& dir);

}  // namespace tandem::trainer
