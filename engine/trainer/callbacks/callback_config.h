// The configuration's `trainer.callbacks` list (LightningCLI's --trainer.callbacks): each entry
// names a callback class and its arguments, in any of these spellings:
//
//   trainer:
//     callbacks:
//       - LearningRateMonitor                                   # a name: the class's defaults
//       - {name: EarlyStopping, monitor: val_acc, mode: max, patience: 3}
//       - class_path: lightning.pytorch.callbacks.ModelCheckpoint  # LightningCLI's spelling
//         init_args: {monitor: val_acc, mode: max, save_top_k: 2}
//
// or as a flag: --trainer.callbacks='[{name: EarlyStopping, monitor: val_loss}]'. The classes
// are ModelCheckpoint, EarlyStopping, LearningRateMonitor and ModelSummary, with the same
// option names and defaults as their C++ options structs. A ModelCheckpoint here replaces the
// Trainer's default one.
#pragma once
#include <memory>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "engine/config/class_section.h"
#include "engine/trainer/callback.h"

namespace tandem::trainer {

// The callback classes the configuration can name, with their options and defaults.
const std::vector<ClassSpec>& callback_classes();

// Resolves config["trainer"]["callbacks"] in place: every entry becomes {name: Class, each of
// the class's options with its value or default}, so --print_config shows what will run and
// reads back to the same tree. A null or missing list stays null. Throws ConfigError naming
// the entry (--trainer.callbacks[1].patience=...) and what is allowed.
void resolve_callbacks_config(YAML::Node& config);

// The callbacks a `trainer.callbacks` list describes (resolved or not). ConfigError as above.
std::vector<std::shared_ptr<Callback>> callbacks_from_config(const YAML::Node& list);

}  // namespace tandem::trainer
