// Memory bandwidth of the CUDA reductions and softmax, against a device-to-device copy on the
// same GPU (the goal: large sums at >= 80% of copy bandwidth).
// Run: build/bin/bench_reduce_cuda [reps]        (prints "no CUDA device" and exits 0 without one)
// Copy bandwidth counts read + write bytes; a reduction counts the bytes it reads; softmax
// counts read + write. Each sample queues `kBatch` calls and waits once; the median of `reps`
// samples is reported, one JSON line per case, with the fraction of copy bandwidth.
// Kernels are called through the backend with preallocated outputs (no op front end).
// Note: split reductions allocate their partials per call; until the caching allocator lands,
// that is a cudaMalloc/cudaFree pair (and cudaFree waits for the device), which this measures too.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_query.h"
#include "tensor/tensor.h"

using namespace tandem;

namespace {

constexpr int kBatch = 10;

double median_seconds(Backend& gpu, const std::function<void()>& f, int reps) {
  f();
  gpu.synchronize(0);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    for (int b = 0; b < kBatch; ++b) f();
    gpu.synchronize(0);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count() / kBatch);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (cuda::visible_device_count() == 0) {
    std::printf("no CUDA device: %s\n", cuda::device_count_note().c_str());
    return 0;
  }
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  const Device gpu_dev = Device::cuda(0);
  Backend& gpu = cuda_backend();

  const int64_t copy_bytes = int64_t(400) << 20;
  Tensor src = Tensor::full({copy_bytes / 4}, 1.0, DType::Float32, gpu_dev);
  Tensor dst = Tensor::empty({copy_bytes / 4}, DType::Float32, gpu_dev);
  const double copy_s = median_seconds(gpu, [&] {
    gpu.copy_bytes(dst.raw_data(), src.raw_data(), size_t(copy_bytes), false, false, 0);
  }, reps);
  const double copy_gbs = 2.0 * double(copy_bytes) / copy_s / 1e9;
  std::printf("{\"bench\": \"copy_d2d\", \"bytes\": %lld, \"gbs\": %.1f}\n", (long long)copy_bytes, copy_gbs);

  struct Case {
    std::string name;
    DType dtype;
    int64_t outer, r, inner;
  };
  const std::vector<Case> reductions = {
      {"sum 1e8 (one huge reduction)", DType::Float32, 1, 100'000'000, 1},
      {"sum 2e8 bf16 (one huge reduction)", DType::BFloat16, 1, 200'000'000, 1},
      {"sum 5e7 f64 (one huge reduction)", DType::Float64, 1, 50'000'000, 1},
      {"row sums [16384, 8192]", DType::Float32, 16384, 8192, 1},
      {"row sums [1048576, 100]", DType::Float32, 1'048'576, 100, 1},
      {"column sums [8192, 16384] over dim 0", DType::Float32, 1, 8192, 16384},
      {"column sums [64, 1024, 2048] over dim 1", DType::Float32, 64, 1024, 2048},
      {"column sums [4096, 32, 4096] over dim 1", DType::Float32, 4096, 32, 4096},
      {"column sums [4000000, 3] over dim 0", DType::Float32, 1, 4'000'000, 3},
  };
  for (const Case& c : reductions) {
    Tensor x = Tensor::full({c.outer, c.r, c.inner}, 1.0, c.dtype, gpu_dev);
    Tensor out = Tensor::empty({c.outer, c.inner}, c.dtype, gpu_dev);
    const double bytes = double(x.numel()) * double(dtype_size(c.dtype));
    const double s = median_seconds(gpu, [&] {
      gpu.reduce(ReduceOp::Sum, x.view_desc(), c.outer, c.r, c.inner, out.view_desc());
    }, reps);
    std::printf("{\"bench\": \"reduce\", \"case\": \"%s\", \"gbs\": %.1f, \"of_copy\": %.2f}\n", c.name.c_str(),
                bytes / s / 1e9, bytes / s / 1e9 / copy_gbs);
  }
  {
    Tensor x = Tensor::full({100'000'000}, 1.0, DType::Float32, gpu_dev);
    Tensor out = Tensor::empty({1}, DType::Int64, gpu_dev);
    const double s = median_seconds(gpu, [&] { gpu.argmax(x.view_desc(), 1, 100'000'000, 1, out.view_desc(), false); },
                                    reps);
    std::printf("{\"bench\": \"argmax\", \"case\": \"1e8 float\", \"gbs\": %.1f, \"of_copy\": %.2f}\n", 4e8 / s / 1e9,
                4e8 / s / 1e9 / copy_gbs);
  }
  const int64_t softmax_shapes[][2] = {{8192, 32000}, {262144, 1000}, {1'048'576, 10}};
  for (const auto& sh : softmax_shapes)
    for (bool backward : {false, true}) {
      const int64_t rows = sh[0], cols = sh[1];
      Tensor x = Tensor::full({rows, cols}, 0.5, DType::Float32, gpu_dev);
      Tensor g = Tensor::full({rows, cols}, 0.25, DType::Float32, gpu_dev);
      Tensor y = Tensor::empty({rows, cols}, DType::Float32, gpu_dev);
      const double bytes = double(rows * cols) * 4.0 * (backward ? 3.0 : 2.0);
      const double s = median_seconds(gpu, [&] {
        if (backward) gpu.softmax_backward(x.view_desc(), g.view_desc(), rows, cols, y.view_desc(), true);
        else gpu.softmax(x.view_desc(), rows, cols, y.view_desc(), true);
      }, reps);
      std::printf("{\"bench\": \"log_softmax%s\", \"rows\": %lld, \"cols\": %lld, \"gbs\": %.1f, \"of_copy\": %.2f}\n",
                  backward ? "_backward" : "", (long long)rows, (long long)cols, bytes / s / 1e9,
                  bytes / s / 1e9 / copy_gbs);
    }
  return 0;
}
