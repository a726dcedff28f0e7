// The CUDA runtime API as the emulation build provides it, under the real names and signatures
// of cuda_runtime_api.h (this build links no libcudart):
//   - TANDEM_EMULATED_GPUS=N devices (default 0: a CUDA build on a machine without a GPU, so
//     the CPU suite behaves as it does there); each reports compute capability 9.0, 132 SMs
//     and TANDEM_EMULATED_GPU_MEMORY_MB of memory (default 16384);
//   - device memory is host memory, 256-byte aligned, filled with 0xff bytes when allocated
//     (float NaN: a kernel that reads memory nobody wrote shows it), and every device pointer a
//     copy or memset touches is checked against the allocation it lies in;
//   - a stream runs what is queued on it at once, on the calling thread: queued work is done when
//     the call returns, events complete when recorded, and synchronizing waits for nothing;
//   - work queued on a stream of another device than the current one fails as on a GPU
//     (cudaErrorInvalidResourceHandle), so multi-GPU code must switch devices as it should;
//   - stream order is still checked where it is easy to get wrong: a device-to-device copy
//     queued on one device's stream that touches another device's memory must be ordered after
//     the work the same host thread already queued on that device's streams (cudaStreamWaitEvent
//     on an event recorded there, or a host synchronization); otherwise the emulator aborts
//     naming both devices, since on a GPU the copy would race with that work. (Work other host
//     threads queue meanwhile is not held against the copy: the emulator cannot see which of it
//     the host ordered before the copy, so it checks only what it can without false alarms);
//   - cudaDeviceReset frees the device's allocations and invalidates its streams and events;
//   - a test can make a device fail as after a kernel fault (fault_injection.h);
//   - CUDA graphs: stream capture records what is queued and a graph launch replays it
//     (stream_capture.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda/emulation/emulated_launch.h"
#include "kernels/cuda/emulation/fault_injection.h"
#include "kernels/cuda/emulation/stream_capture.h"

namespace tandem::emu {
namespace {

constexpr size_t kAlignment = 256;
using Clock = std::chrono::steady_clock;

// A bad value is a usage error (exit 2): the runtime is a C API with no other way to refuse, and
// guessing a device count would make a test run on a configuration nobody asked for.
int read_env_int(const char* name, int fallback, int lo, int hi) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (*end != '\0' || errno != 0 || v < lo || v > hi) {
    std::fprintf(stderr, "tandem CUDA emulator: %s=%s is not allowed; use an integer in %d..%d (unset: %d)\n", name,
                 text, lo, hi, fallback);
    std::exit(2);
  }
  return int(v);
}

struct Allocation {
  size_t size;
  int device;  // -1: pinned host memory
};

struct Stream {
  int device;
  unsigned generation;  // the device's context generation when created (cudaDeviceReset bumps it)
  uint64_t work = 0;    // operations queued so far
  std::map<const Stream*, uint64_t> seen;  // how much of each other stream's work is ordered before ours
  std::map<std::thread::id, uint64_t> last_by_thread;  // the last of `work` each host thread queued
};

struct Event {
  int device;
  unsigned generation;
  bool timing;
  bool recorded = false;
  Clock::time_point when{};
  const Stream* stream = nullptr;  // where it was last recorded, and after how much work
  uint64_t work = 0;
};

struct State {
  std::mutex mutex;
  int devices = 0;
  size_t memory_per_device = 0;
  std::map<uintptr_t, Allocation> allocations;  // by start address
  std::vector<size_t> used;
  std::vector<unsigned> generation;
  std::vector<cudaError_t> sticky;  // fault_injection.h
  std::set<Stream*> streams;
  std::set<Event*> events;
  std::map<const Stream*, uint64_t> host_seen;  // work the host has waited for, per stream

