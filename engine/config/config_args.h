// Command-line flags and --config files into one resolved configuration tree.
//
//   --trainer.devices=2          dotted key = value
//   --trainer.devices "1, 3"     dotted key, value in the next argument
//   --trainer.devices=[0,1]      values starting with [ or { are parsed as YAML
//   --model=cnn                  a section's selector (see SectionSpec::selector)
//   --config run.yaml            YAML with the same tree; repeatable, applied in order
//   --print_config               ask the caller to print the resolved YAML and stop
//   --help, -h                   ask the caller to print help
//
// Precedence: declared defaults < config files (in the order given) < flags, wherever the
// flags appear on the line. Every key is checked against the schema; the first problem is a
// ConfigError naming the flag or file and what is allowed.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "engine/config/config_schema.h"

namespace tandem {

// A flag that belongs to the program rather than to the configuration (e.g. --plugin).
struct AppFlag {
  std::string name;        // without dashes: "plugin"
  std::string help;
  bool takes_value = true;
};

struct ParsedArgs {
  YAML::Node config;                         // the resolved tree
  std::vector<std::string> config_files;     // as given to --config
  bool print_config = false;
  bool help = false;
  std::map<std::string, std::vector<std::string>> app_flags;  // name -> values, in order
};

ParsedArgs parse_args(const ConfigSchema& schema, const std::vector<std::string>& args,
                      const std::vector<AppFlag>& app_flags = {});

// Loads one YAML file into `config`, checking every key against the schema. Throws ConfigError
// naming the file for unreadable files, YAML syntax errors and invalid keys or values.
void merge_config_file(const ConfigSchema& schema, const std::string& path, YAML::Node& config);

// Sets one dotted key (already checked) in the tree.
void set_config_value(YAML::Node& config, const std::string& dotted_key, const YAML::Node& value);

// Reads a dotted key from a resolved tree; a Null node when absent.
YAML::Node get_config_value(const YAML::Node& config, const std::string& dotted_key);

// The tree as block YAML, for --print_config.
std::string config_to_yaml(const YAML::Node& config);

}  // namespace tandem
