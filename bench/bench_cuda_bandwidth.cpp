// Memory bandwidth of Tandem's elementwise ops, a cast and sums on one GPU, against the
// device's own device-to-device copy. For each size (1M .. 256M elements, x4) it measures:
//   memcpy      cudaMemcpyAsync D2D (the reference: read n + write n)
//   clone       Tensor::clone (copy_strided, contiguous)                read n, write n
//   add         a + b, same shape                                       read 2n, write n
//   add_row     [n/1024, 1024] + [1024] (bias row broadcast)            read n (+ the row), write n
//   mul, relu, gelu (erf), cast_bf16 (float32 -> bfloat16: read 4n, write 2n bytes),
//   sum (all elements), sum_last (dim -1 of [n/1024, 1024]), and add in bfloat16.
// Effective bandwidth = (bytes read + bytes written) / time. Each op is timed twice:
//   kernel: the backend call into a preallocated output (what the kernel itself reaches);
//   op:     the public op (ops.h), which also allocates its output and checks its inputs; at
//           small sizes that host work, not the kernel, sets the time.
// Time per call: `calls` back-to-back calls between two CUDA events on the compute stream
// (enough for ~1 GB of traffic, after two warm-up calls); the median of `repeats` batches.
//   build/bin/bench_cuda_bandwidth [--max-elements N] [--repeats R] [--json]
// Prints a markdown table with the ratios to memcpy at the same size (JSON lines with --json).
// An op whose CUDA kernel is not implemented (yet) prints n/a and its error on stderr.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_query.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/ops.h"

using namespace tandem;

