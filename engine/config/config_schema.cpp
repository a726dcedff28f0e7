#include "engine/config/config_schema.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "base/edit_distance.h"
#include "base/error.h"
#include "base/named_registry.h"
#include "engine/accelerators/device_parsing.h"

namespace tandem {

namespace {

// Each kind check accepts exactly the scalars the readers can then convert with yaml-cpp's
// as<T>() (a value that passed the check but failed there escaped as YAML::BadConversion), and
// an integer only where yaml-cpp reads the same number a person does: "010" is 8 to yaml-cpp
// (octal) and 10 to a person, "09" nothing to yaml-cpp; both are refused.
bool is_int(const YAML::Node& v) {
  int decimal = 0;
  int64_t read = 0;
  return parse_int_strict(v.Scalar(), &decimal) && YAML::convert<int64_t>::decode(v, read) && read == decimal;
}

bool is_float(const YAML::Node& v) {
  const std::string& s = v.Scalar();
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  double read = 0;
  return errno == 0 && end == s.c_str() + s.size() && YAML::convert<double>::decode(v, read);
}

bool is_bool(const YAML::Node& v) {
  const std::string t = lower_case(v.Scalar());
  bool read = false;
  return (t == "true" || t == "false" || t == "yes" || t == "no" || t == "on" || t == "off") &&
         YAML::convert<bool>::decode(v, read);
}

bool kind_matches(const OptionSpec& o, const YAML::Node& v) {
  switch (o.kind) {
    case ValueKind::Int: return v.IsScalar() && is_int(v);
    case ValueKind::Float:
    case ValueKind::Number: return v.IsScalar() && is_float(v);
    case ValueKind::Bool: return v.IsScalar() && is_bool(v);
    case ValueKind::String: return v.IsScalar();
    case ValueKind::Devices:
      // Scalars and lists of scalars: the accelerator judges "1, 3" vs "abc" and [0, x], since
      // its error can also say what the machine has.
      if (v.IsScalar()) return true;
      if (!v.IsSequence()) return false;
      for (const auto& item : v) {
        if (!item.IsScalar()) return false;
      }
      return true;
    case ValueKind::List: return v.IsSequence();
    case ValueKind::Any: return true;
  }
  return false;
}

}  // namespace

std::string yaml_to_text(const YAML::Node& node) {
  if (!node || node.IsNull()) return "null";
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

std::string describe_kind(const OptionSpec& o) {
  std::string out;
  switch (o.kind) {
    case ValueKind::Int: out = "an integer"; break;
    case ValueKind::Float: out = "a number"; break;
    case ValueKind::Number: out = "an integer count or a float fraction"; break;
    case ValueKind::Bool: out = "true or false"; break;
    case ValueKind::String: out = "a string"; break;
    case ValueKind::Devices:
      out = "an int (3, -1), a string (\"3\", \"1, 3\", \"auto\") or a list of ints ([1, 3])";
      break;
    case ValueKind::List: out = "a list like [512, 256]"; break;
    case ValueKind::Any: out = "any value"; break;
  }
  if (!o.choices.empty()) {
    out = "one of ";
    for (size_t i = 0; i < o.choices.size(); ++i) out += (i ? ", " : "") + o.choices[i];
  }
  if (o.nullable) out += ", or null";
  return out;
}

void ConfigSchema::add_section(SectionSpec s) {
  if (section(s.name) || top_option(s.name)) {
    throw ConfigError("config section '" + s.name + "' is already declared; each section is "
                      "declared once, by the code that owns it");
  }
  sections_.push_back(std::move(s));
}

void ConfigSchema::add_option(OptionSpec o) {
  if (section(o.name) || top_option(o.name)) {
    throw ConfigError("config option '" + o.name + "' is already declared");
  }
  top_options_.push_back(std::move(o));
}

void ConfigSchema::set_default(const std::string& key, const YAML::Node& value) {
  check(key, value);
  const OptionSpec* found = find(key);
  if (!found) throw ConfigError("set_default: '" + key + "' is not a declared option");
  const_cast<OptionSpec*>(found)->default_value.reset(YAML::Clone(value));  // find() returns our own storage
}

const SectionSpec* ConfigSchema::section(const std::string& name) const {
  for (const auto& s : sections_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const OptionSpec* ConfigSchema::top_option(const std::string& name) const {
  for (const auto& o : top_options_) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

const OptionSpec* ConfigSchema::find(const std::string& key) const {
  const size_t dot = key.find('.');
  if (dot == std::string::npos) return top_option(key);
  const SectionSpec* s = section(key.substr(0, dot));
  if (!s) return nullptr;
  const std::string rest = key.substr(dot + 1);
  for (const auto& o : s->options) {
    if (o.name == rest) return &o;
  }
  return nullptr;
}

std::vector<std::string> ConfigSchema::keys() const {
  std::vector<std::string> out;
  for (const auto& o : top_options_) out.push_back(o.name);
  for (const auto& s : sections_) {
    if (!s.selector.empty()) out.push_back(s.name);
    for (const auto& o : s.options) out.push_back(s.name + "." + o.name);
  }
  return out;
}

std::string ConfigSchema::unknown_key_message(const std::string& key, const std::string& prefix,
                                              const std::vector<std::string>& extra) const {
  std::string msg = "unknown " + std::string(prefix.empty() ? "key " : "flag ") + prefix + key;
  std::vector<std::string> candidates = keys();
  candidates.insert(candidates.end(), extra.begin(), extra.end());
  const std::string guess = closest_match(key, candidates);
  if (!guess.empty()) {
    msg += "; did you mean " + prefix + guess + "?";
  } else {
    msg += "; known sections and options: ";
    std::string known;
    for (const auto& o : top_options_) known += (known.empty() ? "" : ", ") + o.name;
    for (const auto& s : sections_) known += (known.empty() ? "" : ", ") + s.name + ".*";
    msg += known;
  }
  return msg + " (--help lists every option)";
}

void check_option_value(const OptionSpec& o, const std::string& key, const YAML::Node& value) {
  const bool is_null = !value || value.IsNull();
  if (is_null && o.nullable) return;
  if (is_null || !kind_matches(o, value)) {
    throw ConfigError("--" + key + "=" + yaml_to_text(value) + " is not valid: expected " +
                      describe_kind(o) + (o.help.empty() ? "" : " (" + o.help + ")"));
  }
  if (!o.choices.empty()) {
    bool found = false;
    for (const auto& c : o.choices) found = found || lower_case(c) == lower_case(value.Scalar());
    if (!found) {
      throw ConfigError("--" + key + "=" + value.Scalar() + " is not valid: expected " +
                        describe_kind(o));
    }
  }
  if (o.validate) o.validate(value, key);
}

void ConfigSchema::check(const std::string& key, const YAML::Node& value) const {
  const OptionSpec* o = find(key);
  if (!o) {
    const size_t dot = key.find('.');
    const SectionSpec* s = dot == std::string::npos ? nullptr : section(key.substr(0, dot));
    if (s && s->open) return;  // class-specific arguments are checked by the class
    throw ConfigError(unknown_key_message(key, "--"));
  }
  check_option_value(*o, key, value);
}

YAML::Node ConfigSchema::defaults() const {
  YAML::Node root(YAML::NodeType::Map);
  for (const auto& o : top_options_) root[o.name] = YAML::Clone(o.default_value);
  for (const auto& s : sections_) {
    YAML::Node section(YAML::NodeType::Map);
    for (const auto& o : s.options) section[o.name] = YAML::Clone(o.default_value);
    root[s.name] = section;
  }
  return root;
}

std::string ConfigSchema::help_text() const {
  std::ostringstream out;
  auto line = [&](const std::string& key, const OptionSpec& o) {
    out << "  --" << key << "  (default: " << yaml_to_text(o.default_value) << ")\n      "
        << o.help << (o.help.empty() ? "" : "; ") << describe_kind(o) << "\n";
  };
  for (const auto& o : top_options_) line(o.name, o);
  for (const auto& s : sections_) {
    out << "\n" << s.name << ": " << s.help << "\n";
    if (!s.selector.empty()) out << "  --" << s.name << "=NAME  (same as --" << s.name << "." << s.selector << ")\n";
    for (const auto& o : s.options) line(s.name + "." + o.name, o);
  }
  return out.str();
}

}  // namespace tandem
