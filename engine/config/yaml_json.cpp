#include "engine/config/yaml_json.h"

#include <cerrno>
#include <cstdlib>

#include "base/named_registry.h"

namespace tandem {

nlohmann::json yaml_to_json(const YAML::Node& node) {
  if (!node || node.IsNull()) return nullptr;
  if (node.IsSequence()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& item : node) out.push_back(yaml_to_json(item));
    return out;
  }
  if (node.IsMap()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& entry : node) out[entry.first.Scalar()] = yaml_to_json(entry.second);
    return out;
  }
  const std::string& s = node.Scalar();
  if (s.empty()) return s;
  char* end = nullptr;
  errno = 0;
  const long long i = std::strtoll(s.c_str(), &end, 10);
  if (errno == 0 && end == s.c_str() + s.size()) return i;
  errno = 0;
  const double d = std::strtod(s.c_str(), &end);
  if (errno == 0 && end == s.c_str() + s.size()) return d;
  const std::string lower = lower_case(s);
  if (lower == "true") return true;
  if (lower == "false") return false;
  if (lower == "null" || lower == "~") return nullptr;
  return s;
}

}  // namespace tandem
