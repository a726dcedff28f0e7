#include "models/cnn.h"

#include "engine/nn/nn.h"

namespace tandem::models {

CNN::CNN(CNNOptions o, OptimizationConfig optimization) : ImageClassifier(std::move(optimization)), options(o) {
  net = register_module("net", std::make_shared<nn::Sequential>());
  auto conv_block = [&](int64_t in, int64_t out) {
    net->push_back(std::make_shared<nn::Conv2d>(in, out, 3, 1, 1));
    if (options.batch_norm) net->push_back(std::make_shared<nn::BatchNorm2d>(out));
    net->push_back(std::make_shared<nn::ReLU>());
    net->push_back(std::make_shared<nn::MaxPool2d>(2));
  };
  conv_block(1, 32);
  conv_block(32, 64);
  net->push_back(std::make_shared<nn::Flatten>());
  net->push_back(std::make_shared<nn::Linear>(64 * 7 * 7, 128));
  net->push_back(std::make_shared<nn::ReLU>());
  net->push_back(std::make_shared<nn::Linear>(128, options.num_classes));

  hparams["model"] = "cnn";
  hparams["batch_norm"] = options.batch_norm;
  record_optimization_hparams();
}

Tensor CNN::prepare_input(const Tensor& input) const {
  if (input.dim() == 2) {
    TANDEM_CHECK(input.size(1) == 28 * 28, ShapeError,
                 "CNN: a flat input must have 784 = 28x28 features, got " + std::to_string(input.size(1)));
    return input.reshape({input.size(0), 1, 28, 28});
  }
  if (input.dim() == 3) return input.unsqueeze(1);  // [B, 28, 28] -> [B, 1, 28, 28]
  return input;
}

}  // namespace tandem::models
