// Template members of Tensor (included at the end of tensor.h).
#pragma once
#include <cstring>
#include <type_traits>

#include "base/error.h"

namespace tandem {

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  if (int64_t(values.size()) != shape_numel(shape))
    throw ShapeError("from_vector: " + std::to_string(values.size()) + " values do not fill shape " +
                     shape_to_string(shape));
  Tensor t = empty(shape, dtype_of<T>::value, Device::cpu());
  if constexpr (std::is_same_v<T, bool>) {
    auto* p = static_cast<uint8_t*>(t.raw_data());
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i] ? 1 : 0;
  } else {
    if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  }
  return device.is_cpu() ? t : t.to(device);
}

template <typename T>
T* Tensor::data_ptr() const {
  if (dtype() != dtype_of<T>::value)
    throw DTypeError(std::string("data_ptr: tensor is ") + dtype_name(dtype()) + ", asked for " +
                     dtype_name(dtype_of<T>::value));
  if (!device().is_cpu()) throw DeviceError("data_ptr: tensor is on " + device().str() + ", not cpu");
  return static_cast<T*>(raw_data());
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = to(Device::cpu()).to(dtype_of<T>::value).contiguous();
  const int64_t n = host.numel();
  std::vector<T> out(static_cast<size_t>(n));
  if constexpr (std::is_same_v<T, bool>) {
    const auto* p = static_cast<const uint8_t*>(host.raw_data());
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] = p[i] != 0;
  } else {
    if (n) std::memcpy(out.data(), host.raw_data(), size_t(n) * sizeof(T));
  }
  return out;
}

}  // namespace tandem
