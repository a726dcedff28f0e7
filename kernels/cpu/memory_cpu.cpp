// CPU memory: 64-byte aligned host buffers from a caching allocator, byte copies and fills
// (strided casting copies: elementwise_copy_cpu.cpp).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine/core/error.h"
#include "kernels/cpu/cpu_backend.h"

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