namespace {

struct Timing {
  double seconds = -1;  // per call; < 0 when the call failed
  std::string error;
};

struct Row {
  std::string op, dtype;
  int64_t elements = 0;
  double bytes = 0;  // read + written per call
  Timing kernel, api;
};

// Median seconds per call of fn over `repeats` timed batches.
Timing time_per_call(const std::function<void()>& fn, double bytes_per_call, int repeats) {
  Timing t;
  if (!fn) return t;
  cudaStream_t stream = cuda::current_stream();
  const int calls = int(std::clamp(1e9 / bytes_per_call, 1.0, 200.0));
  cudaEvent_t start = nullptr, stop = nullptr;
  try {
    fn();
    fn();
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
    std::sort(per_call.begin(), per_call.end());
    t.seconds = per_call[per_call.size() / 2];
  } catch (const Error& e) {
    t.error = e.what();
  }
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  return t;
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
  Backend& gpu = backend_for(dev);
  NoGradGuard no_grad;
  std::vector<Row> rows;
  for (int64_t n = int64_t(1) << 20; n <= max_elements; n *= 4) {
    const double f4 = 4.0 * double(n), f2 = 2.0 * double(n);
    const int64_t cols = 1024, rows_2d = n / cols;
    const Tensor a = Tensor::full({n}, 0.75, DType::Float32, dev), b = Tensor::full({n}, -0.25, DType::Float32, dev);
    const Tensor a2 = a.view({rows_2d, cols}), row = Tensor::full({cols}, 1.5, DType::Float32, dev);
    const Tensor out = Tensor::empty({n}, DType::Float32, dev), out2 = out.view({rows_2d, cols});
    const Tensor out_bf16 = Tensor::empty({n}, DType::BFloat16, dev), out_sum = Tensor::empty({}, DType::Float32, dev);
    const Tensor out_rows = Tensor::empty({rows_2d}, DType::Float32, dev);
    const TensorView av = a.view_desc(), bv = b.view_desc(), ov = out.view_desc();
    const TensorView row_b = row.expand({rows_2d, cols}).view_desc();
    auto add_row = [&](const std::string& op, const std::string& dtype, double bytes, std::function<void()> kernel,
                       std::function<void()> api) {
      rows.push_back(Row{op, dtype, n, bytes, time_per_call(kernel, bytes, repeats), time_per_call(api, bytes, repeats)});
    };
    add_row("memcpy", "float32", 2 * f4, [&] {
      TANDEM_CUDA_CHECK(cudaMemcpyAsync(out.raw_data(), a.raw_data(), size_t(f4), cudaMemcpyDeviceToDevice,
                                        cuda::current_stream()));
    }, nullptr);
    add_row("clone", "float32", 2 * f4, [&] { gpu.copy_strided(av, ov); }, [&] { a.clone(); });
    add_row("add", "float32", 3 * f4, [&] { gpu.binary(BinaryOp::Add, av, bv, ov); }, [&] { add(a, b); });
    add_row("add_row", "float32", 2 * f4 + 4.0 * cols,
            [&] { gpu.binary(BinaryOp::Add, a2.view_desc(), row_b, out2.view_desc()); }, [&] { add(a2, row); });
    add_row("mul", "float32", 3 * f4, [&] { gpu.binary(BinaryOp::Mul, av, bv, ov); }, [&] { mul(a, b); });
    add_row("relu", "float32", 2 * f4, [&] { gpu.unary(UnaryOp::Relu, bv, ov, UnaryParams{}); }, [&] { relu(b); });
    add_row("gelu", "float32", 2 * f4, [&] { gpu.unary(UnaryOp::Gelu, av, ov, UnaryParams{}); }, [&] { gelu(a); });
    add_row("cast_bf16", "float32", f4 + f2, [&] { gpu.copy_strided(av, out_bf16.view_desc()); },
            [&] { a.to(DType::BFloat16); });
    add_row("sum", "float32", f4, [&] { gpu.reduce(ReduceOp::Sum, av, 1, n, 1, out_sum.view_desc()); },
            [&] { sum(a); });
    add_row("sum_last", "float32", f4 + 4.0 * double(rows_2d),
            [&] { gpu.reduce(ReduceOp::Sum, a2.view_desc(), rows_2d, cols, 1, out_rows.view_desc()); },
            [&] { sum(a2, {-1}); });
    try {
      const Tensor ah = a.to(DType::BFloat16), bh = b.to(DType::BFloat16);
      add_row("add", "bfloat16", 3 * f2, [&] { gpu.binary(BinaryOp::Add, ah.view_desc(), bh.view_desc(), out_bf16.view_desc()); },
              [&] { add(ah, bh); });
    } catch (const Error& e) {
      rows.push_back(Row{"add", "bfloat16", n, 3 * f2, Timing{-1, e.what()}, Timing{-1, e.what()}});
    }
  }

  auto gbs = [](const Row& r, const Timing& t) { return t.seconds > 0 ? r.bytes / t.seconds / 1e9 : 0.0; };
  if (!json) {
    std::printf("| op | dtype | elements | MB moved | kernel us | kernel GB/s | kernel / memcpy | op us | op / memcpy |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|\n");
  }
  for (const Row& r : rows) {
    double copy = 0;
    for (const Row& c : rows)
      if (c.op == "memcpy" && c.elements == r.elements) copy = gbs(c, c.kernel);
    const double k = gbs(r, r.kernel), o = gbs(r, r.api);
    const double k_ratio = copy > 0 ? k / copy : 0, o_ratio = copy > 0 ? o / copy : 0;
    if (json) {
      std::printf("{\"bench\": \"cuda_bandwidth\", \"op\": \"%s\", \"dtype\": \"%s\", \"elements\": %lld, \"bytes\": %.0f, "
                  "\"kernel_seconds\": %.9f, \"kernel_gb_per_s\": %.1f, \"kernel_vs_memcpy\": %.3f, "
                  "\"op_seconds\": %.9f, \"op_gb_per_s\": %.1f, \"op_vs_memcpy\": %.3f}\n",
                  r.op.c_str(), r.dtype.c_str(), (long long)r.elements, r.bytes, r.kernel.seconds, k, k_ratio,
                  r.api.seconds, o, o_ratio);
      continue;
    }
    char kernel_cols[96] = "n/a | n/a | n/a", op_cols[64] = "n/a | n/a";
    if (r.kernel.seconds > 0)
      std::snprintf(kernel_cols, sizeof kernel_cols, "%.1f | %.0f | %.2f", r.kernel.seconds * 1e6, k, k_ratio);
    if (r.api.seconds > 0) std::snprintf(op_cols, sizeof op_cols, "%.1f | %.2f", r.api.seconds * 1e6, o_ratio);
    if (r.op == "memcpy") std::snprintf(op_cols, sizeof op_cols, "- | -");
    std::printf("| %s | %s | %lld | %.1f | %s | %s |\n", r.op.c_str(), r.dtype.c_str(), (long long)r.elements,
                r.bytes / 1e6, kernel_cols, op_cols);
  }
  for (const Row& r : rows) {
    if (!r.kernel.error.empty())
      std::fprintf(stderr, "%s %s n=%lld (kernel): %s\n", r.op.c_str(), r.dtype.c_str(), (long long)r.elements,
                   r.kernel.error.c_str());
    if (!r.api.error.empty())
      std::fprintf(stderr, "%s %s n=%lld (op): %s\n", r.op.c_str(), r.dtype.c_str(), (long long)r.elements,
                   r.api.error.c_str());
  }
  return 0;
}
