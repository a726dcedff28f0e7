#include "tensor/storage.h"

#include <atomic>

#include "base/error.h"
#include "kernels/backend.h"
#include "kernels/pinned_host.h"

namespace tandem {

namespace {
std::atomic<int64_t> g_live_count{0};
std::atomic<int64_t> g_live_bytes{0};
}  // namespace

LiveStorage Storage::live() { return {g_live_count.load(), g_live_bytes.load()}; }

void Storage::count_alive() {
  g_live_count += 1;
  g_live_bytes += int64_t(nbytes_);
}

Storage::Storage(size_t nbytes, Device device, HostMemory host_memory) : nbytes_(nbytes), device_(device) {
  if (host_memory == HostMemory::Pinned) {
    if (!device.is_cpu())
      throw DeviceError("pinned memory is host memory: a pinned storage must be on the CPU, not " + device.str());
    data_ = pinned_host_alloc(nbytes);
    pinned_ = data_ != nullptr;
  }
  if (!pinned_) data_ = backend_for(device).allocate(nbytes, device.index);
  count_alive();
}

Storage::Storage(void* data, size_t nbytes) : data_(data), nbytes_(nbytes), device_(Device::cpu()), borrowed_(true) {
  count_alive();
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t nbytes) {
  if (data == nullptr && nbytes > 0) throw ValueError("Storage::borrow: null pointer for " + std::to_string(nbytes) + " bytes");
  return std::shared_ptr<Storage>(new Storage(data, nbytes));
}

Storage::~Storage() {
  g_live_count -= 1;
  g_live_bytes -= int64_t(nbytes_);
  if (!data_ || borrowed_) return;
  if (pinned_) {
    pinned_host_free(data_);
  } else {
    backend_for(device_).deallocate(data_, nbytes_, device_.index);
  }
}

}  // namespace tandem
