// Training-step throughput of issue 3's models on random in-memory batches: forward + backward +
// Adam (lr 1e-3) step, no data loading. `mlp`: 784-1024-1024-10 with ReLU; `cnn`:
// conv(1->32,3x3,p1)-ReLU-maxpool2-conv(32->64,3x3,p1)-ReLU-maxpool2-fc(3136->128)-ReLU-fc(128->10).
// The twin is bench/peers/mlp_step_torch.py; bench/run_mlp_step.sh (CPU) and
// bench/run_train_step_cuda.sh (GPU) run both and print ratios.
//   build/bin/bench_mlp_step [batch] [steps] [mlp|cnn] [cpu|cuda] [32-true|bf16-mixed|16-mixed] [eager|graph]
// `graph` (CUDA): after the warm-up, forward + backward are captured once into a CUDA graph
// (kernels/cuda/step_graph.h) and each step replays it, then runs the Adam step and zeroes the
// gradients in place, as the Trainer does with --trainer.cuda_graph=true.
// On CUDA the clock covers `steps` steps queued back to back and one synchronize at the end
// (throughput, as the twin measures it), and the JSON adds the allocator's peak device bytes.
// bf16-mixed runs the step under autocast; 16-mixed adds the GradScaler (scaled loss, unscale
// and inf check, one host sync per step, as PyTorch's GradScaler).
#include <algorithm>
#include <chrono>
#include <memory>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/peak_measure.h"
#include "engine/accelerators/cuda_accelerator.h"
#include "engine/nn/nn.h"
#include "engine/optim/adam.h"
#include "engine/strategies/grad_scaler.h"
#include "kernels/backend.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cuda/step_graph.h"
#include "tensor/generator.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/host_checks.h"

using namespace tandem;

namespace {

// Multiply-adds per sample of one training step's products: the forward, every weight gradient,
// and the input gradients of all layers but the first (nothing asks for the data's gradient).
// Elementwise work, the loss and Adam are left out, so "% of peak" is the GEMM/conv share's rate.
double step_macs_per_sample(const std::string& kind) {
  if (kind == "cnn") {
    const double conv1 = 32.0 * 1 * 9 * 28 * 28, conv2 = 64.0 * 32 * 9 * 14 * 14, fc1 = 3136.0 * 128, fc2 = 128.0 * 10;
    return 2 * (conv1 + conv2 + fc1 + fc2) + (conv2 + fc1 + fc2);
  }
  const double l1 = 784.0 * 1024, l2 = 1024.0 * 1024, l3 = 1024.0 * 10;
  return 2 * (l1 + l2 + l3) + (l2 + l3);
}

}  // namespace

