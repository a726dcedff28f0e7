// Where a tensor lives. CPU has a single index 0; CUDA indices are relative to
// CUDA_VISIBLE_DEVICES.
#pragma once
#include <cstdint>
#include <string>

namespace tandem {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;  // "cpu", "cuda:1"
  // Parses "cpu", "cuda", "cuda:N"; throws ConfigError naming the accepted forms.
  static Device parse(const std::string& s);
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

}  // namespace tandem
