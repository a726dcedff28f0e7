// Sequential: runs its modules in order, each one's output feeding the next; a Linear followed
// by an activation it fuses (Module::fusable_activation: ReLU, the tanh GELU) runs as one op,
// with the same values. Children are named "0", "1", ... so state_dict keys match PyTorch's
// nn.Sequential ("0.weight").
#pragma once
#include <memory>
#include <vector>

#include "engine/nn/module.h"

namespace tandem::nn {

class Sequential : public Module {
 public:
  Sequential() = default;
  template <typename... Ms>
  explicit Sequential(std::shared_ptr<Ms>... modules) {
    (push_back(std::move(modules)), ...);
  }
  std::string name() const override { return "Sequential"; }
  Tensor forward(const Tensor& x) override;

  void push_back(std::shared_ptr<Module> module);
  size_t size() const { return layers_.size(); }
  // The i-th module; negative i counts from the end. Throws ValueError when out of range.
  std::shared_ptr<Module> operator[](int64_t i) const;
  template <typename M>
  std::shared_ptr<M> at(int64_t i) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[i]);
    if (!m) throw ValueError("Sequential: module " + std::to_string(i) + " is a " + (*this)[i]->name() +
                             ", not the type asked for");
    return m;
  }

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

}  // namespace tandem::nn
