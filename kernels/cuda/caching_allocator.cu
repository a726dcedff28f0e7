// The caching allocator (caching_allocator.h): per-device free lists by size class, stream-
// ordered reuse on the compute stream, event-guarded reuse for blocks other streams touched, and
// a pinned host cache for staging copies.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"

namespace tandem::cuda {

namespace {

constexpr size_t kMinBlock = 512;

// Rounds a request up to its size class: 512-byte multiples up to 2 KiB, then quarters of the
// request's power of two (so repeated shapes hit the same class and waste stays under 25%).
size_t size_class(size_t n) {
  n = n < kMinBlock ? kMinBlock : (n + kMinBlock - 1) / kMinBlock * kMinBlock;
  if (n <= 4 * kMinBlock) return n;
  size_t base = 1;
  while (base * 2 < n) base *= 2;  // base < n <= 2 * base
  const size_t quarter = base / 4;
  return (n + quarter - 1) / quarter * quarter;
}

bool poison_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TANDEM_CUDA_POISON");
    return v && std::string(v) == "1";
  }();
  return on;
}

std::string mib(int64_t bytes) { return std::to_string(bytes / (1 << 20)) + " MiB"; }

// A freed block that waits for events on the streams that used it before it is reused.
struct PendingBlock {
  void* ptr;
  size_t size;
  std::vector<cudaEvent_t> events;
};

bool events_done(const PendingBlock& b) {
  for (cudaEvent_t e : b.events)
    if (cudaEventQuery(e) == cudaErrorNotReady) {
      // cudaErrorNotReady is recorded as the thread's last runtime error; left there, the next
      // TANDEM_CUDA_CHECK_LAUNCH (cudaGetLastError) or CUB call would report it as a failure.
      cudaGetLastError();
      return false;
    }
  return true;
}

void destroy_events(PendingBlock& b) {
  for (cudaEvent_t e : b.events) cudaEventDestroy(e);
  b.events.clear();
}

using FreeLists = std::map<size_t, std::vector<void*>>;  // size class -> free blocks

// Moves the pending blocks whose streams are done with them onto the free lists.
void move_finished_to_free(std::vector<PendingBlock>& pending, FreeLists& free_lists) {
  for (size_t i = 0; i < pending.size();) {
    if (events_done(pending[i])) {
      destroy_events(pending[i]);
      free_lists[pending[i].size].push_back(pending[i].ptr);
      pending[i] = std::move(pending.back());
      pending.pop_back();
    } else {
      ++i;
    }
  }
}

struct LiveBlock {
  size_t size;
  std::vector<cudaStream_t> other_streams;
  int pool = 0;  // the capture pool it came from; 0: the ordinary free lists
};

// The memory of one captured graph (caching_allocator.h): its own free lists, the outside
// blocks freed while it was captured, and the pinned buffers its copies read.
struct CapturePool {
  FreeLists free;
  std::vector<std::pair<void*, size_t>> held;
  std::vector<void*> held_pinned;
};

void pinned_release_later(void* p, int device) noexcept;

class DeviceCache {
 public:
  explicit DeviceCache(int device) : device_(device) {}

  void* allocate(size_t nbytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    collect_pending();
    const size_t size = size_class(nbytes);
    // The capturing thread allocates from the capture's pool first; a block from the ordinary
    // free lists may join the pool (nothing else holds it, and later work queues behind).
    const bool for_capture = capturing_pool_ != 0 && std::this_thread::get_id() == capturing_thread_;
    void* p = for_capture ? take_free(pools_[capturing_pool_].free, size) : nullptr;
    if (!p) p = take_free(free_, size);
    if (!p) p = driver_malloc(size, nbytes);
    live_[p] = LiveBlock{size, {}, for_capture ? capturing_pool_ : 0};
    ++stats_.requests;
    stats_.allocated_bytes += int64_t(size);
    if (stats_.allocated_bytes > stats_.peak_allocated_bytes) stats_.peak_allocated_bytes = stats_.allocated_bytes;
    if (poison_enabled()) {
      DeviceGuard guard(device_);
      TANDEM_CUDA_CHECK(cudaMemsetAsync(p, 0xFF, size, compute_stream(device_)));
    }
    return p;
  }