int main(int argc, char** argv) try {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 256;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 50;
  const std::string kind = argc > 3 ? argv[3] : "mlp";
  const std::string device_name = argc > 4 ? argv[4] : "cpu";
  const std::string precision = argc > 5 ? argv[5] : "32-true";
  const std::string mode = argc > 6 ? argv[6] : "eager";
  if (mode != "eager" && mode != "graph") {
    std::fprintf(stderr, "bench_mlp_step: mode must be eager or graph, got %s\n", mode.c_str());
    return 2;
  }
  if (mode == "graph" && device_name != "cuda") {
    std::fprintf(stderr, "bench_mlp_step: graph mode runs on cuda only\n");
    return 2;
  }
  if (device_name != "cpu" && device_name != "cuda") {
    std::fprintf(stderr, "bench_mlp_step: device must be cpu or cuda, got %s\n", device_name.c_str());
    return 2;
  }
  if (precision != "32-true" && precision != "bf16-mixed" && precision != "16-mixed") {
    std::fprintf(stderr, "bench_mlp_step: precision must be 32-true, bf16-mixed or 16-mixed, got %s\n", precision.c_str());
    return 2;
  }
  if (precision != "32-true" && device_name != "cuda") {
    std::fprintf(stderr, "bench_mlp_step: %s runs on cuda only (autocast lowers CUDA ops)\n", precision.c_str());
    return 2;
  }
  const Device device = device_name == "cuda" ? Device::cuda(0) : Device::cpu();
  std::optional<DType> low;
  if (precision == "bf16-mixed") low = DType::BFloat16;
  if (precision == "16-mixed") low = DType::Float16;
  std::optional<trainer::GradScaler> scaler;
  if (precision == "16-mixed") scaler.emplace();
  manual_seed(0);
  std::shared_ptr<nn::Sequential> model;
  Tensor x;
  if (kind == "cnn") {
    model = std::make_shared<nn::Sequential>(
        std::make_shared<nn::Conv2d>(1, 32, 3, 1, 1), std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
        std::make_shared<nn::Conv2d>(32, 64, 3, 1, 1), std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
        std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(3136, 128), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(128, 10));
    x = Tensor::randn({batch, 1, 28, 28});
  } else {
    model = std::make_shared<nn::Sequential>(
        std::make_shared<nn::Linear>(784, 1024), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(1024, 1024),
        std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(1024, 10));
    x = Tensor::randn({batch, 784});
  }
  model->to(device);
  x = x.to(device);
  optim::Adam opt(model->parameters(), {1e-3});
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[size_t(i)] = i % 10;
  Tensor y = Tensor::from_vector(labels, {batch}).to(device);
  const bool graphed = mode == "graph";
  auto forward_backward = [&] {
    Tensor loss;
    {
      autocast::Guard autocast(low);
      loss = cross_entropy((*model)(x), y);
    }
    (scaler ? scaler->scale_loss(loss) : loss).backward();
  };
  auto update = [&] {
    if (scaler) {
      const bool finite = scaler->unscale(model->parameters());
      if (finite) opt.step();
      scaler->update(!finite);
    } else {
      opt.step();
    }
    opt.zero_grad(/*set_to_none=*/!graphed);  // a graph accumulates into the buffers it captured
  };
  std::unique_ptr<cuda::StepGraph> graph;
  auto step = [&] {
    if (graph) {
      graph->replay();
    } else {
      forward_backward();
    }
    update();
  };
  auto sync = [&] { backend_for(device).synchronize(device.index); };
  for (int i = 0; i < 5; ++i) step();  // warm-up (and the allocator's cache)
  if (graphed) {
    // The labels were checked in the eager warm-up; a graph cannot hold that check's host read.
    graph = cuda::StepGraph::capture(device.index, [&] {
      ops::DeferHostChecks defer;
      forward_backward();
    });
  }
  sync();
  double step_s = 0;
  if (device.is_cuda()) {
    // Throughput: steps queued back to back, one wait at the end; best of three rounds.
    step_s = 1e30;
    for (int round = 0; round < 3; ++round) {
      auto a = std::chrono::steady_clock::now();
      for (int i = 0; i < steps; ++i) step();
      sync();
      step_s = std::min(step_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count() / steps);
    }
  } else {
    std::vector<double> times;
    for (int i = 0; i < steps; ++i) {
      auto a = std::chrono::steady_clock::now();
      step();
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
    }
    std::sort(times.begin(), times.end());
    step_s = times[times.size() / 2];
  }
  // On the CPU: the model's FLOP rate and its share of the FMA peak measured here, on as many threads.
  const double step_gflops = 2.0 * step_macs_per_sample(kind) * double(batch) / step_s / 1e9;
  const double peak_gflops = device.is_cuda() ? 0.0 : bench::fma_peak_gflops(cpu::max_threads()).wall;
  double peak_mb = 0;
  if (device.is_cuda()) {
    const DeviceStats stats = CUDAAccelerator().get_device_stats(AcceleratorDevice{"cuda", 0});
    if (stats.count("peak_allocated_bytes")) peak_mb = stats.at("peak_allocated_bytes") / 1e6;
  }
  std::printf("{\"bench\": \"%s_step\", \"impl\": \"tandem\", \"mode\": \"%s\", \"device\": \"%s\", \"precision\": \"%s\", "
              "\"batch\": %lld, \"step_ms\": %.3f, \"samples_per_s\": %.0f, \"peak_device_mb\": %.1f, "
              "\"gflops\": %.1f, \"peak_gflops\": %.1f, \"pct_peak\": %.1f}\n",
              kind.c_str(), mode.c_str(), device_name.c_str(), precision.c_str(), (long long)batch, step_s * 1e3,
              double(batch) / step_s, peak_mb, step_gflops, peak_gflops,
              peak_gflops > 0 ? 100.0 * step_gflops / peak_gflops : 0.0);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_mlp_step: %s\n", e.what());
  return 1;
}