  State() {
    devices = read_env_int("TANDEM_EMULATED_GPUS", 0, 0, 64);
    memory_per_device = size_t(read_env_int("TANDEM_EMULATED_GPU_MEMORY_MB", 16384, 1, 1 << 20)) << 20;
    used.assign(size_t(devices), 0);
    generation.assign(size_t(devices), 0);
    sticky.assign(size_t(devices), cudaSuccess);
  }
};

State& state() {
  static State* s = new State;  // never destroyed: streams may be released after static destruction
  return *s;
}

thread_local int t_device = 0;
thread_local cudaError_t t_last_error = cudaSuccess;

bool valid_device(int device) { return device >= 0 && device < state().devices; }
cudaError_t sticky_error(int device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.sticky[size_t(device)];
}
// What the runtime says about a device it cannot use: no device at all, or a bad ordinal.
cudaError_t device_error() { return state().devices == 0 ? cudaErrorNoDevice : cudaErrorInvalidDevice; }

// The allocation holding [p, p + bytes), or nullptr. Call with the mutex held.
const Allocation* find_allocation(State& s, const void* p, size_t bytes) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  auto it = s.allocations.upper_bound(addr);
  if (it == s.allocations.begin()) return nullptr;
  --it;
  if (addr + bytes > it->first + it->second.size) return nullptr;
  return &it->second;
}

bool is_device_pointer(const void* p, size_t bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const Allocation* a = find_allocation(s, p, bytes);
  return a && a->device >= 0;
}

// The stream handle is usable for work on the current device (any device with
// on_current_device false: cudaStreamWaitEvent takes a stream of another device).
cudaError_t check_stream(cudaStream_t stream, bool on_current_device = true) {
  if (!valid_device(t_device)) return cudaErrorNoDevice;
  if (cudaError_t err = sticky_error(t_device); err != cudaSuccess) return err;
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return cudaSuccess;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto* st = reinterpret_cast<Stream*>(stream);
  if (!s.streams.count(st) || s.generation[size_t(st->device)] != st->generation)
    return cudaErrorInvalidResourceHandle;
  if (on_current_device && st->device != t_device) return cudaErrorInvalidResourceHandle;
  return cudaSuccess;
}

// The explicit stream behind a handle (nullptr for the legacy and per-thread default streams,
// which the ordering check leaves alone). Call with the mutex held.
Stream* explicit_stream(State& s, cudaStream_t stream) {
  auto* st = reinterpret_cast<Stream*>(stream);
  return s.streams.count(st) ? st : nullptr;
}

// One more operation queued on `stream`: it is ordered after what the host has waited for.
void note_queued(cudaStream_t stream) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Stream* st = explicit_stream(s, stream);
  if (!st) return;
  ++st->work;
  st->last_by_thread[std::this_thread::get_id()] = st->work;
  for (const auto& [other, work] : s.host_seen) st->seen[other] = std::max(st->seen[other], work);
}

// A copy on `stream` touching memory of `device` (another device than the stream's) must come
// after the work this host thread queued on that device's streams.
void check_ordered_after_device(cudaStream_t stream, int device, const char* what) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Stream* st = explicit_stream(s, stream);
  if (!st || device < 0 || device == st->device) return;
  for (const Stream* other : s.streams) {
    if (other->device != device) continue;
    const auto mine = other->last_by_thread.find(std::this_thread::get_id());
    if (mine == other->last_by_thread.end()) continue;
    auto it = st->seen.find(other);
    const uint64_t ordered = it == st->seen.end() ? 0 : it->second;
    if (ordered >= mine->second) continue;
    std::fprintf(stderr,
                 "tandem CUDA emulator: stream-order hazard: %s queued on a stream of cuda:%d touches memory of "
                 "cuda:%d, but %llu operation(s) queued on a stream of cuda:%d are not ordered before it (record an "
                 "event on that stream and cudaStreamWaitEvent on it first); on a GPU the copy would race with them\n",
                 what, st->device, device, (unsigned long long)(mine->second - ordered), device);
    std::abort();
  }
}

int device_of(const void* p) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const Allocation* a = find_allocation(s, p, 1);
  return a ? a->device : -1;
}

