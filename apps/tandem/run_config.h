// The configuration of `tandem fit|validate|test|predict`: one schema for all four (so a run's
// saved config.yaml drives any of them), LightningCLI's layout:
//   seed_everything, ckpt_path          top-level options
//   trainer.*                           engine/trainer/trainer_section.h
//   model (mlp | cnn | registered), model.*          models/registry.h
//   data.*                              engine/config/data_section.h
//   optimizer (SGD | Adam | AdamW), lr_scheduler     engine/config/optimizer_section.h
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "engine/config/config_args.h"
#include "engine/config/config_schema.h"

namespace tandem::cli {

ConfigSchema make_run_schema();

// Fills the class sections (model, optimizer, lr_scheduler) with the chosen classes' defaults
// and checks their values; after this, the tree is exactly what --print_config shows.
void resolve_run_config(YAML::Node& config);

// `tandem <stage> --help`.
std::string run_help(const std::string& stage, const ConfigSchema& schema);

struct ParsedRun {
  ParsedArgs args;    // the flags as given (app_flags holds e.g. --predictions)
  YAML::Node config;  // resolved: what --print_config shows
};

// The common start of every subcommand: parses the flags and --config files against the run
// schema (`extra_flags` besides --plugin, which every subcommand takes), loads the --plugin
// libraries, prints `help` for --help, resolves the class sections, and prints the result for
// --print_config. nullopt when the command is done after that (--help, --print_config).
std::optional<ParsedRun> parse_run(const std::vector<std::string>& args, std::vector<AppFlag> extra_flags,
                                   const std::function<std::string(const ConfigSchema&)>& help);

}  // namespace tandem::cli