  void release(void* p) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(p);
    if (it == live_.end()) return;  // not ours: never throw on a destructor path
    const LiveBlock block = it->second;
    live_.erase(it);
    stats_.allocated_bytes -= int64_t(block.size);
    if (block.pool != 0) {
      auto pool = pools_.find(block.pool);
      if (pool != pools_.end()) {  // reserved for the graph's replays while it lives
        pool->second.free[block.size].push_back(p);
        return;
      }
    }
    // An outside block, or one of a pool whose graph is gone: while a capture is underway a
    // captured kernel may use it, so the capture's pool keeps it.
    if (capturing_pool_ != 0) {
      pools_[capturing_pool_].held.emplace_back(p, block.size);
      return;
    }
    if (block.other_streams.empty()) {
      free_[block.size].push_back(p);  // stream-ordered reuse on the compute stream
      return;
    }
    PendingBlock pending{p, block.size, {}};
    for (cudaStream_t s : block.other_streams) {
      cudaEvent_t e;
      if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) continue;
      if (cudaEventRecord(e, s) != cudaSuccess) {
        cudaEventDestroy(e);
        continue;
      }
      pending.events.push_back(e);
    }
    pending_.push_back(std::move(pending));
  }

  void record_stream(void* p, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(p);
    if (it == live_.end() || stream == compute_stream(device_)) return;
    for (cudaStream_t s : it->second.other_streams)
      if (s == stream) return;
    it->second.other_streams.push_back(stream);
  }

  AllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void reset_peaks() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
  }
  void empty() {
    std::lock_guard<std::mutex> lock(mutex_);
    release_cached_locked(/*wait_for_pending=*/false);
  }

  int begin_capture() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (capturing_pool_ != 0)
      throw DeviceError("CUDA graph capture on cuda:" + std::to_string(device_) + ": another capture is underway");
    capturing_pool_ = ++last_pool_;
    capturing_thread_ = std::this_thread::get_id();
    pools_[capturing_pool_];
    return capturing_pool_;
  }
  void end_capture() {
    std::lock_guard<std::mutex> lock(mutex_);
    capturing_pool_ = 0;
  }
  bool capturing() {
    std::lock_guard<std::mutex> lock(mutex_);
    return capturing_pool_ != 0;
  }
  void hold_pinned(void* p) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (capturing_pool_ != 0) {
        pools_[capturing_pool_].held_pinned.push_back(p);
        return;
      }
    }
    pinned_release_later(p, device_);
  }
  // The graph is gone: its free and held blocks go to the ordinary free lists; blocks still
  // owned by tensors follow when those are freed (their pool no longer exists).
  void release_pool(int pool) noexcept {
    std::vector<void*> pinned;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = pools_.find(pool);
      if (it == pools_.end()) return;
      for (auto& [size, blocks] : it->second.free)
        for (void* p : blocks) free_[size].push_back(p);
      for (auto& [p, size] : it->second.held) free_[size].push_back(p);
      pinned = std::move(it->second.held_pinned);
      pools_.erase(it);
      if (capturing_pool_ == pool) capturing_pool_ = 0;
    }
    for (void* p : pinned) pinned_release_later(p, device_);
  }

 private:
  static void* take_free(FreeLists& lists, size_t size) {
    auto it = lists.find(size);
    if (it == lists.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    return p;
  }

  void collect_pending() { move_finished_to_free(pending_, free_); }

  // Returns free blocks to the driver. cudaFree waits for the device, so queued kernels that
  // still use a block (stream-ordered reuse) finish first.
  void release_cached_locked(bool wait_for_pending) {
    DeviceGuard guard(device_);
    if (wait_for_pending) {
      for (PendingBlock& b : pending_) {
        for (cudaEvent_t e : b.events) cudaEventSynchronize(e);
        destroy_events(b);
        free_[b.size].push_back(b.ptr);
      }
      pending_.clear();
    }
    for (auto& [size, blocks] : free_) {
      for (void* p : blocks) {
        cudaFree(p);
        stats_.reserved_bytes -= int64_t(size);
      }
      blocks.clear();
    }
  }

  void* driver_malloc(size_t size, size_t requested) {
    DeviceGuard guard(device_);
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, size);
    // No flush while a CUDA graph is captured (it would wait on events and free blocks under
    // the capture): the out-of-memory error fails the capture, and the step then runs eagerly.
    if (err == cudaErrorMemoryAllocation && capturing_pool_ == 0) {
      cudaGetLastError();
      ++stats_.cache_flushes;
      release_cached_locked(/*wait_for_pending=*/true);
      err = cudaMalloc(&p, size);
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      throw DeviceError("CUDA out of memory on cuda:" + std::to_string(device_) + ": tried to allocate " +
                        std::to_string(requested) + " bytes (" + mib(int64_t(requested)) + "); Tandem holds " +
                        mib(stats_.allocated_bytes) + " in tensors and " + mib(stats_.reserved_bytes) +
                        " reserved; the device has " + mib(int64_t(free_bytes)) + " free of " +
                        mib(int64_t(total_bytes)) + " (" + cudaGetErrorString(err) +
                        "). Use a smaller batch size, precision=bf16-mixed, or free other processes' memory");
    }
    ++stats_.driver_allocations;
    stats_.reserved_bytes += int64_t(size);
    if (stats_.reserved_bytes > stats_.peak_reserved_bytes) stats_.peak_reserved_bytes = stats_.reserved_bytes;
    return p;
  }

  const int device_;
  std::mutex mutex_;
  FreeLists free_;
  std::unordered_map<void*, LiveBlock> live_;
  std::vector<PendingBlock> pending_;
  AllocatorStats stats_;
  std::map<int, CapturePool> pools_;
  int capturing_pool_ = 0, last_pool_ = 0;
  std::thread::id capturing_thread_;
};