void* allocate(size_t bytes, int device) {
  // Exactly `bytes` (not rounded up), so AddressSanitizer sees a kernel reading past the end.
  void* p = nullptr;
  if (posix_memalign(&p, kAlignment, bytes) != 0) return nullptr;
  std::memset(p, 0xff, bytes);
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.allocations[reinterpret_cast<uintptr_t>(p)] = Allocation{bytes, device};
  if (device >= 0) s.used[size_t(device)] += rounded;
  return p;
}

cudaError_t release(void* p, bool device_memory) {
  if (!p) return cudaSuccess;
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.allocations.find(reinterpret_cast<uintptr_t>(p));
    if (it == s.allocations.end() || (it->second.device >= 0) != device_memory) return cudaErrorInvalidValue;
    if (it->second.device >= 0)
      s.used[size_t(it->second.device)] -= (it->second.size + kAlignment - 1) / kAlignment * kAlignment;
    s.allocations.erase(it);
  }
  std::free(p);
  return cudaSuccess;
}

const char* error_name(cudaError_t err) {
  switch (err) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    default: return "cudaErrorUnknown";
  }
}

const char* error_string(cudaError_t err) {
  switch (err) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (emulation: set TANDEM_EMULATED_GPUS)";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    default: return "unknown error";
  }
}

}  // namespace

void inject_sticky_error(int device, cudaError_t err) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (device >= 0 && device < s.devices) s.sticky[size_t(device)] = err;
}
void clear_sticky_error(int device) { inject_sticky_error(device, cudaSuccess); }

cudaError_t set_last_error(cudaError_t err) {
  t_last_error = err;
  return err;
}

std::string kernel_name_from_signature(const char* pretty_function) {
  // GCC: "const char* tandem::emu::kernel_name() [with auto Kernel = <name>; ...]"
  std::string s(pretty_function);
  const std::string key = "Kernel = ";
  size_t begin = s.find(key);
  if (begin == std::string::npos) return s;
  begin += key.size();
  size_t end = s.find_first_of(";]", begin);
  std::string name = s.substr(begin, end - begin);
  for (const std::string anon : {"(anonymous namespace)::", "{anonymous}::"})
    for (size_t at; (at = name.find(anon)) != std::string::npos;) name.erase(at, anon.size());
  return name;
}

void stream_launch(cudaStream_t stream, const char* kernel, dim3 grid, dim3 block, size_t shared_bytes,
                   void (*body)(void*), std::shared_ptr<void> params) {
  cudaError_t err = check_stream(stream);
  if (err == cudaSuccess) {
    note_queued(stream);
    err = run_or_record(stream, [=] { return run_grid(kernel, grid, block, shared_bytes, body, params.get()); });
  }
  if (err != cudaSuccess) set_last_error(err);
}

}  // namespace tandem::emu

using namespace tandem::emu;

extern "C" {

cudaError_t cudaGetLastError() {
  const cudaError_t err = t_last_error;
  t_last_error = cudaSuccess;
  return err;
}
cudaError_t cudaPeekAtLastError() { return t_last_error; }
const char* cudaGetErrorName(cudaError_t err) { return error_name(err); }
const char* cudaGetErrorString(cudaError_t err) { return error_string(err); }
cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

// ---------------------------------------------------------------- devices
cudaError_t cudaGetDeviceCount(int* count) {
  *count = state().devices;
  return *count == 0 ? set_last_error(cudaErrorNoDevice) : cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = t_device;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device)) return set_last_error(device_error());
  if (cudaError_t err = sticky_error(device); err != cudaSuccess) return set_last_error(err);
  t_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!valid_device(device)) return set_last_error(device_error());
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "Tandem emulated GPU %d", device);
  prop->totalGlobalMem = state().memory_per_device;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->pciBusID = device + 1;
  prop->unifiedAddressing = 1;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int len, int device) {
  if (!valid_device(device)) return set_last_error(device_error());
  if (len <= 0) return set_last_error(cudaErrorInvalidValue);
  std::snprintf(bus_id, size_t(len), "0000:%02x:00.0", device + 1);
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  if (!valid_device(t_device)) return set_last_error(cudaErrorNoDevice);
  if (cudaError_t err = sticky_error(t_device); err != cudaSuccess) return set_last_error(err);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (const Stream* st : s.streams)
    if (st->device == t_device) s.host_seen[st] = st->work;
  return cudaSuccess;
}
cudaError_t cudaDeviceReset() {
  if (!valid_device(t_device)) return set_last_error(cudaErrorNoDevice);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto it = s.allocations.begin(); it != s.allocations.end();) {
    if (it->second.device == t_device) {
      std::free(reinterpret_cast<void*>(it->first));
      it = s.allocations.erase(it);
    } else {
      ++it;
    }
  }
  s.used[size_t(t_device)] = 0;
  ++s.generation[size_t(t_device)];
  return cudaSuccess;
}

