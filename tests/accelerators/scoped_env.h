// Sets (or unsets) environment variables for one test and restores them afterwards, so tests
// of simulated GPUs and launcher variables do not leak into each other.
#pragma once
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

class ScopedEnv {
 public:
  ScopedEnv() = default;
  ScopedEnv(ScopedEnv&& other) noexcept : saved_(std::move(other.saved_)) { other.saved_.clear(); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ScopedEnv& set(const std::string& name, const std::string& value) {
    remember(name);
    setenv(name.c_str(), value.c_str(), 1);
    return *this;
  }
  ScopedEnv& unset(const std::string& name) {
    remember(name);
    unsetenv(name.c_str());
    return *this;
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) setenv(it->first.c_str(), it->second->c_str(), 1);
      else unsetenv(it->first.c_str());
    }
  }

 private:
  void remember(const std::string& name) {
    const char* v = std::getenv(name.c_str());
    saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// N simulated GPUs (optionally some busy) and no launcher variables.
inline ScopedEnv simulated_gpus(int n, const std::string& busy = "") {
  ScopedEnv env;
  env.set("TANDEM_SIMULATE_CUDA_DEVICES", std::to_string(n));
  if (busy.empty()) env.unset("TANDEM_SIMULATE_BUSY_CUDA_DEVICES");
  else env.set("TANDEM_SIMULATE_BUSY_CUDA_DEVICES", busy);
  env.unset("CUDA_VISIBLE_DEVICES");
  return env;
}
