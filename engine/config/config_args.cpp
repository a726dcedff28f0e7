#include "engine/config/config_args.h"

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "base/named_registry.h"

namespace tandem {

namespace {

// A flag's text as a YAML node: lists, maps and quoted strings ('"3"') are parsed as YAML,
// "null"/"none"/"~" are null, and everything else stays a plain scalar (so
// `--trainer.default_root_dir=a: b` is just a string).
YAML::Node flag_value(const std::string& key, const std::string& text) {
  const std::string lower = lower_case(text);
  if (lower == "null" || lower == "none" || lower == "~") return YAML::Node(YAML::NodeType::Null);
  const bool quoted = text.size() >= 2 && (text.front() == '"' || text.front() == '\'') &&
                      text.back() == text.front();
  if (quoted || (!text.empty() && (text.front() == '[' || text.front() == '{'))) {
    try {
      return YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw ConfigError("--" + key + "=" + text + " is not valid YAML (" + e.msg +
                        "); write lists like [0, 1] and quoted strings like '\"3\"'");
    }
  }
  return YAML::Node(text);
}

// The dotted key a config entry sets: "model" with a selector becomes "model.<selector>".
std::string resolve_key(const ConfigSchema& schema, const std::string& key, const YAML::Node& value) {
  if (key.find('.') != std::string::npos) return key;
  const SectionSpec* s = schema.section(key);
  if (s && !s->selector.empty() && (!value || value.IsScalar() || value.IsNull())) {
    return key + "." + s->selector;
  }
  if (s) {
    throw ConfigError("--" + key + " is a section, not an option; set its options like --" + key +
                      "." + (s->options.empty() ? std::string("<option>") : s->options.front().name) + "=...");
  }
  return key;
}

// A name-with-options value as a mapping: "bagua" -> {name: bagua}; a mapping is copied.
YAML::Node as_named_mapping(const YAML::Node& value) {
  if (value && value.IsMap()) return YAML::Clone(value);
  YAML::Node mapping(YAML::NodeType::Map);
  mapping["name"] = YAML::Clone(value);
  return mapping;
}

// `--trainer.strategy.algorithm=x`: the option `trainer.strategy` when it takes sub-options,
// with `sub` set to "algorithm"; nullptr otherwise.
const OptionSpec* sub_option_parent(const ConfigSchema& schema, const std::string& key, std::string* parent,
                                    std::string* sub) {
  const size_t last = key.rfind('.');
  if (last == std::string::npos || key.find('.') == last) return nullptr;
  const OptionSpec* option = schema.find(key.substr(0, last));
  if (!option || !option->takes_sub_options) return nullptr;
  *parent = key.substr(0, last);
  *sub = key.substr(last + 1);
  return option;
}

// `prefix` is "--" for flags and "" for config-file keys, so suggestions read right in both;
// `extra` are the program's own flags, which a mistyped flag may have meant.
void check_and_set(const ConfigSchema& schema, YAML::Node& config, const std::string& key,
                   const YAML::Node& value, const std::string& prefix,
                   const std::vector<std::string>& extra = {}) {
  const std::string resolved = resolve_key(schema, key, value);
  std::string parent, sub;
  if (const OptionSpec* option = sub_option_parent(schema, resolved, &parent, &sub)) {
    if (sub.empty() || sub == "name" || !value.IsScalar()) {
      throw ConfigError(prefix + resolved + "=" + yaml_to_text(value) + " is not valid: set an option of " + parent +
                        " to a single value, like " + prefix + parent + ".<option>=VALUE (and its name with " +
                        prefix + parent + "=NAME)");
    }
    YAML::Node mapping = as_named_mapping(get_config_value(config, parent));
    mapping[sub] = YAML::Clone(value);
    check_option_value(*option, parent, mapping);
    set_config_value(config, parent, mapping);
    return;
  }
  const size_t dot = resolved.find('.');
  const SectionSpec* section = dot == std::string::npos ? nullptr : schema.section(resolved.substr(0, dot));
  if (!schema.find(resolved) && !(section && section->open)) {
    throw ConfigError(schema.unknown_key_message(resolved, prefix, extra));
  }
  schema.check(resolved, value);
  const OptionSpec* option = schema.find(resolved);
  const YAML::Node current = get_config_value(config, resolved);
  if (option && option->takes_sub_options && value.IsScalar() && current.IsMap()) {
    // A new name keeps the options set before it (flags apply after config files).
    YAML::Node mapping = YAML::Clone(current);
    mapping["name"] = YAML::Clone(value);
    set_config_value(config, resolved, mapping);
    return;
  }
  set_config_value(config, resolved, value);
}

// A config file's key as text. YAML allows keys that are lists or maps (`? [a, b]: 1`), which
// no option has: a ConfigError naming the line (as<std::string>() threw BadConversion);
// merge_config_file adds the file.
std::string file_key(const YAML::Node& key) {
  if (!key.IsScalar()) {
    throw ConfigError("the key at line " + std::to_string(key.Mark().line + 1) + " is " + yaml_to_text(key) +
                      "; keys are option names like 'trainer' or 'max_epochs'");
  }
  return key.Scalar();
}

}  // namespace

void set_config_value(YAML::Node& config, const std::string& key, const YAML::Node& value) {
  const size_t dot = key.find('.');
  if (dot == std::string::npos) {
    config[key] = value;
    return;
  }
  YAML::Node section = config[key.substr(0, dot)];
  if (!section.IsMap()) section = YAML::Node(YAML::NodeType::Map);
  section[key.substr(dot + 1)] = value;
  config[key.substr(0, dot)] = section;
}

YAML::Node get_config_value(const YAML::Node& config, const std::string& key) {
  const size_t dot = key.find('.');
  if (dot == std::string::npos) {
    return config[key] ? YAML::Node(config[key]) : YAML::Node(YAML::NodeType::Null);
  }
  const YAML::Node section = config[key.substr(0, dot)];
  if (!section || !section.IsMap() || !section[key.substr(dot + 1)]) {
    return YAML::Node(YAML::NodeType::Null);
  }
  return section[key.substr(dot + 1)];
}

void merge_config_file(const ConfigSchema& schema, const std::string& path, YAML::Node& config) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw ConfigError("--config " + path + " is a directory; give a YAML file, e.g. " +
                      (std::filesystem::path(path) / "config.yaml").string());
  }
  std::ifstream in(path);
  if (!in) throw ConfigError("--config " + path + ": cannot open the file; check the path");
  YAML::Node file;
  try {
    file = YAML::Load(in);
  } catch (const YAML::Exception& e) {
    throw ConfigError("--config " + path + ": not valid YAML at line " + std::to_string(e.mark.line + 1) +
                      ": " + e.msg);
  }
  // An empty file is refused rather than read as "no changes": it is what a config.yaml written
  // on a full disk used to look like, and running the defaults instead would go unnoticed.
  if (!file || file.IsNull()) {
    throw ConfigError("--config " + path + " is empty; a config file holds a mapping like 'trainer: {max_epochs: 5}' "
                      "(`tandem fit --print_config` writes a complete one)");
  }
  if (!file.IsMap()) {
    throw ConfigError("--config " + path + ": the top level must be a mapping like 'trainer: {devices: 2}', got " +
                      (file.IsSequence() ? std::string("a list") : "the value '" + yaml_to_text(file) + "'"));
  }
  for (const auto& entry : file) {
    const YAML::Node& value = entry.second;
    try {
      const std::string key = file_key(entry.first);
      if (schema.section(key) && value.IsMap()) {
        for (const auto& option : value) {
          check_and_set(schema, config, key + "." + file_key(option.first), option.second, "");
        }
      } else {
        check_and_set(schema, config, key, value, "");
      }
    } catch (const ConfigError& e) {
      // Same checks as flags, but the message must point at the file, not at a flag.
      std::string msg = e.what();
      if (msg.rfind("--", 0) == 0) msg = msg.substr(2);
      throw ConfigError("--config " + path + ": " + msg);
    }
  }
}

