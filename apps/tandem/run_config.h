// The configuration of `tandem fit|validate|test|predict`: one schema for all four (so a run's
// saved config.yaml drives any of them), LightningCLI's layout:
//   seed_everything, ckpt_path          top-level options
//   trainer.*                           engine/config/trainer_section.h
//   model (mlp | cnn | registered), model.*          models/registry.h
//   data.*                              engine/config/data_section.h
//   optimizer (SGD | Adam | AdamW), lr_scheduler     engine/config/optimizer_section.h
#pragma once
#include <string>

#include <yaml-cpp/yaml.h>

#include "engine/config/config_schema.h"

namespace tandem::cli {

ConfigSchema make_run_schema();

// Fills the class sections (model, optimizer, lr_scheduler) with the chosen classes' defaults
// and checks their values; after this, the tree is exactly what --print_config shows.
void resolve_run_config(YAML::Node& config);

// `tandem <stage> --help`.
std::string run_help(const std::string& stage, const ConfigSchema& schema);

}  // namespace tandem::cli
