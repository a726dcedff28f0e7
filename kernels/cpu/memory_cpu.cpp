// CPU memory: 64-byte aligned host buffers from the caching allocator of host_allocator.h, byte
// copies and fills (strided casting copies: elementwise_copy_cpu.cpp).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/host_allocator.h"

namespace tandem {

CpuBackend& cpu_backend() {
  static CpuBackend b;
  return b;
}

namespace cpu {

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheOn = false;
#else
constexpr bool kCacheOn = true;
#endif

// See host_allocator.h.
class HostBlockCache {
 public:
  static size_t rounded(size_t nbytes) {
    if (nbytes == 0) nbytes = 64;
    const size_t unit = nbytes > (64u << 10) ? 4096 : 64;
    return (nbytes + unit - 1) / unit * unit;
  }

  void* take(size_t size) {
    std::vector<void*> surplus;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.requests;
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        stats_.cached_bytes -= int64_t(size);
        note_live(int64_t(size));
        return p;
      }
      ++stats_.system_allocations;
      const int64_t limit = std::max(2 * stats_.peak_allocated_bytes,
                                     stats_.allocated_bytes + int64_t(size));
      for (auto& [block_size, blocks] : free_) {
        while (!blocks.empty() && stats_.allocated_bytes + stats_.cached_bytes + int64_t(size) > limit) {
          surplus.push_back(blocks.back());
          blocks.pop_back();
          stats_.cached_bytes -= int64_t(block_size);
        }
      }
    }
    for (void* p : surplus) std::free(p);
    void* p = std::aligned_alloc(64, size);
    if (!p) {
      empty();  // retry once with the cache emptied
      p = std::aligned_alloc(64, size);
      if (!p) {
        throw DeviceError("out of host memory: cannot allocate " + std::to_string(size) + " bytes (" +
                          std::to_string(size >> 20) + " MiB) for a tensor on the CPU; make the model or the batch "
                          "smaller, or free memory");
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    note_live(int64_t(size));
    return p;
  }

  void give_back(void* p, size_t size) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.allocated_bytes -= int64_t(size);
      if (kCacheOn && stats_.cached_bytes + int64_t(size) <= kMaxCachedBytes) {
        free_[size].push_back(p);
        stats_.cached_bytes += int64_t(size);
        return;
      }
    }
    std::free(p);
  }

  void empty() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) std::free(p);
    free_.clear();
    stats_.cached_bytes = 0;
  }

  HostAllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

 private:
  void note_live(int64_t size) {
    stats_.allocated_bytes += size;
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  }

  static constexpr int64_t kMaxCachedBytes = int64_t(2) << 30;
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  HostAllocatorStats stats_;
};

HostBlockCache& host_cache() {
  static HostBlockCache* cache = new HostBlockCache();  // never destroyed: tensors may outlive statics
  return *cache;
}

}  // namespace

void* host_alloc(size_t nbytes) { return host_cache().take(HostBlockCache::rounded(nbytes)); }
void host_free(void* p, size_t nbytes) { host_cache().give_back(p, HostBlockCache::rounded(nbytes)); }
HostAllocatorStats host_allocator_stats() { return host_cache().stats(); }
void host_empty_cache() { host_cache().empty(); }
bool host_cache_enabled() { return kCacheOn; }

}  // namespace cpu

void* CpuBackend::allocate(size_t nbytes, int) { return cpu::host_alloc(nbytes); }

void CpuBackend::deallocate(void* p, size_t nbytes, int) { cpu::host_free(p, nbytes); }

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
