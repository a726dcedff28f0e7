#include "engine/tensor/storage.h"

#include "kernels/backend.h"

namespace tandem {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = backend_for(device).allocate(nbytes, device.index);
}

Storage::~Storage() {
  if (data_) backend_for(device_).deallocate(data_, nbytes_, device_.index);
}

}  // namespace tandem
