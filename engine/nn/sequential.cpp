#include "engine/nn/sequential.h"

namespace tandem::nn {

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(layers_.size()), module);
  layers_.push_back(std::move(module));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& layer : layers_) h = layer->forward(h);
  return h;
}

std::shared_ptr<Module> Sequential::operator[](int64_t i) const {
  const int64_t n = int64_t(layers_.size());
  if (i < -n || i >= n)
    throw ValueError("Sequential: index " + std::to_string(i) + " out of range for " + std::to_string(n) + " modules");
  return layers_[size_t(i < 0 ? i + n : i)];
}

}  // namespace tandem::nn
