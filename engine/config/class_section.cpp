#include "engine/config/class_section.h"

#include <cstdlib>
#include <sstream>

#include "base/edit_distance.h"
#include "base/error.h"
#include "base/named_registry.h"

namespace tandem {

namespace {

std::string joined_names(const std::vector<ClassSpec>& classes) {
  std::string out;
  for (const auto& c : classes) out += (out.empty() ? "" : ", ") + c.name;
  return out;
}

std::string joined_options(const ClassSpec& c) {
  std::string out;
  for (const auto& o : c.options) out += (out.empty() ? "" : ", ") + o.name;
  return out.empty() ? "no options" : out;
}

const ClassSpec* find_class(const std::vector<ClassSpec>& classes, const std::string& name) {
  for (const auto& c : classes) {
    if (lower_case(c.name) == lower_case(name)) return &c;
  }
  return nullptr;
}

bool is_null(const YAML::Node& v) { return !v || v.IsNull(); }

}  // namespace

OptionSpec make_option(std::string name, ValueKind kind, YAML::Node default_value, std::string help) {
  OptionSpec o;
  o.name = std::move(name);
  o.kind = kind;
  o.default_value = std::move(default_value);
  o.help = std::move(help);
  return o;
}

void require_range(const YAML::Node& value, const std::string& key, double lo, double hi, bool lo_open,
                   bool hi_open) {
  if (!value.IsScalar()) return;  // the kind check reports non-scalars
  char* end = nullptr;
  const double v = std::strtod(value.Scalar().c_str(), &end);
  const bool ok = (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  if (ok) return;
  std::ostringstream allowed;
  allowed << (lo_open ? "(" : "[") << lo << ", " << hi << (hi_open ? ")" : "]");
  throw ConfigError("--" + key + "=" + value.Scalar() + " is not valid: expected a number in " + allowed.str());
}

SectionSpec class_section(const std::string& section, const std::string& help,
                          const std::vector<ClassSpec>& classes, const std::string& default_class) {
  SectionSpec s;
  s.name = section;
  s.help = help + " (classes: " + joined_names(classes) + ")";
  s.selector = "name";
  OptionSpec name = make_option("name", ValueKind::String,
                                default_class.empty() ? YAML::Node(YAML::NodeType::Null) : YAML::Node(default_class),
                                "which class");
  for (const auto& c : classes) name.choices.push_back(c.name);
  name.nullable = default_class.empty();
  s.options.push_back(name);
  // The union of every class's options; which apply is decided once the class is known.
  for (const auto& c : classes) {
    for (const auto& o : c.options) {
      OptionSpec* existing = nullptr;
      for (auto& u : s.options) {
        if (u.name == o.name) existing = &u;
      }
      if (existing) {
        existing->help += ", " + c.name;
        continue;
      }
      OptionSpec u = o;
      // reset, not operator=: YAML::Node copies share their node, and assigning would null
      // the class's own default.
      u.default_value.reset(YAML::Node(YAML::NodeType::Null));
      u.nullable = true;
      u.help = o.help + "; default depends on the class; taken by " + c.name;
      s.options.push_back(u);
    }
  }
  return s;
}

const ClassSpec* chosen_class(const std::string& section, const std::vector<ClassSpec>& classes,
                              const YAML::Node& config) {
  const YAML::Node node = config[section];
  if (is_null(node) || !node.IsMap() || is_null(node["name"])) return nullptr;
  return find_class(classes, node["name"].Scalar());
}

void resolve_class_section(const std::string& section, const std::vector<ClassSpec>& classes,
                           YAML::Node& config) {
  const YAML::Node node = config[section];
  const bool has_name = node && node.IsMap() && !is_null(node["name"]);
  if (!has_name) {
    if (node && node.IsMap()) {
      for (const auto& entry : node) {
        if (!is_null(entry.second)) {
          throw ConfigError("--" + section + "." + entry.first.Scalar() + " is set but no " + section +
                            " is chosen; choose one with --" + section + "=NAME (one of " +
                            joined_names(classes) + ")");
        }
      }
    }
    config[section] = YAML::Node(YAML::NodeType::Null);
    return;
  }
  const std::string given = node["name"].Scalar();
  const ClassSpec* c = find_class(classes, given);
  if (!c) {
    throw ConfigError("--" + section + "=" + given + " is not valid: expected one of " + joined_names(classes));
  }
  YAML::Node resolved(YAML::NodeType::Map);
  resolved["name"] = c->name;  // canonical spelling: adamw -> AdamW
  for (const auto& o : c->options) {
    const std::string key = section + "." + o.name;
    YAML::Node v = node[o.name] ? YAML::Clone(node[o.name]) : YAML::Node(YAML::NodeType::Null);
    if (is_null(v)) {
      if (is_null(o.default_value) && !o.nullable) {
        throw ConfigError(c->name + " needs --" + key + " (" + o.help + "); for example --" + section + "=" +
                          c->name + " --" + key + "=VALUE");
      }
      v.reset(YAML::Clone(o.default_value));
    } else {
      check_option_value(o, key, v);  // the kind too: entries of lists (trainer.callbacks) skip the parser's check
    }
    if (v.IsSequence()) v.SetStyle(YAML::EmitterStyle::Flow);
    resolved[o.name] = v;
  }
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    bool taken = key == "name";
    for (const auto& o : c->options) taken = taken || o.name == key;
    if (taken || is_null(entry.second)) continue;
    std::vector<std::string> names;
    for (const auto& o : c->options) names.push_back(o.name);
    const std::string guess = closest_match(key, names);
    throw ConfigError("--" + section + "." + key + "=" + yaml_to_text(entry.second) + " does not apply to " +
                      c->name + (guess.empty() ? "" : "; did you mean --" + section + "." + guess + "?") + "; " +
                      c->name + " takes " + joined_options(*c));
  }
  config[section] = resolved;
}

std::string class_section_help(const std::string& section, const std::vector<ClassSpec>& classes) {
  std::ostringstream out;
  for (const auto& c : classes) {
    out << "  --" << section << "=" << c.name << "  " << c.help << "\n";
    for (const auto& o : c.options) {
      out << "      --" << section << "." << o.name << "  (default: "
          << (is_null(o.default_value) && !o.nullable ? "required" : yaml_to_text(o.default_value)) << ")  "
          << o.help << "\n";
    }
  }
  return out.str();
}

}  // namespace tandem
