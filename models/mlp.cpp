#include "models/mlp.h"

#include "engine/nn/nn.h"

namespace tandem::models {

MLP::MLP(MLPOptions o, OptimizationConfig optimization) : ImageClassifier(std::move(optimization)), options(std::move(o)) {
  TANDEM_CHECK(!options.hidden.empty(), ValueError, "MLP: hidden must name at least one layer size, like [1024, 1024]");
  TANDEM_CHECK(options.dropout >= 0 && options.dropout < 1, ValueError,
               "MLP: dropout must be in [0, 1), got " + std::to_string(options.dropout));
  net = register_module("net", std::make_shared<nn::Sequential>());
  int64_t width = options.in_features;
  for (int64_t h : options.hidden) {
    TANDEM_CHECK(h > 0, ValueError, "MLP: hidden sizes must be positive, got " + std::to_string(h));
    net->push_back(std::make_shared<nn::Linear>(width, h));
    net->push_back(std::make_shared<nn::ReLU>());
    if (options.dropout > 0) net->push_back(std::make_shared<nn::Dropout>(options.dropout));
    width = h;
  }
  net->push_back(std::make_shared<nn::Linear>(width, options.num_classes));

  hparams["model"] = "mlp";
  hparams["hidden"] = options.hidden;
  hparams["dropout"] = options.dropout;
  record_optimization_hparams();
}

Tensor MLP::prepare_input(const Tensor& input) const {
  return input.dim() > 2 ? input.flatten(1) : input;
}

}  // namespace tandem::models