// ---------------------------------------------------------------- memory
cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = nullptr;
  if (!valid_device(t_device)) return set_last_error(cudaErrorNoDevice);
  if (cudaError_t err = sticky_error(t_device); err != cudaSuccess) return set_last_error(err);
  if (bytes == 0) return cudaSuccess;
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (bytes > s.memory_per_device - s.used[size_t(t_device)]) return set_last_error(cudaErrorMemoryAllocation);
  }
  *p = allocate(bytes, t_device);
  return *p ? cudaSuccess : set_last_error(cudaErrorMemoryAllocation);
}
cudaError_t cudaFree(void* p) {
  const cudaError_t err = release(p, true);
  return err == cudaSuccess ? err : set_last_error(err);
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int) {
  if (!valid_device(t_device)) return set_last_error(cudaErrorNoDevice);
  *p = allocate(bytes == 0 ? 1 : bytes, -1);
  return *p ? cudaSuccess : set_last_error(cudaErrorMemoryAllocation);
}
cudaError_t cudaMallocHost(void** p, size_t bytes) { return cudaHostAlloc(p, bytes, 0); }
cudaError_t cudaFreeHost(void* p) {
  const cudaError_t err = release(p, false);
  return err == cudaSuccess ? err : set_last_error(err);
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  if (!valid_device(t_device)) return set_last_error(cudaErrorNoDevice);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *total = s.memory_per_device;
  *free_bytes = s.memory_per_device - s.used[size_t(t_device)];
  return cudaSuccess;
}

static cudaError_t checked_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (cudaError_t err = check_stream(stream); err != cudaSuccess) return set_last_error(err);
  if (bytes == 0) return cudaSuccess;
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind != cudaMemcpyDefault && kind != cudaMemcpyHostToHost) {
    // A device pointer must lie inside one live device allocation; a host pointer must not.
    if (dst_device != is_device_pointer(dst, bytes) || src_device != is_device_pointer(src, bytes))
      return set_last_error(cudaErrorInvalidValue);
  }
  note_queued(stream);
  check_ordered_after_device(stream, device_of(src), "a copy reading device memory");
  check_ordered_after_device(stream, device_of(dst), "a copy writing device memory");
  const cudaError_t err = run_or_record(stream, [=] {
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  });
  return err == cudaSuccess ? err : set_last_error(err);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  return checked_copy(dst, src, bytes, kind, stream);
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return checked_copy(dst, src, bytes, kind, nullptr);
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream) {
  if (cudaError_t err = check_stream(stream); err != cudaSuccess) return set_last_error(err);
  if (bytes == 0) return cudaSuccess;
  if (!is_device_pointer(p, bytes)) return set_last_error(cudaErrorInvalidValue);
  note_queued(stream);
  const cudaError_t err = run_or_record(stream, [=] {
    std::memset(p, value, bytes);
    return cudaSuccess;
  });
  return err == cudaSuccess ? err : set_last_error(err);
}
cudaError_t cudaMemset(void* p, int value, size_t bytes) { return cudaMemsetAsync(p, value, bytes, nullptr); }

