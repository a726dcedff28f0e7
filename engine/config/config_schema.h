// ConfigSchema: the declared shape of a run's configuration, LightningCLI style.
//
// A configuration is a YAML tree of sections ("trainer", "model", "data", "optimizer", ...)
// holding options, plus a few top-level options ("seed_everything").
// Every key is declared with a default, a kind and a help line, so that unknown keys can be
// rejected with a suggestion, bad values can say what is allowed, and `--print_config` can show
// the complete resolved tree. Sections are registered by whoever owns them; the trainer's is
// declared in trainer_section.h.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace tandem {

enum class ValueKind {
  Int,        // 3
  Float,      // 0.5, 1e-3
  Number,     // an int or a float (limit_train_batches: a count or a fraction)
  Bool,       // true/false (also yes/no, on/off)
  String,     // any scalar; `choices` narrows it
  Devices,    // an int, a string ("1, 3", "auto") or a list of ints
  List,       // a YAML sequence ([512, 256])
  Any,        // anything, checked by `validate` if at all
};

struct OptionSpec {
  std::string name;               // key inside its section: "devices"
  ValueKind kind = ValueKind::String;
  YAML::Node default_value;       // a Null node means "null" (not set)
  std::string help;
  std::vector<std::string> choices;  // allowed strings (case-insensitive); empty: any
  bool nullable = false;          // whether null is allowed
  // Extra check after the kind check; throws ConfigError. Gets the dotted key for messages.
  std::function<void(const YAML::Node& value, const std::string& key)> validate;
  // A named choice with options of its own (trainer.strategy): the value is a name, or a mapping
  // {name: ..., key: value, ...}; `--trainer.strategy.algorithm=x` sets one key of that mapping
  // and `--trainer.strategy=bagua` its name. Whoever builds the named object checks the keys.
  bool takes_sub_options = false;
};

struct SectionSpec {
  std::string name;               // "trainer"
  std::string help;
  std::vector<OptionSpec> options;
  // When set, `--model=cnn` (or `model: cnn` in YAML) means `--model.<selector>=cnn`.
  std::string selector;
  // When true, keys not declared in `options` are accepted as they are (class-specific init
  // arguments, e.g. model.hidden for one model but not another).
  bool open = false;
};

class ConfigSchema {
 public:
  // Adds a section; throws ConfigError if the name is taken (by a section or a top option).
  void add_section(SectionSpec section);
  // Adds a top-level option such as seed_everything.
  void add_option(OptionSpec option);

  // Changes a declared option's default (a program's own defaults, e.g. `tandem fit`'s
  // max_epochs); checks the value like a flag. Throws ConfigError for an undeclared key.
  void set_default(const std::string& dotted_key, const YAML::Node& value);

  const SectionSpec* section(const std::string& name) const;
  const OptionSpec* top_option(const std::string& name) const;
  // The option for "trainer.devices" or "seed_everything"; nullptr when undeclared (also for
  // keys accepted only because their section is open).
  const OptionSpec* find(const std::string& dotted_key) const;

  // Every declared dotted key, for suggestions and help.
  std::vector<std::string> keys() const;

  // Checks `value` for `dotted_key` (kind, choices, validate); throws ConfigError saying what
  // was given and what is allowed. Unknown keys throw with the closest valid key suggested.
  void check(const std::string& dotted_key, const YAML::Node& value) const;

  // The tree of all defaults.
  YAML::Node defaults() const;

  // Help text: every option with its default and help line.
  std::string help_text() const;

  // "unknown flag --x; did you mean --y?" for an undeclared key; `prefix` is "--" for flags,
  // "" for config-file keys. `extra` adds candidates that are not options (--config, --plugin).
  std::string unknown_key_message(const std::string& dotted_key, const std::string& prefix,
                                  const std::vector<std::string>& extra = {}) const;

 private:
  std::vector<SectionSpec> sections_;
  std::vector<OptionSpec> top_options_;
};

// Short description of a kind, for messages: "an integer", "true or false", ...
std::string describe_kind(const OptionSpec& option);

// Checks one value against its option: null (when nullable), kind, choices, then validate.
// `key` is the dotted key the message names ("trainer.max_epochs"). Throws ConfigError saying
// what was given and what is allowed.
void check_option_value(const OptionSpec& option, const std::string& key, const YAML::Node& value);

// A scalar as text ("null" for a Null node, flow YAML for sequences and maps).
std::string yaml_to_text(const YAML::Node& node);

}  // namespace tandem
