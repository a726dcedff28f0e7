// dtype -> C++ type dispatch for CPU kernels:
//   cpu::dispatch_float(dtype, "kernel", [&](auto tag) { using T = TANDEM_TYPE(tag); ... });
// runs the body with T = float or double and throws DTypeError for other dtypes;
// dispatch_all adds int32, int64 and uint8 (also used for bool).
#pragma once
#include <cstdint>
#include <string>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/cpu/thread_pool.h"

#define TANDEM_TYPE(tag) typename decltype(tag)::type

namespace tandem::cpu {

template <typename T> struct TypeTag { using type = T; };

// Below this many elements, kernels stay on one thread (handing work to the pool costs more).
constexpr int64_t kParallelGrain = 1 << 18;

template <typename F>
decltype(auto) dispatch_float(DType dtype, const char* kernel, F&& body) {
  switch (dtype) {
    case DType::Float32: return body(TypeTag<float>{});
    case DType::Float64: return body(TypeTag<double>{});
    default: break;
  }
  const bool half = dtype == DType::Float16 || dtype == DType::BFloat16;
  throw DTypeError(std::string(kernel) + " on the CPU supports float32 and float64, got " + dtype_name(dtype) +
                   (half ? " (half types are storage-only on the CPU; cast to float32 first)" : ""));
}

template <typename F>
decltype(auto) dispatch_all(DType dtype, const char* kernel, F&& body) {
  switch (dtype) {
    case DType::Float32: return body(TypeTag<float>{});
    case DType::Float64: return body(TypeTag<double>{});
    case DType::Int32: return body(TypeTag<int32_t>{});
    case DType::Int64: return body(TypeTag<int64_t>{});
    case DType::UInt8:
    case DType::Bool: return body(TypeTag<uint8_t>{});
    default: break;
  }
  throw DTypeError(std::string(kernel) + " on the CPU does not support " + dtype_name(dtype) +
                   "; cast to float32 first");
}

}  // namespace tandem::cpu
