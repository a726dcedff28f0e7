// Storage: a reference-counted buffer on one device, allocated and freed through that
// device's Backend (aligned host memory on CPU, the caching allocator on CUDA).
#pragma once
#include <cstddef>
#include <memory>

#include "engine/tensor/device.h"

namespace tandem {

class Storage {
 public:
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  const Device& device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
};

}  // namespace tandem
