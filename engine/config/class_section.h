// Class sections: a config section whose options depend on the class it names, LightningCLI's
// `--optimizer=AdamW --optimizer.lr=1e-3` (model, optimizer, lr_scheduler).
//
// The section is declared with `name` as its selector plus the union of every class's options,
// each nullable with a null default, so the parser accepts any of them. After parsing,
// resolve_class_section() picks the chosen class, fills the options left null with that class's
// defaults, rejects options the class does not take, and orders the keys (name first), so
// --print_config shows exactly what will run and reads back to the same tree.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/error.h"
#include "engine/config/config_schema.h"

namespace tandem {

struct ClassSpec {
  std::string name;                  // "AdamW"
  std::string help;
  // Options with this class's defaults. A null default on a non-nullable option means the
  // option is required for this class (StepLR's step_size).
  std::vector<OptionSpec> options;
};

// One "name -> class with options" of the configuration (a model, an optimizer, a scheduler, a
// callback): its entry in the section (name, help, options with defaults and checks) and how a
// resolved section builds it. Build is the builder's signature, e.g.
// std::shared_ptr<optim::Optimizer>(const YAML::Node& section, std::vector<optim::ParamGroup>).
template <typename Build>
struct ConfigClass {
  ClassSpec spec;
  std::function<Build> build;
};

// The specs of a table of ConfigClass, for class_section and resolve_class_section.
template <typename Class>
std::vector<ClassSpec> specs_of(const std::vector<Class>& table) {
  std::vector<ClassSpec> out;
  for (const Class& c : table) out.push_back(c.spec);
  return out;
}

// The entry a resolved section names (its canonical spelling); ConfigError for another name.
template <typename Class>
const Class& config_class(const std::vector<Class>& table, const std::string& section, const std::string& name) {
  for (const Class& c : table) {
    if (c.spec.name == name) return c;
  }
  std::string names;
  for (const Class& c : table) names += (names.empty() ? "" : ", ") + c.spec.name;
  throw ConfigError("--" + section + "=" + name + " is not valid: expected one of " + names);
}

// A section selecting one of `classes` by `name`. `default_class` "" means null (no class,
// e.g. no lr_scheduler), which is then allowed.
SectionSpec class_section(const std::string& section, const std::string& help,
                          const std::vector<ClassSpec>& classes, const std::string& default_class);

// Resolves config[section] in place as described above; throws ConfigError naming the option,
// the class and what the class takes. A section without a class becomes a null node.
void resolve_class_section(const std::string& section, const std::vector<ClassSpec>& classes,
                           YAML::Node& config);

// The class a resolved section names (a pointer into `classes`, which must outlive it);
// nullptr when the section is null.
const ClassSpec* chosen_class(const std::string& section, const std::vector<ClassSpec>& classes,
                              const YAML::Node& config);

// Help text listing each class with its options and defaults.
std::string class_section_help(const std::string& section, const std::vector<ClassSpec>& classes);

// Small builders shared by the sections.
OptionSpec make_option(std::string name, ValueKind kind, YAML::Node default_value, std::string help);
// Throws ConfigError unless the scalar is a number in [lo, hi] (open ends when *_open).
void require_range(const YAML::Node& value, const std::string& key, double lo, double hi,
                   bool lo_open = false, bool hi_open = false);

}  // namespace tandem