// ---------------------------------------------------------------- streams and events
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  if (!valid_device(t_device)) return set_last_error(cudaErrorNoDevice);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto* st = new Stream{.device = t_device, .generation = s.generation[size_t(t_device)]};
  s.streams.insert(st);
  *stream = reinterpret_cast<cudaStream_t>(st);
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto* st = reinterpret_cast<Stream*>(stream);
  if (!s.streams.erase(st)) return set_last_error(cudaErrorInvalidResourceHandle);
  forget_capture(stream);
  s.host_seen.erase(st);
  for (Stream* other : s.streams) other->seen.erase(st);
  for (Event* e : s.events)
    if (e->stream == st) e->stream = nullptr;
  delete st;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  const cudaError_t err = check_stream(stream);
  if (err != cudaSuccess) return set_last_error(err);
  if (invalidate_capture(stream)) return set_last_error(cudaErrorStreamCaptureUnsupported);  // waiting for a capture
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (Stream* st = explicit_stream(s, stream)) s.host_seen[st] = st->work;
  return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t stream) { return cudaStreamSynchronize(stream); }

static Event* live_event(cudaEvent_t event) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto* e = reinterpret_cast<Event*>(event);
  if (!s.events.count(e) || s.generation[size_t(e->device)] != e->generation) return nullptr;
  return e;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (!valid_device(t_device)) return set_last_error(cudaErrorNoDevice);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto* e = new Event{t_device, s.generation[size_t(t_device)], (flags & cudaEventDisableTiming) == 0};
  s.events.insert(e);
  *event = reinterpret_cast<cudaEvent_t>(e);
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto* e = reinterpret_cast<Event*>(event);
  if (!s.events.erase(e)) return set_last_error(cudaErrorInvalidResourceHandle);
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  Event* e = live_event(event);
  if (!e) return set_last_error(cudaErrorInvalidResourceHandle);
  if (cudaError_t err = check_stream(stream); err != cudaSuccess) return set_last_error(err);
  if (e->device != t_device) return set_last_error(cudaErrorInvalidResourceHandle);
  e->recorded = true;
  e->when = Clock::now();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  e->stream = explicit_stream(s, stream);
  e->work = e->stream ? e->stream->work : 0;
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t event) { return live_event(event) ? cudaSuccess : set_last_error(cudaErrorInvalidResourceHandle); }
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  Event* e = live_event(event);
  if (!e) return set_last_error(cudaErrorInvalidResourceHandle);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (e->stream) s.host_seen[e->stream] = std::max(s.host_seen[e->stream], e->work);
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  Event* e = live_event(event);
  if (!e) return set_last_error(cudaErrorInvalidResourceHandle);
  const cudaError_t err = check_stream(stream, /*on_current_device=*/false);
  if (err != cudaSuccess) return set_last_error(err);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Stream* st = explicit_stream(s, stream);
  if (st && e->stream) st->seen[e->stream] = std::max(st->seen[e->stream], e->work);
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  Event* a = live_event(start);
  Event* b = live_event(end);
  if (!a || !b || !a->timing || !b->timing) return set_last_error(cudaErrorInvalidResourceHandle);
  if (!a->recorded || !b->recorded) return set_last_error(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(b->when - a->when).count();
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* p) {
  std::memset(attributes, 0, sizeof *attributes);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const Allocation* a = find_allocation(s, p, 1);
  attributes->type = !a ? cudaMemoryTypeUnregistered : a->device >= 0 ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
  attributes->device = a && a->device >= 0 ? a->device : -1;
  attributes->devicePointer = a ? const_cast<void*>(p) : nullptr;
  attributes->hostPointer = a && a->device < 0 ? const_cast<void*>(p) : nullptr;
  return cudaSuccess;
}

}  // extern "C"
