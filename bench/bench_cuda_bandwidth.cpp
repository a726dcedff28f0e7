// Memory bandwidth of Tandem's elementwise and reduction ops on one GPU, against the device's
// own device-to-device copy. For each size (1M .. 256M elements by default) it measures:
//   memcpy       cudaMemcpyAsync D2D (the reference: read n + write n bytes)
//   clone        Tensor::clone (copy_strided, contiguous)
//   add          a + b, same shape            read 2n, write n
//   add_row      [n/1024, 1024] + [1024]      read n (+ the row), write n
//   mul, relu, gelu, cast_bf16 (float32 -> bfloat16), sum (all elements), sum_last (dim -1 of
//   [n/1024, 1024]), and add in bfloat16.
// Effective bandwidth = (bytes read + bytes written) / time. Time per call: `calls` back-to-back
// calls between two CUDA events on the compute stream (enough calls for ~1 GB of traffic, after
// two warm-up calls), the median of `repeats` such measurements. Op calls include Tandem's host
// work (output allocation, checks), which only matters at the small sizes.
//   build/bin/bench_cuda_bandwidth [--max-elements N] [--repeats R] [--json]
// Prints a markdown table with the ratio to memcpy at the same size (or JSON lines with --json).
// An op whose CUDA kernel is not implemented yet prints "n/a".
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/core/error.h"
#include "engine/ops/ops.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_query.h"

using namespace tandem;

