// The trainer options' one description: a row per `--trainer.<key>` option with its key, the
// TrainerOptions member it fills, its kind, its default (the member's default), its help line
// and its check. The config section (engine/trainer/trainer_section.cpp), reading a resolved
// config into TrainerOptions and validate_trainer_options (trainer_options.cpp) all run from
// these rows, so an option is written once.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "engine/config/config_schema.h"
#include "engine/trainer/trainer_options.h"

namespace tandem::trainer {

struct TrainerOptionRow {
  // The declared option: key, kind, default, help, choices; its validate runs `problem` on the
  // value read from the flag or file.
  OptionSpec spec;
  // A hardware option (plan_execution resolves it; HardwareOptions holds it).
  bool hardware = false;
  // Fills the member from a value of the declared kind (null included when nullable); throws
  // ConfigError for a value of another shape. Unset for an option that is accepted and unused.
  std::function<void(TrainerOptions&, const YAML::Node&)> read;
  // What is wrong with the member's value ("expected ..."), or "" when it is fine; unset when
  // every value of the kind is allowed.
  std::function<std::string(const TrainerOptions&)> problem;
  // The member's value as messages show it.
  std::function<std::string(const TrainerOptions&)> text;
};

// Every trainer option, in the order --help and --print_config show them.
const std::vector<TrainerOptionRow>& trainer_option_table();

}  // namespace tandem::trainer
