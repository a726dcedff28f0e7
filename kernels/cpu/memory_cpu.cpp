// CPU memory: 64-byte aligned host buffers from a caching allocator, byte copies, fills and
// strided casting copies.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine/core/error.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/strided_cpu.h"

namespace tandem {

CpuBackend& cpu_backend() {
  static CpuBackend b;
  return b;
}

namespace {

// Training allocates the same sizes every step. Freed blocks are kept per rounded size and
// handed out again, so a steady-state step neither calls mmap/munmap nor page-faults (each
// fresh 1 MiB activation used to cost ~256 page faults plus a TLB shootdown on free). Sizes
// round up to 4 KiB multiples above 64 KiB (to 64 B below); the cache holds at most
// kMaxCachedBytes, beyond which blocks go back to the system.
class HostBlockCache {
 public:
  static size_t rounded(size_t nbytes) {
    if (nbytes == 0) nbytes = 64;
    const size_t unit = nbytes > (64u << 10) ? 4096 : 64;
    return (nbytes + unit - 1) / unit * unit;
  }
  void* take(size_t size) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_bytes_ -= size;
        return p;
      }
    }
    void* p = std::aligned_alloc(64, size);
    if (!p) {
      release_all();  // retry once with the cache emptied
      p = std::aligned_alloc(64, size);
      if (!p) {
        throw DeviceError("out of host memory: cannot allocate " + std::to_string(size) + " bytes (" +
                          std::to_string(size >> 20) + " MiB) for a tensor on the CPU; make the model or the batch "
                          "smaller, or free memory");
      }
    }
    return p;
  }
  void give_back(void* p, size_t size) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_bytes_ + size <= kMaxCachedBytes) {
        free_[size].push_back(p);
        cached_bytes_ += size;
        return;
      }
    }
    std::free(p);
  }
  void release_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) std::free(p);
    free_.clear();
    cached_bytes_ = 0;
  }

 private:
  static constexpr size_t kMaxCachedBytes = size_t(2) << 30;
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_bytes_ = 0;
};

HostBlockCache& host_cache() {
  static HostBlockCache* cache = new HostBlockCache();  // never destroyed: tensors may outlive statics
  return *cache;
}

}  // namespace

void* CpuBackend::allocate(size_t nbytes, int) { return host_cache().take(HostBlockCache::rounded(nbytes)); }

void CpuBackend::deallocate(void* p, size_t nbytes, int) { host_cache().give_back(p, HostBlockCache::rounded(nbytes)); }

void CpuBackend::copy_bytes(void* dst, const void* src, size_t nbytes, bool, bool, int) {
  std::memcpy(dst, src, nbytes);
}

void CpuBackend::synchronize(int) {}  // every CPU kernel has finished when it returns

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

void CpuBackend::fill(const TensorView& out, double value) {
  const int64_t n = out.numel();
  switch (out.dtype) {
    case DType::Float16:
    case DType::BFloat16: {
      uint16_t bits = out.dtype == DType::Float16 ? float_to_half(float(value)) : float_to_bf16(float(value));
      std::fill(out.ptr<uint16_t>(), out.ptr<uint16_t>() + n, bits);
      return;
    }
    default:
      cpu::dispatch_all(out.dtype, "fill", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
        T v = out.dtype == DType::Bool ? T(value != 0.0) : T(value);
        std::fill(out.ptr<T>(), out.ptr<T>() + n, v);
      });
  }
}

}  // namespace tandem
