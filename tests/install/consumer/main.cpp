// Trains a small MLP for a few full-batch steps on points labelled by a fixed random linear
// "teacher", with headers and library from an installed Tandem. Exit 0 when the loss fell to
// less than half its first value, 1 otherwise (or on any error).
#include <cstdio>
#include <exception>

#include "engine/nn/nn.h"
#include "engine/optim/adam.h"
#include "tensor/generator.h"
#include "tensor/ops/ops.h"

int main() {
  using namespace tandem;
  try {
    manual_seed(7);
    const Tensor x = Tensor::randn({256, 16});
    const Tensor teacher = Tensor::randn({16, 4});
    const Tensor y = argmax(matmul(x, teacher), 1);
    auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(16, 32), std::make_shared<nn::ReLU>(),
                                                  std::make_shared<nn::Linear>(32, 4));
    optim::AdamW opt(model->parameters(), {1e-2});
    double first = 0, last = 0;
    for (int step = 0; step < 40; ++step) {
      Tensor loss = cross_entropy((*model)(x), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      last = loss.item();
      if (step == 0) first = last;
    }
    std::printf("consumer: loss %.4f -> %.4f after 40 steps\n", first, last);
    if (!(last < 0.5 * first)) {
      std::printf("consumer: FAILED, the loss did not fall below half its first value\n");
      return 1;
    }
    std::printf("consumer: loss decreased\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: error: %s\n", e.what());
    return 1;
  }
}
