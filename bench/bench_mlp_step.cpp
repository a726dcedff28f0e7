// Training-step throughput of issue 3's models on random in-memory batches: forward + backward +
// Adam (lr 1e-3) step, no data loading. `mlp`: 784-1024-1024-10 with ReLU; `cnn`:
// conv(1->32,3x3,p1)-ReLU-maxpool2-conv(32->64,3x3,p1)-ReLU-maxpool2-fc(3136->128)-ReLU-fc(128->10).
// The twin is bench/peers/mlp_step_torch.py; bench/run_mlp_step.sh runs both and prints ratios.
//   build/bin/bench_mlp_step [batch] [steps] [mlp|cnn]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/nn/nn.h"
#include "engine/optim/adam.h"
#include "engine/tensor/generator.h"

using namespace tandem;

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 256;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 50;
  const std::string kind = argc > 3 ? argv[3] : "mlp";
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
  optim::Adam opt(model->parameters(), {1e-3});
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[size_t(i)] = i % 10;
  Tensor y = Tensor::from_vector(labels, {batch});
  auto step = [&] {
    Tensor loss = cross_entropy((*model)(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
  };
  for (int i = 0; i < 5; ++i) step();  // warm-up
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    auto a = std::chrono::steady_clock::now();
    step();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  std::printf("{\"bench\": \"%s_step\", \"impl\": \"tandem\", \"batch\": %lld, \"step_ms\": %.3f, \"samples_per_s\": %.0f}\n",
              kind.c_str(), (long long)batch, median * 1e3, double(batch) / median);
  return 0;
}
