// Storage: a reference-counted buffer on one device, allocated and freed through that
// device's Backend (aligned host memory on CPU, the caching allocator on CUDA), or, for CPU
// storage asked for as HostMemory::Pinned, page-locked host memory (kernels/pinned_host.h), or
// borrowed: host memory the caller owns (Storage::borrow), never freed here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/device.h"

namespace tandem {

// What kind of host memory a CPU storage asks for. Pinned memory is page-locked, so copies
// between it and a CUDA device are direct DMA; it is pinned only in a CUDA build with a visible
// device, and ordinary host memory otherwise.
enum class HostMemory : uint8_t { Pageable, Pinned };

// The storages alive in this process (all devices, borrowed ones included) and the bytes they
// span: what a leak check compares before and after building and dropping a model.
struct LiveStorage {
  int64_t count = 0;
  int64_t bytes = 0;
};

class Storage {
 public:
  static LiveStorage live();

  // host_memory applies to CPU storage only (Pinned on another device is a DeviceError).
  Storage(size_t nbytes, Device device, HostMemory host_memory = HostMemory::Pageable);
  ~Storage();
  // A CPU storage over `nbytes` at `data`, which the caller owns and keeps alive (and unmoved)
  // for as long as any tensor views it; nothing is copied, and nothing is freed.
  static std::shared_ptr<Storage> borrow(void* data, size_t nbytes);
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  const Device& device() const { return device_; }
  // True when the buffer really is page-locked (asked for Pinned, and pinned memory exists).
  bool pinned() const { return pinned_; }
  bool borrowed() const { return borrowed_; }

 private:
  Storage(void* data, size_t nbytes);
  void count_alive();

  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  bool pinned_ = false;
  bool borrowed_ = false;
};

}  // namespace tandem
