#include "engine/config/data_section.h"

#include "engine/config/class_section.h"
#include "engine/config/yaml_json.h"

namespace tandem {

namespace {

std::string help_for(const std::string& key) {
  if (key == "root") return "directory holding the four Fashion-MNIST IDX files (raw or .gz)";
  if (key == "batch_size") return "examples per batch, for every loader";
  if (key == "val_size") return "validation examples taken out of the 60k training images (0: none)";
  if (key == "seed") return "seed of the train/val split and of the training shuffle";
  if (key == "normalize") return "(x/255 - mean)/std; false: x/255";
  if (key == "flatten") return "inputs [B, 784] instead of [B, 1, 28, 28] (every model takes both)";
  if (key == "prefetch") return "batches each loader prepares ahead on a background thread (0: none)";
  if (key == "shuffle") return "shuffle the training data each epoch";
  if (key == "pin_memory") return "batches in page-locked memory when a GPU is visible (one async copy to it)";
  return "";
}

}  // namespace

SectionSpec data_section() {
  SectionSpec s;
  s.name = "data";
  s.help = "the Fashion-MNIST data module";
  const nlohmann::json defaults = data::FashionMNISTOptions{}.to_json();
  // The struct's order, not the JSON object's alphabetical one.
  for (const char* key : {"root", "batch_size", "val_size", "seed", "normalize", "flatten", "prefetch", "shuffle", "pin_memory"}) {
    if (!defaults.contains(key)) continue;
    const nlohmann::json& v = defaults[key];
    ValueKind kind = v.is_boolean() ? ValueKind::Bool : v.is_number_integer() ? ValueKind::Int
                   : v.is_number() ? ValueKind::Float : ValueKind::String;
    YAML::Node value = v.is_string() ? YAML::Node(v.get<std::string>()) : YAML::Node(v.dump());
    s.options.push_back(make_option(key, kind, value, help_for(key)));
  }
  // Any key the struct gains later still reaches the CLI, with its default.
  for (const auto& [key, v] : defaults.items()) {
    bool declared = false;
    for (const auto& o : s.options) declared = declared || o.name == key;
    if (!declared) {
      s.options.push_back(make_option(key, ValueKind::Any,
                                      v.is_string() ? YAML::Node(v.get<std::string>()) : YAML::Node(v.dump()), ""));
    }
  }
  return s;
}

data::FashionMNISTOptions data_options_from_config(const YAML::Node& config) {
  const YAML::Node section = config["data"];
  nlohmann::json values = section && section.IsMap() ? yaml_to_json(section) : nlohmann::json::object();
  // root is a path even when it reads like a number, so it bypasses the scalar typing.
  values.erase("root");
  data::FashionMNISTOptions options = data::FashionMNISTOptions::from_json(values);
  if (section && section["root"] && section["root"].IsScalar()) options.root = section["root"].Scalar();
  options.validate();
  return options;
}

}  // namespace tandem