// Set when the first device cache is made (allocator_started).
std::atomic<bool> g_started{false};

// Never destroyed: tensors released during static destruction still find their cache, and no
// cudaFree runs after the CUDA runtime has shut down.
DeviceCache& cache_for(int device) {
  static std::mutex mutex;
  static auto* caches = new std::map<int, DeviceCache*>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = caches->find(device);
  if (it == caches->end()) {
    if (caches->empty()) g_started.store(true);
    it = caches->emplace(device, new DeviceCache(device)).first;
  }
  return *it->second;
}

// ---- pinned host memory ----

// Appends to b.events an event recorded on `stream` (of `device`, or of the current device when
// device < 0). When no event can be recorded (e.g. while the runtime shuts down), waits for the
// stream instead: a block is never handed out again under a copy that may still read it.
// Never throws: it runs on tensor destructors.
void record_or_wait(PendingBlock& b, cudaStream_t stream, int device) noexcept {
  int previous = -1;
  const bool switched = device >= 0 && cudaGetDevice(&previous) == cudaSuccess && previous != device &&
                        cudaSetDevice(device) == cudaSuccess;
  bool recorded = false;
  cudaEvent_t e;
  if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess) {
    recorded = cudaEventRecord(e, stream) == cudaSuccess;
    if (recorded) {
      b.events.push_back(e);
    } else {
      cudaEventDestroy(e);
    }
  }
  if (!recorded) {
    cudaGetLastError();  // leave no stale error for the next launch check
    cudaStreamSynchronize(stream);
    cudaGetLastError();
  }
  if (switched) cudaSetDevice(previous);
}

