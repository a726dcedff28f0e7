// copy_strided on the CPU: out[i...] = cast(src[i...]) for any dtype pair and any strides
// (src may broadcast with stride 0); same-dtype rows are memcpy'd when both are contiguous.
#include <array>
#include <cstring>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/strided_cpu.h"

namespace tandem {

namespace {

// Reads element i of any dtype as double / writes a double into any dtype.
inline double load_as_double(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::Float32: return static_cast<const float*>(base)[i];
    case DType::Float64: return static_cast<const double*>(base)[i];
    case DType::Float16: return half_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::BFloat16: return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::Int32: return static_cast<const int32_t*>(base)[i];
    case DType::Int64: return double(static_cast<const int64_t*>(base)[i]);
    case DType::UInt8: return static_cast<const uint8_t*>(base)[i];
    case DType::Bool: return static_cast<const uint8_t*>(base)[i] ? 1.0 : 0.0;
  }
  return 0;
}

inline void store_double(void* base, DType t, int64_t i, double v) {
  switch (t) {
    case DType::Float32: static_cast<float*>(base)[i] = float(v); break;
    case DType::Float64: static_cast<double*>(base)[i] = v; break;
    case DType::Float16: static_cast<uint16_t*>(base)[i] = float_to_half(float(v)); break;
    case DType::BFloat16: static_cast<uint16_t*>(base)[i] = float_to_bf16(float(v)); break;
    case DType::Int32: static_cast<int32_t*>(base)[i] = int32_t(v); break;
    case DType::Int64: static_cast<int64_t*>(base)[i] = int64_t(v); break;
    case DType::UInt8: static_cast<uint8_t*>(base)[i] = uint8_t(int64_t(v)); break;
    case DType::Bool: static_cast<uint8_t*>(base)[i] = v != 0.0; break;
  }
}

template <typename T>
void copy_same_type(const TensorView& src, const TensorView& out) {
  const T* s = src.ptr<T>();
  T* o = out.ptr<T>();
  cpu::for_each_row<2>(out.shape, {&src.strides, &out.strides},
                       [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
                         const T* sp = s + off[0];
                         T* op = o + off[1];
                         if (st[0] == 1 && st[1] == 1) {
                           std::memcpy(op, sp, size_t(n) * sizeof(T));
                         } else {
                           for (int64_t i = 0; i < n; ++i) op[i * st[1]] = sp[i * st[0]];
                         }
                       });
}

}  // namespace

void CpuBackend::copy_strided(const TensorView& src, const TensorView& out) {
  if (src.dtype == out.dtype) {
    switch (dtype_size(src.dtype)) {
      case 1: return copy_same_type<uint8_t>(src, out);
      case 2: return copy_same_type<uint16_t>(src, out);
      case 4: return copy_same_type<uint32_t>(src, out);
      case 8: return copy_same_type<uint64_t>(src, out);
    }
  }
  if (src.dtype == DType::Int64 && out.dtype == DType::Int32) {  // exact, no detour through double
    cpu::for_each_row<2>(out.shape, {&src.strides, &out.strides},
                         [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
                           for (int64_t i = 0; i < n; ++i)
                             out.ptr<int32_t>()[off[1] + i * st[1]] = int32_t(src.ptr<int64_t>()[off[0] + i * st[0]]);
                         });
    return;
  }
  cpu::for_each_row<2>(out.shape, {&src.strides, &out.strides},
                       [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
                         for (int64_t i = 0; i < n; ++i)
                           store_double(out.data, out.dtype, off[1] + i * st[1],
                                        load_as_double(src.data, src.dtype, off[0] + i * st[0]));
                       });
}

}  // namespace tandem