namespace {

struct Measurement {
  std::string op;
  std::string dtype;
  int64_t elements = 0;
  double bytes = 0;       // read + written per call
  double seconds = -1;    // per call; < 0 when the op failed
  std::string error;
};

// Median seconds per call of fn over `repeats` timed batches.
double time_per_call(const std::function<void()>& fn, double bytes_per_call, int repeats) {
  cudaStream_t stream = cuda::current_stream();
  const int calls = int(std::clamp(1e9 / bytes_per_call, 1.0, 200.0));
  fn();
  fn();
  cudaEvent_t start, stop;
  TANDEM_CUDA_CHECK(cudaEventCreate(&start));
  TANDEM_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> per_call;
  for (int r = 0; r < repeats; ++r) {
    TANDEM_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int c = 0; c < calls; ++c) fn();
    TANDEM_CUDA_CHECK(cudaEventRecord(stop, stream));
    TANDEM_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    TANDEM_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    per_call.push_back(double(ms) * 1e-3 / calls);
  }
  TANDEM_CUDA_CHECK(cudaEventDestroy(start));
  TANDEM_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

Measurement measure(const std::string& op, const std::string& dtype, int64_t n, double bytes,
                    const std::function<void()>& fn, int repeats) {
  Measurement m{op, dtype, n, bytes};
  try {
    m.seconds = time_per_call(fn, bytes, repeats);
  } catch (const Error& e) {
    m.error = e.what();
    cudaGetLastError();
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t max_elements = int64_t(1) << 28;
  int repeats = 7;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--max-elements") && i + 1 < argc) max_elements = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--json")) json = true;
    else {
      std::fprintf(stderr, "usage: %s [--max-elements N] [--repeats R] [--json]\n", argv[0]);
      return 2;
    }
  }
  if (cuda::visible_device_count() == 0) {
    std::fprintf(stderr, "bench_cuda_bandwidth: no CUDA device (%s)\n", cuda::device_count_note().c_str());
    return 1;
  }
  const Device dev = Device::cuda(0);
  cuda::set_current_device(0);
  NoGradGuard no_grad;
  std::vector<Measurement> rows;
  for (int64_t n = int64_t(1) << 20; n <= max_elements; n *= 4) {
    const double f4 = 4.0 * double(n), f2 = 2.0 * double(n);
    const int64_t cols = 1024, rows_2d = n / cols;
    Tensor a = Tensor::full({n}, 0.75, DType::Float32, dev), b = Tensor::full({n}, -0.25, DType::Float32, dev);
    Tensor a2 = a.view({rows_2d, cols}), row = Tensor::full({cols}, 1.5, DType::Float32, dev);
    Tensor dst = Tensor::empty({n}, DType::Float32, dev);
    rows.push_back(measure("memcpy", "float32", n, 2 * f4, [&] {
      TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), a.raw_data(), size_t(f4), cudaMemcpyDeviceToDevice,
                                        cuda::current_stream()));
    }, repeats));
    rows.push_back(measure("clone", "float32", n, 2 * f4, [&] { a.clone(); }, repeats));
    rows.push_back(measure("add", "float32", n, 3 * f4, [&] { add(a, b); }, repeats));
    rows.push_back(measure("add_row", "float32", n, 2 * f4 + 4.0 * cols, [&] { add(a2, row); }, repeats));
    rows.push_back(measure("mul", "float32", n, 3 * f4, [&] { mul(a, b); }, repeats));
    rows.push_back(measure("relu", "float32", n, 2 * f4, [&] { relu(b); }, repeats));
    rows.push_back(measure("gelu", "float32", n, 2 * f4, [&] { gelu(a); }, repeats));
    rows.push_back(measure("cast_bf16", "float32", n, f4 + f2, [&] { a.to(DType::BFloat16); }, repeats));
    rows.push_back(measure("sum", "float32", n, f4, [&] { sum(a); }, repeats));
    rows.push_back(measure("sum_last", "float32", n, f4 + 4.0 * double(rows_2d), [&] { sum(a2, {-1}); }, repeats));
    try {
      Tensor ah = a.to(DType::BFloat16), bh = b.to(DType::BFloat16);
      rows.push_back(measure("add", "bfloat16", n, 3 * f2, [&] { add(ah, bh); }, repeats));
    } catch (const Error& e) {
      rows.push_back(Measurement{"add", "bfloat16", n, 3 * f2, -1, e.what()});
    }
  }
  // Report against memcpy at the same size.
  if (!json) {
    std::printf("| op | dtype | elements | MB moved | us/call | GB/s | vs memcpy |\n|---|---|---|---|---|---|---|\n");
  }
  for (const Measurement& m : rows) {
    double copy_gbs = 0;
    for (const Measurement& c : rows)
      if (c.op == "memcpy" && c.elements == m.elements && c.seconds > 0) copy_gbs = c.bytes / c.seconds / 1e9;
    const double gbs = m.seconds > 0 ? m.bytes / m.seconds / 1e9 : 0;
    if (json) {
      std::printf("{\"bench\": \"cuda_bandwidth\", \"op\": \"%s\", \"dtype\": \"%s\", \"elements\": %lld, "
                  "\"bytes\": %.0f, \"seconds\": %.9f, \"gb_per_s\": %.1f, \"vs_memcpy\": %.3f, \"failed\": %s}\n",
                  m.op.c_str(), m.dtype.c_str(), (long long)m.elements, m.bytes, m.seconds, gbs,
                  copy_gbs > 0 ? gbs / copy_gbs : 0.0, m.error.empty() ? "false" : "true");
    } else if (m.seconds > 0) {
      std::printf("| %s | %s | %lld | %.1f | %.1f | %.0f | %.2f |\n", m.op.c_str(), m.dtype.c_str(),
                  (long long)m.elements, m.bytes / 1e6, m.seconds * 1e6, gbs, copy_gbs > 0 ? gbs / copy_gbs : 0.0);
    } else {
      std::printf("| %s | %s | %lld | %.1f | n/a | n/a | n/a |\n", m.op.c_str(), m.dtype.c_str(),
                  (long long)m.elements, m.bytes / 1e6);
    }
  }
  for (const Measurement& m : rows)
    if (!m.error.empty()) std::fprintf(stderr, "%s %s (%lld): %s\n", m.op.c_str(), m.dtype.c_str(), (long long)m.elements,
                                       m.error.c_str());
  return 0;
}
