#include "base/device.h"

#include "base/error.h"

namespace tandem {

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5) {
    const std::string idx = s.substr(5);
    if (idx.find_first_not_of("0123456789") == std::string::npos && idx.size() < 6)
      return cuda(std::stoi(idx));
  }
  throw ConfigError("invalid device '" + s + "'; expected 'cpu', 'cuda' or 'cuda:N' with N >= 0");
}

}  // namespace tandem
