#pragma once
// The items of a list in one string, as error messages and help texts name them: "a, b, c".
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

inline std::string join(const std::vector<std::string>& items, std::string_view separator = ", ") {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

}  // namespace tandem