ParsedArgs parse_args(const ConfigSchema& schema, const std::vector<std::string>& args,
                      const std::vector<AppFlag>& app_flags) {
  ParsedArgs parsed;
  std::vector<std::pair<std::string, std::string>> settings;  // applied after the files
  auto find_app_flag = [&](const std::string& name) -> const AppFlag* {
    for (const auto& f : app_flags) {
      if (f.name == name) return &f;
    }
    return nullptr;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      parsed.help = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      throw ConfigError("unexpected argument '" + arg + "'; options look like --trainer.devices=2 "
                        "(--help lists them)");
    }
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const AppFlag* app = find_app_flag(key);
    if (key == "print_config" || (app && !app->takes_value)) {
      if (eq != std::string::npos) throw ConfigError("--" + key + " takes no value");
      if (key == "print_config") parsed.print_config = true;
      else parsed.app_flags[key].push_back("");
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
      value = args[++i];
    } else {
      throw ConfigError("--" + key + " needs a value, like --" + key + "=VALUE");
    }
    if (key == "config") {
      parsed.config_files.push_back(value);
    } else if (app) {
      parsed.app_flags[key].push_back(value);
    } else {
      settings.emplace_back(key, value);
    }
  }
  parsed.config = schema.defaults();
  for (const auto& file : parsed.config_files) merge_config_file(schema, file, parsed.config);
  for (const auto& [key, value] : settings) {
    // Unknown flags may be typos of the program's own flags (--plugn) as well as of options.
    std::vector<std::string> own{"config", "print_config", "help"};
    for (const auto& f : app_flags) own.push_back(f.name);
    check_and_set(schema, parsed.config, key, flag_value(key, value), "--", own);
  }
  return parsed;
}

std::string config_to_yaml(const YAML::Node& config) {
  YAML::Emitter out;
  out << config;
  return std::string(out.c_str()) + "\n";
}

}  // namespace tandem
