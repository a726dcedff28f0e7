// A decorator of a Backend that forwards every call to the backend it wraps and records which
// kernels were called: how the op harness proves that each kernel of kernels/kernel_list.def is
// reached by some op case. Generated from the list, like Backend itself.
#pragma once
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace tandem::testing {

class CountingBackend final : public Backend {
 public:
  explicit CountingBackend(Backend& inner) : inner_(inner) {}
  DeviceType type() const override { return inner_.type(); }
  const char* name() const override { return inner_.name(); }

#define TANDEM_BACKEND_MEMORY(ret, name, params, args) \
  ret name params override { return inner_.name args; }
#define TANDEM_KERNEL(name, params, args) \
  void name params override {             \
    record(#name);                        \
    inner_.name args;                     \
  }
#include "kernels/kernel_list.def"

  // Every kernel of the list, in list order (memory methods are not kernels).
  static const std::vector<std::string>& listed_kernels() {
    static const std::vector<std::string> names = {
#define TANDEM_BACKEND_MEMORY(ret, name, params, args)
#define TANDEM_KERNEL(name, params, args) #name,
#include "kernels/kernel_list.def"
    };
    return names;
  }

  bool reached(const std::string& kernel) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return reached_.count(kernel) != 0;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    reached_.clear();
  }

 private:
  void record(const char* kernel) {
    std::lock_guard<std::mutex> lock(mutex_);
    reached_.insert(kernel);
  }
  Backend& inner_;
  mutable std::mutex mutex_;
  std::set<std::string> reached_;
};

// Routes backend_for(type) to `backend` for the guard's lifetime.
class BackendOverride {
 public:
  BackendOverride(DeviceType type, Backend& backend) : type_(type), previous_(override_backend_for(type, &backend)) {}
  ~BackendOverride() { override_backend_for(type_, previous_); }
  BackendOverride(const BackendOverride&) = delete;
  BackendOverride& operator=(const BackendOverride&) = delete;

 private:
  DeviceType type_;
  Backend* previous_;
};

}  // namespace tandem::testing