class PinnedCache {
 public:
  void* allocate(size_t nbytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    move_finished_to_free(pending_, free_);
    const size_t size = size_class(nbytes);
    auto it = free_.find(size);
    void* p = nullptr;
    if (it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
    } else {
      TANDEM_CUDA_CHECK(cudaHostAlloc(&p, size, cudaHostAllocDefault));
    }
    live_[address(p)] = LivePinned{size, {}};
    return p;
  }

  void release(void* p, cudaStream_t stream) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(address(p));
    if (it == live_.end()) return;  // not ours
    PendingBlock b{p, it->second.size, {}};
    const std::vector<StreamUse> users = std::move(it->second.users);
    live_.erase(it);
    if (stream) record_or_wait(b, stream, /*device=*/-1);  // the caller's current device
    for (const StreamUse& u : users) record_or_wait(b, u.stream, u.device);
    if (b.events.empty()) {
      free_[b.size].push_back(p);
    } else {
      pending_.push_back(std::move(b));
    }
  }

  bool record_stream(const void* p, size_t nbytes, int device, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    const uintptr_t a = address(p);
    auto it = live_.upper_bound(a);  // the first block starting after a
    if (it == live_.begin()) return false;
    --it;                            // the last block starting at or before a
    if (a + nbytes > it->first + it->second.size) return false;  // past its end: not in it
    for (const StreamUse& u : it->second.users)
      if (u.stream == stream) return true;
    it->second.users.push_back(StreamUse{device, stream});
    return true;
  }

 private:
  static uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

  struct StreamUse {
    int device;
    cudaStream_t stream;
  };
  struct LivePinned {
    size_t size;                   // the size class, what cudaHostAlloc gave
    std::vector<StreamUse> users;  // streams with copies from or to the block (pinned_record_stream)
  };

  std::mutex mutex_;
  FreeLists free_;
  std::map<uintptr_t, LivePinned> live_;  // by start address: finds the block holding any pointer
  std::vector<PendingBlock> pending_;
};

PinnedCache& pinned_cache() {
  static auto* cache = new PinnedCache();
  return *cache;
}

// A held pinned buffer goes back once the device's compute stream (where the last replay that
// read it was queued) has passed this point.
// Never throws (it runs in release paths and destructors): when the device is unusable (a sticky
// error), nothing will run on it again, so the buffer is free at once.
void pinned_release_later(void* p, int device) noexcept {
  DeviceGuard guard(device, std::nothrow);  // the event must be made on the device whose stream records it
  cudaStream_t stream = nullptr;
  try {
    stream = compute_stream(device);
  } catch (const std::exception&) {
  }
  pinned_cache().release(p, stream);
}

}  // namespace

void* device_alloc(size_t nbytes, int device) { return cache_for(device).allocate(nbytes); }
void device_free(void* p, int device) { cache_for(device).release(p); }
void record_stream(void* p, int device, void* stream) {
  cache_for(device).record_stream(p, static_cast<cudaStream_t>(stream));
}
AllocatorStats allocator_stats(int device) { return cache_for(device).stats(); }
bool allocator_started() { return g_started.load(); }
void reset_peak_stats(int device) { cache_for(device).reset_peaks(); }
void empty_cache(int device) { cache_for(device).empty(); }
int begin_capture_pool(int device) { return cache_for(device).begin_capture(); }
void end_capture_pool(int device) { cache_for(device).end_capture(); }
void release_capture_pool(int device, int pool) { cache_for(device).release_pool(pool); }
bool capture_underway(int device) { return cache_for(device).capturing(); }
void hold_pinned_for_capture(int device, void* p) { cache_for(device).hold_pinned(p); }
void* pinned_alloc(size_t nbytes) { return pinned_cache().allocate(nbytes); }
void pinned_free(void* p, void* stream) { pinned_cache().release(p, static_cast<cudaStream_t>(stream)); }
bool pinned_record_stream(const void* p, size_t nbytes, int device, void* stream) {
  return pinned_cache().record_stream(p, nbytes, device, static_cast<cudaStream_t>(stream));
}

}  // namespace tandem::cuda
