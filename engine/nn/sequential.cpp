#include "engine/nn/sequential.h"

#include <typeinfo>

#include "engine/nn/linear.h"

namespace tandem::nn {

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(layers_.size()), module);
  layers_.push_back(std::move(module));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    // A Linear (the class itself: a subclass may override forward) followed by an activation
    // that linear() fuses runs as one op.
    const std::string act = i + 1 < layers_.size() ? layers_[i + 1]->fusable_activation() : "";
    if (!act.empty() && typeid(*layers_[i]) == typeid(Linear)) {
      h = static_cast<Linear&>(*layers_[i]).forward(h, act);
      ++i;
      continue;
    }
    h = layers_[i]->forward(h);
  }
  return h;
}

std::shared_ptr<Module> Sequential::operator[](int64_t i) const {
  const int64_t n = int64_t(layers_.size());
  if (i < -n || i >= n)
    throw ValueError("Sequential: index " + std::to_string(i) + " out of range for " + std::to_string(n) + " modules");
  return layers_[size_t(i < 0 ? i + n : i)];
}

}  // namespace tandem::nn
