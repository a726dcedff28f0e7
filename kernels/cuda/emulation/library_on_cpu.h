// Shared by the emulation build's library seams (gemm_lt_emulated.cpp, conv_library_emulated.cpp):
// cuBLASLt and cuDNN calls become CPU backend calls on the same memory (device memory is host
// memory here). The CPU backend computes in float32/float64; half operands are widened to
// float32 first and the result rounded once, as the GPU libraries accumulate in float. The work
// is queued on the current device's compute stream, where the library call would run: at once,
// or recorded by a stream capture (stream_capture.h), so it must copy what it reads.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/emulation/stream_capture.h"
#include "kernels/tensor_view.h"

namespace tandem::emu {

inline void on_compute_stream(const char* library_call, std::function<void()> work) {
  int device = 0;
  cudaGetDevice(&device);
  const cudaError_t err = run_or_record(cuda::compute_stream(device), [work = std::move(work)] {
    work();
    return cudaSuccess;
  });
  if (err != cudaSuccess)
    throw DeviceError(std::string(library_call) + " on cuda:" + std::to_string(device) + ": " + cudaGetErrorName(err) +
                      ": " + cudaGetErrorString(err));
}

// A float32 copy of `n` contiguous elements of a half tensor (or the data itself for
// float32/float64, which the CPU backend takes as they are).
class FloatOperand {
 public:
  FloatOperand(const void* data, DType dtype, int64_t n) : dtype_(dtype), n_(n), original_(const_cast<void*>(data)) {
    if (!is_half()) return;
    copy_.resize(size_t(n));
    cpu_backend().copy_strided(view(original_, dtype_), view(copy_.data(), DType::Float32));
  }
  bool is_half() const { return dtype_ == DType::Float16 || dtype_ == DType::BFloat16; }
  DType compute_dtype() const { return is_half() ? DType::Float32 : dtype_; }
  void* data() { return is_half() ? static_cast<void*>(copy_.data()) : original_; }
  TensorView shaped(const Shape& shape) {
    TensorView v{data(), compute_dtype(), shape, {}};
    v.strides.assign(shape.size(), 1);
    for (int d = int(shape.size()) - 2; d >= 0; --d) v.strides[size_t(d)] = v.strides[size_t(d) + 1] * shape[size_t(d) + 1];
    return v;
  }
  // Rounds the float32 copy back into the half tensor (after the CPU wrote the copy).
  void store() {
    if (is_half()) cpu_backend().copy_strided(view(copy_.data(), DType::Float32), view(original_, dtype_));
  }

 private:
  TensorView view(void* p, DType t) const { return TensorView{p, t, {n_}, {1}}; }
  DType dtype_;
  int64_t n_;
  void* original_;
  std::vector<float> copy_;
};

}  // namespace tandem::emu
