// YAML config trees as JSON, for hparams.yaml and checkpoint metadata (which are JSON inside).
// Scalars become the narrowest JSON type that reads them back: integer, number, bool, null,
// else string; so `lr: 0.001` stays a number and `name: Adam` a string.
#pragma once
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

namespace tandem {

nlohmann::json yaml_to_json(const YAML::Node& node);

}  // namespace tandem
